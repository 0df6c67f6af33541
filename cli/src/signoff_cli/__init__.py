"""The ``signoff`` command line: a thin shell that gathers subcommands by entry point."""
