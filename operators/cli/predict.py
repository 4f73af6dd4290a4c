"""``strata predict MODEL GRAPH --out FILE.parquet``: run a saved model on a graph.

``MODEL`` is the ``model/`` directory a training job wrote (``--set
output_dir=DIR``: ``DIR/model``); ``GRAPH`` is any graph spec (``planetoid:cora``, a
dataset directory, an edge list). The features are prepared as in training (the
saved model records whether they were row-normalised), and the output is the
``predictions.parquet`` of :mod:`strata.operators.io.results`: ``node_id``,
``split``, ``label``, ``pred`` and ``probabilities``.

Exit status: 0 on success, 2 for a bad argument (checked before any work).

Examples:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="strata predict")
    >>> PredictCommand().configure(parser)
    >>> args = parser.parse_args(["out/model", "planetoid:cora", "--out", "p.parquet"])
    >>> str(args.model), args.graph, str(args.out)
    ('out/model', 'planetoid:cora', 'p.parquet')
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_USAGE = 0, 2


class PredictCommand:
    """``strata predict``: an :class:`strata.engine.command.Command`."""

    name = "predict"
    help = "run a saved model (a training job's output_dir/model) on a graph"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``MODEL``, ``GRAPH`` and ``--out``."""
        parser.add_argument("model", type=Path, help="a saved model directory")
        parser.add_argument("graph", help="a graph spec (planetoid:cora, a path)")
        parser.add_argument(
            "--out", type=Path, required=True, help="predictions (.parquet)"
        )
        parser.add_argument("--data-dir", help="Planetoid files other than Cora")

    def run(self, args: argparse.Namespace) -> int:
        """Load the model and the graph, predict, write the file."""
        from strata.engine.checks import check_output_file
        from strata.engine.errors import UsageError
        from strata.operators.errors import OperatorError
        from strata.operators.io.datasets import load_dataset
        from strata.operators.io.results import load_model, predict, write_predictions
        from strata.operators.io.results import node_ids as ids_of
        from strata.operators.trainers.data import as_training_data
        from strata.storage import StorageError

        try:
            check_output_file(
                args.out, argument="--out", where="strata predict", stdout=False
            )
            if args.out.suffix != ".parquet":
                raise UsageError.build(
                    "--out", "strata predict", "a .parquet file", repr(str(args.out))
                )
            model, saved = load_model(args.model)
            payload = load_dataset(
                args.graph,
                args.data_dir,
                normalize_features=saved.normalize_features,
            )
            data = as_training_data(payload, "strata predict")
            if data.num_features != saved.in_channels:
                raise OperatorError.build(
                    "GRAPH",
                    "strata predict",
                    f"{saved.in_channels} features per node (the model's input)",
                    f"{data.num_features}",
                )
            logits, _ = predict(model, data)
            write_predictions(args.out, ids_of(payload), logits, data)
        except (UsageError, OperatorError, StorageError, OSError) as exc:
            print(f"strata predict: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{data.num_nodes} predictions -> {args.out}", file=sys.stderr)
        return EXIT_OK
