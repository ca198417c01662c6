"""Built-in context providers, one module each; each registers itself with `@context_provider(...)`."""
