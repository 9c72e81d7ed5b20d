"""The app's widgets: each draws its own part and knows nothing of the main window."""
