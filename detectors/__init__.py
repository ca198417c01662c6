"""Built-in detectors, one module per family; each registers its factories with `@detector(...)`."""
