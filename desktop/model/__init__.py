"""The app's Qt-free logic: what the window shows and enables, worked out as plain data (no PySide6)."""
