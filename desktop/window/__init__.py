"""The main window and its flows: the flows get the widgets, sessions and callbacks they use, never the window."""
