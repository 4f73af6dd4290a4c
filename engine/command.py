"""The contract of one ``strata`` subcommand.

The engine owns ``strata run`` and ``strata describe``; graph-aware packages contribute
their own subcommands (``strata dataset``, ``strata partition``) by implementing this
protocol, and ``operators.cli.main`` assembles them, so the engine stays graph-agnostic.

Examples:
    >>> import argparse
    >>> class Hello:
    ...     name = "hello"
    ...     help = "print a greeting"
    ...     def configure(self, parser: argparse.ArgumentParser) -> None:
    ...         parser.add_argument("who")
    ...     def run(self, args: argparse.Namespace) -> int:
    ...         print(f"hello {args.who}")
    ...         return 0
    >>> isinstance(Hello(), Command)
    True
"""

from __future__ import annotations

import argparse
from typing import Protocol, runtime_checkable


@runtime_checkable
class Command(Protocol):
    """One ``strata <name>`` subcommand: configures its parser, then runs."""

    name: str
    help: str

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add this command's arguments (and nested subcommands) to ``parser``."""
        ...

    def run(self, args: argparse.Namespace) -> int:
        """Run with parsed arguments; return the process exit status."""
        ...
