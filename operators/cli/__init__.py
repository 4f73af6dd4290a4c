"""The ``strata`` command line (entry point: :func:`strata.operators.cli.main.main`)."""
