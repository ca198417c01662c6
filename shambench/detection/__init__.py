"""What detectors are: the plugin base class, and placing quoted strings in a response."""
