"""The engine's small core: settings schema, events, errors, cancel, steps, paths, atomic writes,
memory checks and formatting. It imports nothing else of the engine."""
