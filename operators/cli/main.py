"""The ``strata`` console script: the engine's commands plus graph-aware ones.

To add a subcommand, implement :class:`engine.command.Command` and append an
instance to :data:`COMMANDS` (one line).

Examples:
    >>> main(["describe", "engine._example_job"])
    pipeline 'example': 2 steps
      numbers  batch  engine._example_job:numbers
      total    batch  engine._example_job:total    <- numbers  [outputs]
    0
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.cli import main as engine_main
from engine.command import Command
from operators.cli.dataset import DatasetCommand

#: Subcommands beyond the engine's ``run`` and ``describe``.
COMMANDS: list[Command] = [DatasetCommand()]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``strata`` with ``argv`` (default: the process arguments)."""
    return engine_main(argv, COMMANDS)
