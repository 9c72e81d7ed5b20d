"""Qt-free SpecPrefill engine: ingestion, draft selector, target runtime, pipeline."""
