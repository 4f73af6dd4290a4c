"""``strata dataset``: import edge lists, inspect and generate dataset directories.

Subcommands::

    strata dataset import EDGES --out DIR [--format csv|tsv|snap|parquet|metis|mtx]
                          [--src C] [--dst C] [--weight C]
                          [--header | --no-header] [--ids auto|int|str] [--no-remap]
                          [--undirected] [--drop-self-loops] [--drop-duplicates]
                          [--nodes FILE] [--node-id-col C] [--label-col C]
                          [--structural degree|onehot-degree|random-walk]
    strata dataset info DIR [--verify]
    strata dataset generate SPEC --out DIR [--data-dir D]

``EDGES`` is an edge-list file (CSV, TSV, SNAP text, Parquet, METIS ``.graph``,
MatrixMarket ``.mtx``) or a graph folder (``edges.parquet`` and optional
``nodes.parquet``, ``graph.json``; see :mod:`strata.storage.loaders.folder`). Ids of
any kind are mapped to ``0..n-1``, the originals kept in the node column
``node_ids``. ``--nodes`` joins features and labels by id. Edges are directed unless
``--undirected`` (``--symmetrize`` is its former name) or the format is undirected.
``--src-col``/``--dst-col``/``--weight-col`` remain as aliases.

Columns are names, or positions when all digits. ``SPEC`` is a graph spec
(:mod:`strata.storage.spec`): ``planetoid:cora``,
``rmat:scale=16,edge_factor=16,seed=0``, ``sbm:n=10000,blocks=8``,
``rgg:n=100000,radius=0.005``, a path.

Examples:
    >>> import argparse, tempfile
    >>> cmd = DatasetCommand()
    >>> parser = argparse.ArgumentParser(prog="strata dataset")
    >>> cmd.configure(parser)
    >>> out = tempfile.mkdtemp()
    >>> cmd.run(parser.parse_args(["generate", "rmat:scale=6,edge_factor=4",
    ...                            "--out", out]))  # doctest: +ELLIPSIS
    saved rmat-s6-ef4: 64 nodes, 256 edges -> ...
    0
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strata.engine import UsageError, check_output_dir
from strata.storage import (
    DuplicatePolicy,
    GraphDataset,
    SelfLoopPolicy,
    StorageError,
    read_manifest,
    save_dataset,
    verify_dataset,
)
from strata.storage.dataset import ArrayEntry, Manifest
from strata.storage.loaders import (
    FORMATS,
    STRUCTURAL_KINDS,
    find_edge_file,
    load_edge_list,
    load_folder,
)
from strata.storage.spec import load_graph, parse_spec


def _column(text: str | None) -> str | int | None:
    if text is None:
        return None
    return int(text) if text.isdigit() else text


def _human(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.1f} TB"  # pragma: no cover


def describe(manifest: Manifest, directory: Path) -> list[str]:
    """The lines ``strata dataset info`` prints for a manifest."""
    lines = [
        f"{manifest.name}  (version {manifest.version})  {directory}",
        f"nodes {manifest.num_nodes}  edges {manifest.num_edges}",
    ]

    def columns(entries: Mapping[str, ArrayEntry]) -> str:
        return "  ".join(
            f"{k} {e.dtype}{list(e.shape)}" for k, e in sorted(entries.items())
        )

    if manifest.graph:
        lines.append(f"graph   {columns(manifest.graph)}")
    for table, entries in sorted(manifest.tables.items()):
        if entries:
            lines.append(f"{table:<7} {columns(entries)}")
    for group, entry in sorted(manifest.groups.items()):
        meta = f"  meta {dict(entry.meta)}" if entry.meta else ""
        lines.append(f"group   {group}: {columns(entry.arrays)}{meta}")
    if manifest.meta:
        lines.append(f"meta    {dict(manifest.meta)}")
    stored = list(manifest.entries().values())
    total = sum(e.nbytes for e in stored)
    lines.append(f"files   {len(stored)}, {_human(total)}")
    return lines


class DatasetCommand:
    """The ``strata dataset`` command (implements ``strata.engine.command.Command``)."""

    name = "dataset"
    help = "import, inspect and generate dataset directories"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the ``import``, ``info`` and ``generate`` subcommands."""
        sub = parser.add_subparsers(dest="dataset_command", required=True)

        imp = sub.add_parser("import", help="import an edge list into DIR")
        imp.add_argument("edges", type=Path, help="edge list file or graph folder")
        imp.add_argument("--out", type=Path, required=True, help="dataset directory")
        imp.add_argument("--format", choices=FORMATS, help="default: from the suffix")
        imp.add_argument(
            "--src",
            "--src-col",
            dest="src_col",
            help="source column (name or position)",
        )
        imp.add_argument(
            "--dst", "--dst-col", dest="dst_col", help="destination column"
        )
        imp.add_argument(
            "--weight",
            "--weight-col",
            dest="weight_col",
            help="edge weight column (default: a column named weight)",
        )
        head = imp.add_mutually_exclusive_group()
        head.add_argument("--header", dest="header", action="store_true", default=None)
        head.add_argument("--no-header", dest="header", action="store_false")
        imp.add_argument("--ids", choices=("auto", "int", "str"), default="auto")
        imp.add_argument(
            "--no-remap", action="store_true", help="keep integer ids as they are"
        )
        imp.add_argument(
            "--undirected",
            "--symmetrize",
            dest="undirected",
            action="store_true",
            help="edges are undirected: store both directions",
        )
        imp.add_argument("--nodes", type=Path, help="node table (Parquet/CSV) by id")
        imp.add_argument("--node-id-col", help="the node table's id column")
        imp.add_argument("--label-col", help="the node table's label column")
        imp.add_argument(
            "--structural",
            choices=STRUCTURAL_KINDS,
            help="features x from the structure when there are none",
        )
        imp.add_argument("--drop-self-loops", action="store_true")
        imp.add_argument("--drop-duplicates", action="store_true")
        imp.add_argument("--name", help="dataset name (default: the file name)")

        info = sub.add_parser("info", help="describe a dataset directory")
        info.add_argument("directory", type=Path)
        info.add_argument(
            "--verify", action="store_true", help="check every file's SHA-256"
        )

        gen = sub.add_parser("generate", help="generate or load SPEC and save to DIR")
        gen.add_argument("spec", help="graph spec, e.g. rmat:scale=16,edge_factor=16")
        gen.add_argument("--out", type=Path, required=True, help="dataset directory")
        gen.add_argument("--data-dir", type=Path, help="where planetoid:NAME looks")

    def run(self, args: argparse.Namespace) -> int:
        """Run the chosen subcommand; storage errors print and return 1.

        Inputs and ``--out`` are checked first, so a bad one costs no work.
        """
        try:
            self._check(args)
            if args.dataset_command == "import":
                return self._import(args)
            if args.dataset_command == "info":
                return self._info(args)
            return self._generate(args)
        except (StorageError, UsageError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1

    def _check(self, args: argparse.Namespace) -> None:
        where = f"strata dataset {args.dataset_command}"
        if args.dataset_command == "import":
            edges = args.edges
            if not edges.is_file() and not (edges.is_dir() and find_edge_file(edges)):
                got = (
                    "a directory without edges.parquet"
                    if edges.is_dir()
                    else ("no such file")
                )
                raise UsageError.build(
                    "EDGES",
                    where,
                    "an edge-list file or a folder with edges.parquet",
                    f"{str(edges)!r} ({got})",
                )
            if args.nodes is not None and not args.nodes.is_file():
                raise UsageError.build(
                    "--nodes", where, "a node table file", f"{str(args.nodes)!r}"
                )
        if args.dataset_command == "info" and not args.directory.is_dir():
            got = "a file" if args.directory.exists() else "no such directory"
            raise UsageError.build(
                "DIR",
                where,
                "a dataset directory",
                f"{str(args.directory)!r} ({got})",
                "create one with `strata dataset import` or `generate`.",
            )
        if args.dataset_command == "generate":
            parse_spec(args.spec)  # an unknown generator or key fails here
            data_dir = args.data_dir
            if data_dir is not None and not data_dir.is_dir():
                raise UsageError.build(
                    "--data-dir", where, "a directory", f"{str(data_dir)!r}"
                )
        if args.dataset_command in ("import", "generate"):
            check_output_dir(args.out, argument="--out", where=where)

    def _import(self, args: argparse.Namespace) -> int:
        options: dict[str, Any] = {
            "name": args.name,
            "format": args.format,
            "src_col": _column(args.src_col),
            "dst_col": _column(args.dst_col),
            "weight_col": _column(args.weight_col),
            "header": args.header,
            "id_type": args.ids,
            "remap": False if args.no_remap else None,
            "undirected": args.undirected,
            "node_id_col": args.node_id_col,
            "label_col": args.label_col,
            "structural": args.structural,
            "self_loops": (
                SelfLoopPolicy.REMOVE if args.drop_self_loops else SelfLoopPolicy.KEEP
            ),
            "duplicates": (
                DuplicatePolicy.REMOVE if args.drop_duplicates else DuplicatePolicy.KEEP
            ),
        }
        if args.nodes is not None:
            options["nodes"] = args.nodes
        if args.edges.is_dir():
            dataset = load_folder(args.edges, **options)
        else:
            dataset = load_edge_list(args.edges, **options)
        return self._save(dataset, args.out)

    def _generate(self, args: argparse.Namespace) -> int:
        return self._save(load_graph(args.spec, data_dir=args.data_dir), args.out)

    def _save(self, dataset: GraphDataset, out: Path) -> int:
        manifest = save_dataset(dataset, out)
        remapped = (
            " (ids remapped; see node_ids)" if "node_ids" in dataset.node_data else ""
        )
        if "directed" in dataset.meta:
            remapped += ", directed" if dataset.meta["directed"] else ", undirected"
        print(
            f"saved {manifest.name}: {manifest.num_nodes} nodes, "
            f"{manifest.num_edges} edges -> {out}{remapped}"
        )
        return 0

    def _info(self, args: argparse.Namespace) -> int:
        manifest = (
            verify_dataset(args.directory)
            if args.verify
            else read_manifest(args.directory)
        )
        for line in describe(manifest, args.directory):
            print(line)
        if args.verify:
            print("checksums verified")
        return 0
