"""The app's QObjects without widgets: the engine host, the worker threads and each job's session."""
