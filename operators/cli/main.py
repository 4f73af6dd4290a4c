"""The ``strata`` console script: the engine's commands plus graph-aware ones.

To add a subcommand, implement :class:`strata.engine.command.Command` and append an
instance to :data:`COMMANDS` (one line), or a :class:`strata.engine.command.LazyCommand`
naming it when its module is heavy.

Examples:
    >>> main(["describe", "strata.engine._example_job"])
    pipeline 'example': 2 steps
      numbers  batch  strata.engine._example_job:numbers
      total    batch  strata.engine._example_job:total    <- numbers  [outputs]
    0
"""

from __future__ import annotations

from collections.abc import Sequence

from strata.engine.cli import main as engine_main
from strata.engine.command import Command, LazyCommand

#  Subcommands beyond the engine's ``run`` and ``describe``. Lazy entries import  their
# module only when chosen: ``strata.operators.cli.dataset`` imports storage, hence
# torch (2 s), which ``strata run`` and its fork server should not pay for.
COMMANDS: list[Command] = [
    LazyCommand(
        "dataset",
        "import, inspect and generate dataset directories",
        "strata.operators.cli.dataset:DatasetCommand",
    ),
    LazyCommand(
        "partition",
        "partition a graph (metis, grem, ldg, fennel, hdrf, random, hash)",
        "strata.operators.cli.partition:PartitionCommand",
    ),
    LazyCommand(
        "predict",
        "run a saved model (a training job's output_dir/model) on a graph",
        "strata.operators.cli.predict:PredictCommand",
    ),
    LazyCommand(
        "ingest",
        "send an update file (Parquet/CSV) to a streaming job's ingestion endpoint",
        "strata.operators.cli.ingest:IngestCommand",
    ),
    LazyCommand(
        "plan",
        "predict each training plan's epoch time and memory, and pick one",
        "strata.operators.cli.plan:PlanCommand",
        add_help=False,  # its --help lists the job's parameters too
    ),
    LazyCommand(
        "algo",
        "PageRank, BFS, SSSP or connected components of a graph",
        "strata.operators.cli.algo:AlgoCommand",
    ),
    LazyCommand(
        "plot",
        "draw a run report's curves, or a benchmark JSON's bars (matplotlib)",
        "strata.operators.cli.plot:PlotCommand",
    ),
]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``strata`` with ``argv`` (default: the process arguments)."""
    return engine_main(argv, COMMANDS)


if __name__ == "__main__":  # python -m strata.operators.cli.main (torchrun -m)
    raise SystemExit(main())
