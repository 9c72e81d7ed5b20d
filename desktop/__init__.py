"""PySide6 desktop front end for SpecPrefill. Holds no model logic: every model call goes to `engine`."""
