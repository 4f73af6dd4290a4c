"""``strata partition``: partition a graph, report the metrics, save the book.

Usage::

    strata partition GRAPH --k K [--method metis|kahip|multilevel|grem|ldg|fennel|
                     hdrf|random|hash]
                     [--seed N] [--imbalance EPS] [--edge-imbalance EPS]
                     [--passes P] [--halo-hops H]
                     [--chunks M] [--out DIR] [--report PATH] [--data-dir D]
                     [--assignments FILE.parquet|FILE.csv]

``GRAPH`` is any graph spec of the storage CLI (:mod:`strata.storage.spec`):
``planetoid:cora``, ``rmat:scale=16,edge_factor=16,seed=0``, ``sbm:n=10000,blocks=8``,
``rgg:n=100000,radius=0.005``, a dataset directory or an edge-list file. Graphs are
read as undirected (directed inputs are symmetrised, see ``strata.partition.metrics``).
``--method`` resolves through :func:`strata.partition.resolve`: ``metis`` runs pymetis
when it is installed, else Strata's multilevel (also ``--method multilevel``);
``kahip`` needs KaHIP (``pip install 'strata-gnn[kahip]'``). The report's ``backend``
and the summary line name the engine that ran.

``--edge-imbalance EPS`` adds a second balance constraint (multilevel, grem, metis):
every part's sum of degrees (its edge endpoints) stays within ``1 + EPS`` of the
mean as well; the report's ``edge_balance`` (printed in the summary line) is that
ratio for every method.

``--out DIR`` stores the :class:`~strata.partition.book.PartitionBook` (with ``--chunks
M`` its level-2 split) as the array group ``partition/<method>-k<K>`` of the dataset
directory ``DIR``. ``--report PATH`` writes the JSON report: ``method``, ``k``,
``edge_cut_fraction``, ``imbalance``, ``seconds``, ``peak_rss_bytes`` (peak resident
memory above the RSS right after the graph was loaded) and the other fields of
:class:`~strata.partition.types.PartitionReport`; ``--report -`` prints it to stdout,
and the one-line summary, which otherwise goes to stdout, to stderr.

``--assignments FILE`` writes one row per node, ``node_id,part``, as Parquet (a
``.parquet``/``.pq`` suffix) or CSV (``.csv``), with each node's *original* id (the
dataset's ``node_ids`` column when the input's ids were mapped, else ``0..n-1``),
atomically (a temporary file renamed into place).

Every number, ``--out`` and ``--report`` are checked before the graph is loaded: a
bad one prints one ``error:`` line naming the argument and exits 1.

Examples:
    >>> import argparse, json, os, tempfile
    >>> cmd = PartitionCommand()
    >>> parser = argparse.ArgumentParser(prog="strata partition")
    >>> cmd.configure(parser)
    >>> out = tempfile.mkdtemp()
    >>> report = os.path.join(out, "report.json")
    >>> args = parser.parse_args(["sbm:n=400,blocks=4,features=0", "--k", "4",
    ...                           "--out", out, "--report", report])
    >>> cmd.run(args)  # doctest: +ELLIPSIS
    metis k=4: edge_cut_fraction=... imbalance=1.0... seconds=... backend=... -> ...
    0
    >>> with open(report) as f:
    ...     sorted(json.load(f))[:4]
    ['backend', 'book', 'config', 'edge_balance']
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from strata.engine import UsageError, at_least, check_output_dir, check_output_file
from strata.engine.checks import is_stdout
from strata.engine.cli import reserve_stdout
from strata.engine.progress import progress_extra
from strata.operators.cli.tables import write_node_table
from strata.operators.io.partition_book import book_name, save_partition_book
from strata.partition import (
    METHODS,
    ChunkConfig,
    Partition,
    Partitioner,
    PartitionError,
    build_book,
    resolve,
    split_chunks,
)
from strata.storage import CSRGraph, StorageError
from strata.storage.spec import load_graph

_WHERE = "strata partition"
ASSIGNMENT_SUFFIXES = (".parquet", ".pq", ".csv")


def make_partitioner(
    method: str,
    k: int,
    *,
    seed: int,
    imbalance: float,
    passes: int | None,
    edge_imbalance: float | None = None,
) -> Partitioner:
    """The partitioner a CLI ``--method`` names (:func:`strata.partition.resolve`)."""
    partitioner, _ = resolve(
        method,
        k=k,
        imbalance=imbalance,
        seed=seed,
        passes=passes,
        edge_imbalance=edge_imbalance,
    )
    return partitioner


def write_assignments(path: Path, node_ids: np.ndarray, parts: np.ndarray) -> None:
    """Write ``node_id,part`` rows (Parquet or CSV by suffix), atomically."""
    write_node_table(
        path, node_ids, "part", parts, argument="--assignments", where=_WHERE
    )


def peak_rss_bytes() -> int:
    """This process's resident-memory high-water mark (``ru_maxrss``), in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


class PartitionCommand:
    """``strata partition GRAPH --k K ...`` (see the module doc)."""

    name = "partition"
    help = "partition a graph (metis, kahip, multilevel, grem, ldg, fennel, hdrf, ...)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the arguments."""
        parser.add_argument("graph", metavar="GRAPH", help="a graph spec or path")
        parser.add_argument("--k", type=int, required=True, help="number of parts")
        parser.add_argument("--method", choices=METHODS, default="metis")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--imbalance", type=float, default=0.03, help="eps of the balance cap"
        )
        parser.add_argument(
            "--edge-imbalance",
            type=float,
            default=None,
            help="eps of a second cap on each part's degree sum "
            "(multilevel, grem, metis)",
        )
        parser.add_argument(
            "--passes", type=int, default=None, help="stream passes (grem/ldg/fennel)"
        )
        parser.add_argument("--halo-hops", type=int, default=1)
        parser.add_argument(
            "--chunks", type=int, default=None, help="also split parts into M chunks"
        )
        parser.add_argument("--out", type=Path, default=None, help="dataset dir")
        parser.add_argument(
            "--report",
            type=Path,
            default=None,
            help="JSON report ('-': to stdout, and the summary line to stderr)",
        )
        parser.add_argument("--data-dir", type=Path, default=None)
        parser.add_argument(
            "--assignments",
            type=Path,
            default=None,
            help="write node_id,part (original ids) to FILE.parquet or FILE.csv",
        )

    def run(self, args: argparse.Namespace) -> int:
        """Partition, print a summary, write the report and book; 1 on bad input."""
        try:
            return self._run(args)
        except (PartitionError, StorageError, UsageError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1

    def _check(self, args: argparse.Namespace) -> None:
        """Refuse bad numbers and unwritable outputs before the graph is loaded."""
        at_least(
            _WHERE,
            1,
            **{"--k": args.k, "--passes": args.passes, "--chunks": args.chunks},
        )
        at_least(
            _WHERE,
            0,
            **{
                "--seed": args.seed,
                "--imbalance": args.imbalance,
                "--halo-hops": args.halo_hops,
                "--edge-imbalance": args.edge_imbalance,
            },
        )
        if args.out is not None:
            check_output_dir(args.out, argument="--out", where=_WHERE)
        if args.report is not None:
            check_output_file(args.report, argument="--report", where=_WHERE)
        if args.assignments is not None:
            check_output_file(
                args.assignments, argument="--assignments", where=_WHERE, stdout=False
            )
            if args.assignments.suffix.lower() not in ASSIGNMENT_SUFFIXES:
                raise UsageError.build(
                    "--assignments",
                    _WHERE,
                    f"a file ending in one of {ASSIGNMENT_SUFFIXES}",
                    repr(str(args.assignments)),
                )
        if args.data_dir is not None and not args.data_dir.is_dir():
            raise UsageError.build(
                "--data-dir", _WHERE, "a directory", f"{str(args.data_dir)!r}"
            )

    def _run(self, args: argparse.Namespace) -> int:
        self._check(args)
        if is_stdout(args.report):  # stdout carries the JSON report alone
            with reserve_stdout():
                report = self._partition(args)
            print(json.dumps(report, indent=2, sort_keys=True), flush=True)
        else:
            report = self._partition(args)
        print(
            f"{report['method']} k={args.k}: "
            f"edge_cut_fraction={report['edge_cut_fraction']:.4f} "
            f"imbalance={report['imbalance']:.4f} "
            f"edge_balance={report['edge_balance']:.4f} "
            f"seconds={report['seconds']:.3f} "
            f"peak_rss_bytes={report['peak_rss_bytes']} "
            f"backend={report['backend']} -> {args.out or '-'}",
            file=sys.stderr if is_stdout(args.report) else sys.stdout,
        )
        return 0

    def _partition(self, args: argparse.Namespace) -> dict[str, Any]:
        """Load, partition, save the book and write a file report; the report."""
        _phase(0, "load")
        dataset = load_graph(args.graph, data_dir=args.data_dir)
        graph = dataset.graph
        _phase(1, f"partition ({graph.num_nodes:,} nodes, k={args.k})")
        input_rss = int(psutil.Process().memory_info().rss)
        partitioner = make_partitioner(
            args.method,
            args.k,
            seed=args.seed,
            imbalance=args.imbalance,
            passes=args.passes,
            edge_imbalance=args.edge_imbalance,
        )
        start = time.perf_counter()
        part = partitioner.partition(graph)
        wall = time.perf_counter() - start
        peak = peak_rss_bytes()
        _phase(2, "write")
        report: dict[str, Any] = part.report.to_dict()
        report.update(
            graph=args.graph,
            peak_rss_bytes=max(0, peak - input_rss),
            process_peak_rss_bytes=peak,
            input_rss_bytes=input_rss,
            wall_seconds=wall,
            book=None,
        )
        if args.out is not None:
            report["book"] = self._save(args, graph, part)
        if args.assignments is not None:
            write_assignments(args.assignments, dataset.original_ids, part.assignment)
            report["assignments"] = str(args.assignments)
        if args.report is not None and not is_stdout(args.report):
            try:
                args.report.parent.mkdir(parents=True, exist_ok=True)
                args.report.write_text(json.dumps(report, indent=2, sort_keys=True))
            except OSError as error:  # the path changed since it was checked
                raise UsageError.build(
                    "--report",
                    _WHERE,
                    "a writable file path",
                    f"{str(args.report)!r} ({error.strerror or error})",
                ) from None
        _phase(3, "done")
        return report

    def _save(self, args: argparse.Namespace, graph: CSRGraph, part: Partition) -> str:
        chunks = None
        if args.chunks:
            chunks = split_chunks(
                graph, part.assignment, part.k, ChunkConfig(args.chunks, seed=args.seed)
            )
        book = build_book(graph, part, halo_hops=args.halo_hops, chunks=chunks)
        return save_partition_book(
            args.out, book, name=book_name(args.method, args.k), report=part.report
        )


_log = logging.getLogger("strata.partition")
_PHASES = 3


def _phase(done: int, name: str) -> None:
    """Log a phase of the command (a bar over the phases on a terminal)."""
    extra = progress_extra(
        "partition phases",
        done,
        _PHASES,
        unit="phase",
        values={"phase": name},
        done=done == _PHASES,
    )
    _log.info("partition: %s", name, extra=extra)
