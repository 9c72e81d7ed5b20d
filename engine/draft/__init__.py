"""The draft selector on torch + transformers: loading, look-ahead scoring, chunk selection."""
