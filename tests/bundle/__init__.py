"""The desktop bundle\x27s tests. Not `tests/dist/`: pytest never collects from folders named dist or build."""
