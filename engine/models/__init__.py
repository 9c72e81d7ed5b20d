"""The default models: where they come from (PyPI chunk packages), where they live, and their hashes."""
