"""``strata algo``: PageRank, BFS, SSSP or connected components of a graph.

Usage::

    strata algo pagerank|bfs|sssp|cc GRAPH --out FILE.parquet|FILE.csv
                [--source ID] [--iterations N] [--tol T] [--damping D]
                [--workers P] [--placement hash|hash-combiner|hubsplit]
                [--mesh zmq|sim] [--report FILE.json|-] [--data-dir D]

``GRAPH`` is any graph spec (:mod:`strata.storage.spec`): a dataset directory (e.g.
from ``strata dataset import --format snap``), an edge-list file (SNAP text, CSV,
TSV, Parquet, ...), or a generator (``rmat:scale=16``). ``--out`` gets one row per
vertex, ``node_id,value``, with the graph's *original* ids (a file's own ids, after
the loader's id mapping), atomically:

* ``pagerank``: float64 rank (networkx ``DiGraph`` semantics: repeated edges count
  once, dangling mass spread uniformly). ``--tol T`` stops once the L1 change is
  below ``N*T`` (networkx's rule) with ``--iterations`` as the cap (default 100);
  ``--iterations N`` alone runs exactly N steps; neither: ``--tol 1e-6``.
* ``bfs``: int64 hop count from ``--source``, ``-1`` where unreachable.
* ``sssp``: float64 distance from ``--source`` over the edge weights (a ``weight``
  column; all 1 without one), ``inf`` where unreachable; weights must be ``>= 0``.
* ``cc``: the weak component's label, the smallest *original* id in it.

``--source`` takes an original id; an id that is not in the graph is a usage error
naming it. ``--workers P > 1`` runs the partitioned version
(:func:`strata.operators.algorithms.distributed.run_distributed`) on P ranks with
``--placement`` (default ``hash-combiner``) over ``--mesh`` (default ``zmq``: one
process per rank; ``sim``: threads, counted). ``--report`` writes the JSON report:
``algorithm``, ``iterations``, ``seconds`` (the kernel), ``wall_seconds`` (load to
write), ``bytes`` sent between ranks (0 on one process) and, with workers, the
per-rank load (``ranks``: tasks, bytes, busy seconds); ``-`` prints it to stdout.

Examples:
    >>> import argparse, tempfile, os
    >>> cmd = AlgoCommand()
    >>> parser = argparse.ArgumentParser(prog="strata algo")
    >>> cmd.configure(parser)
    >>> out = os.path.join(tempfile.mkdtemp(), "bfs.csv")
    >>> args = parser.parse_args(["bfs", "rmat:scale=6,edge_factor=4", "--source",
    ...                           "0", "--out", out])
    >>> cmd.run(args)  # doctest: +ELLIPSIS
    bfs: 64 nodes, 256 edges, ... levels, ... s -> .../bfs.csv
    0
    >>> Path(out).read_text().splitlines()[0]
    '"node_id","value"'
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from strata.engine import UsageError, at_least, check_output_file
from strata.engine.checks import is_stdout
from strata.engine.cli import reserve_stdout
from strata.operators.algorithms import (
    ALGORITHMS,
    AlgorithmError,
    AlgorithmResult,
    bfs,
    connected_components,
    pagerank,
    sssp,
)
from strata.operators.cli.tables import write_node_table
from strata.storage import GraphDataset, StorageError
from strata.storage.spec import load_graph

_WHERE = "strata algo"
OUT_SUFFIXES = (".parquet", ".pq", ".csv")
PLACEMENTS = ("hash", "hash-combiner", "hubsplit")
_UNITS = {"pagerank": "iterations", "bfs": "levels", "sssp": "settled", "cc": "pass"}


def find_source(dataset: GraphDataset, text: str) -> int:
    """The internal id of the vertex whose original id is ``text``.

    Raises:
        UsageError: naming ``--source`` when no vertex has that id.
    """
    ids = dataset.original_ids
    value: Any = text
    if np.issubdtype(ids.dtype, np.integer):
        try:
            value = int(text)
        except ValueError:
            value = None
    hits = np.flatnonzero(ids == value) if value is not None else np.empty(0)
    if hits.size == 0:
        sample = ", ".join(str(x) for x in ids[:3].tolist())
        raise UsageError.build(
            "--source",
            _WHERE,
            f"an id of the graph's {ids.shape[0]} nodes (original ids"
            + (f", e.g. {sample}" if sample else "")
            + ")",
            repr(text),
        )
    return int(hits[0])


def write_values(path: Path, node_ids: np.ndarray, values: np.ndarray) -> None:
    """Write ``node_id,value`` rows (Parquet or CSV by suffix), atomically."""
    write_node_table(path, node_ids, "value", values, argument="--out", where=_WHERE)


class AlgoCommand:
    """``strata algo ALGORITHM GRAPH --out FILE ...`` (see the module doc)."""

    name = "algo"
    help = "PageRank, BFS, SSSP or connected components of a graph"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the arguments."""
        parser.add_argument("algorithm", choices=ALGORITHMS)
        parser.add_argument("graph", metavar="GRAPH", help="a graph spec or path")
        parser.add_argument(
            "--out", type=Path, required=True, help="FILE.parquet or FILE.csv"
        )
        parser.add_argument("--source", help="bfs/sssp source (an original id)")
        parser.add_argument("--iterations", type=int, default=None)
        parser.add_argument("--tol", type=float, default=None)
        parser.add_argument("--damping", type=float, default=0.85)
        parser.add_argument("--workers", type=int, default=1)
        parser.add_argument("--placement", choices=PLACEMENTS, default=None)
        parser.add_argument("--mesh", choices=("zmq", "sim"), default="zmq")
        parser.add_argument(
            "--report",
            type=Path,
            default=None,
            help="JSON report ('-': to stdout, and the summary line to stderr)",
        )
        parser.add_argument("--data-dir", type=Path, default=None)

    def run(self, args: argparse.Namespace) -> int:
        """Run the algorithm, write values and report; 1 on bad input."""
        try:
            return self._run(args)
        except (AlgorithmError, StorageError, UsageError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1

    def _check(self, args: argparse.Namespace) -> None:
        """Refuse bad arguments before the graph is loaded."""
        at_least(_WHERE, 1, **{"--workers": args.workers})
        at_least(_WHERE, 1, **{"--iterations": args.iterations})
        if args.tol is not None and not args.tol > 0:
            raise UsageError.build("--tol", _WHERE, "a tolerance > 0", str(args.tol))
        if not 0.0 <= args.damping <= 1.0:
            raise UsageError.build(
                "--damping", _WHERE, "0 <= damping <= 1", str(args.damping)
            )
        needs_source = args.algorithm in ("bfs", "sssp")
        if needs_source and args.source is None:
            raise UsageError.build(
                "--source", _WHERE, f"a source id for {args.algorithm}", "none"
            )
        if not needs_source and args.source is not None:
            raise UsageError.build(
                "--source", _WHERE, f"no source for {args.algorithm}", args.source
            )
        if args.algorithm != "pagerank":
            for flag, value in (("--iterations", args.iterations), ("--tol", args.tol)):
                if value is not None:
                    raise UsageError.build(
                        flag,
                        _WHERE,
                        "only with pagerank",
                        f"{value} for {args.algorithm}",
                    )
        if args.placement is not None and args.workers == 1:
            raise UsageError.build(
                "--placement", _WHERE, "--workers > 1 with a placement", "--workers 1"
            )
        check_output_file(args.out, argument="--out", where=_WHERE, stdout=False)
        if args.out.suffix.lower() not in OUT_SUFFIXES:
            raise UsageError.build(
                "--out",
                _WHERE,
                f"a file ending in one of {OUT_SUFFIXES}",
                repr(str(args.out)),
            )
        if args.report is not None:
            check_output_file(args.report, argument="--report", where=_WHERE)
        if args.data_dir is not None and not args.data_dir.is_dir():
            raise UsageError.build(
                "--data-dir", _WHERE, "a directory", f"{str(args.data_dir)!r}"
            )

    def _run(self, args: argparse.Namespace) -> int:
        self._check(args)
        if is_stdout(args.report):  # stdout carries the JSON report alone
            with reserve_stdout():
                report = self._compute(args)
            print(json.dumps(report, indent=2, sort_keys=True), flush=True)
        else:
            report = self._compute(args)
        unit = _UNITS[args.algorithm]
        print(
            f"{args.algorithm}: {report['num_nodes']} nodes, "
            f"{report['num_edges']} edges, {report['iterations']} {unit}, "
            f"{report['seconds']:.3f} s -> {args.out}",
            file=sys.stderr if is_stdout(args.report) else sys.stdout,
        )
        return 0

    def _compute(self, args: argparse.Namespace) -> dict[str, Any]:
        start = time.perf_counter()
        dataset = load_graph(args.graph, data_dir=args.data_dir)
        graph = dataset.graph
        source = None
        if args.source is not None:
            source = find_source(dataset, args.source)
        if args.workers > 1:
            values, report = self._distributed(args, dataset, source)
        else:
            result = self._single(args, dataset, source)
            values = result.values
            report = {**result.to_dict(), "workers": 1, "bytes": 0}
        if args.algorithm == "cc" and values.size:  # labels as original ids
            values = dataset.original_ids[values]
        write_values(args.out, dataset.original_ids, values)
        report.update(
            graph=args.graph,
            num_nodes=graph.num_nodes,
            num_edges=graph.num_edges,
            source=args.source,
            wall_seconds=time.perf_counter() - start,
            out=str(args.out),
        )
        if args.report is not None and not is_stdout(args.report):
            try:
                args.report.parent.mkdir(parents=True, exist_ok=True)
                args.report.write_text(json.dumps(report, indent=2, sort_keys=True))
            except OSError as error:
                raise UsageError.build(
                    "--report",
                    _WHERE,
                    "a writable file path",
                    f"{str(args.report)!r} ({error.strerror or error})",
                ) from None
        return report

    def _single(
        self, args: argparse.Namespace, dataset: GraphDataset, source: int | None
    ) -> AlgorithmResult:
        graph = dataset.graph
        if args.algorithm == "pagerank":
            return pagerank(
                graph, damping=args.damping, iterations=args.iterations, tol=args.tol
            )
        if args.algorithm == "cc":
            return connected_components(graph)
        assert source is not None
        if args.algorithm == "bfs":
            return bfs(graph, source)
        return sssp(graph, source, node_ids=dataset.original_ids)

    def _distributed(
        self, args: argparse.Namespace, dataset: GraphDataset, source: int | None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        from strata.operators.algorithms.distributed import run_distributed

        params: dict[str, Any] = {}
        if args.algorithm == "pagerank":  # the single-process defaults (networkx's)
            params["damping"] = args.damping
            params["iterations"] = args.iterations or 100
            if args.tol is not None or args.iterations is None:
                params["tol"] = args.tol or 1e-6
        if source is not None:
            params["source"] = source
        if args.algorithm == "sssp":  # the same refusal as on one process
            from strata.operators.algorithms._graph import edge_weights

            edge_weights(dataset.graph, None, "sssp", dataset.original_ids)
        placement = args.placement or "hash-combiner"
        values, report = run_distributed(
            args.algorithm,
            dataset.graph,
            args.workers,
            placement,
            mesh=args.mesh,
            **params,
        )
        out = report.to_dict()
        out.update(iterations=report.supersteps, bytes=report.total_bytes)
        return values, out
