"""The ``cdc-lake`` command line: one click group whose verbs follow the CLI contract."""
