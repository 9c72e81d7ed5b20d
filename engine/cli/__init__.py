"""The `specprefill` command line: one module per verb, the options generated from the settings schema;
engine.cli.main builds the parser and runs a verb."""
