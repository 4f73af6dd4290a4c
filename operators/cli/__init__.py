"""The ``strata`` command line (entry point: :func:`operators.cli.main.main`)."""
