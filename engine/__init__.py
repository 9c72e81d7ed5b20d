"""Qt-free SpecPrefill engine: ingestion, draft selector, target runtime, pipeline."""

import os

# No network at run time: transformers and the hub read local files only. Set before any
# submodule imports them; a user who exports other values keeps them.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
