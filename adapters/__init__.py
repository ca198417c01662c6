"""Built-in adapters, one module per published corpus; each registers itself with `@adapter(...)`."""
