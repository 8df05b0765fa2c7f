"""Model presets and the transformers internals the suite touches (the lowest layer)."""
