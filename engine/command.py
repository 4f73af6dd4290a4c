"""The contract of one ``strata`` subcommand.

The engine owns ``strata run`` and ``strata describe``; graph-aware packages contribute
their own subcommands (``strata dataset``, ``strata partition``) by implementing this
protocol, and ``strata.operators.cli.main`` assembles them, so the engine stays
graph-agnostic.

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

A command whose module is heavy (storage imports torch) can be registered lazily, so
``strata run`` does not pay for ``strata dataset``'s imports:

    >>> lazy = LazyCommand(
    ...     "hello", "print a greeting", "strata.engine.command:_Example"
    ... )
    >>> isinstance(lazy, Command), lazy.name
    (True, 'hello')
"""

from __future__ import annotations

import argparse
import importlib
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


class LazyCommand:
    """A :class:`Command` whose class is imported only when the command is chosen.

    ``strata.engine.cli.main`` configures only the chosen command's parser, so the other
    commands' modules are never imported (``strata --help`` lists them from
    ``name`` and ``help`` alone).

    Args:
        name: The subcommand's name.
        help: One line for ``strata --help``.
        target: ``"package.module:ClassName"`` of the real command (built with no
            arguments).
        add_help: ``False`` when the real command adds its own ``--help`` (a job
            command's lists the job's parameters).
    """

    def __init__(
        self, name: str, help: str, target: str, *, add_help: bool = True
    ) -> None:
        self.name = name
        self.help = help
        self.target = target
        self.add_help = add_help
        self._command: Command | None = None

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Import the real command and let it add its arguments."""
        self._load().configure(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Run the real command."""
        return self._load().run(args)

    def _load(self) -> Command:
        if self._command is None:
            module_name, _, class_name = self.target.partition(":")
            command = getattr(importlib.import_module(module_name), class_name)()
            if not isinstance(command, Command):
                raise TypeError(f"{self.target} is not a strata Command")
            self._command = command
        return self._command


class _Example:
    """The command of the module's examples."""

    name = "hello"
    help = "print a greeting"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("who")

    def run(self, args: argparse.Namespace) -> int:
        print(f"hello {args.who}")
        return 0
