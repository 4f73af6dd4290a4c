"""Store a :class:`~strata.partition.book.PartitionBook` in a dataset directory.

A book is one auxiliary array group of the dataset (``strata.storage.save_arrays``),
named ``partition/<name>`` (``partition/metis-k4`` by default), written atomically next
to the graph; the group's JSON meta keeps the partition report. ``partition/`` itself
does no I/O: this module is the bridge.

Examples:
    >>> import tempfile
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.partition import MultilevelPartitioner, build_book
    >>> src = np.arange(32); ring = CSRGraph.from_edges(src, (src + 1) % 32)
    >>> p = MultilevelPartitioner(k=4).partition(ring)
    >>> out = tempfile.mkdtemp()
    >>> save_partition_book(out, build_book(ring, p), report=p.report)
    'partition/metis-k4'
    >>> list_partition_books(out)
    ['metis-k4']
    >>> book = load_partition_book(out, "metis-k4")
    >>> book.k, book.halo(0).size  # a directed ring: one in-neighbour outside
    (4, 1)
    >>> partition_book_meta(out, "metis-k4")["report"]["edge_cut"]
    4.0
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strata.partition.book import PartitionBook
from strata.partition.types import PartitionReport
from strata.storage import load_arrays, read_manifest, save_arrays

GROUP_PREFIX = "partition/"


def book_name(method: str, k: int) -> str:
    """Default group name of a book: ``<method>-k<k>``."""
    return f"{method}-k{k}"


def save_partition_book(
    directory: str | Path,
    book: PartitionBook,
    *,
    name: str | None = None,
    report: PartitionReport | None = None,
) -> str:
    """Write ``book`` as the array group ``partition/<name>`` of ``directory``.

    Args:
        directory: a dataset directory (created if missing).
        book: the book.
        name: group suffix (default ``<method>-k<k>`` from ``report``, else
            ``book-k<k>``).
        report: the partition's report, stored in the group's JSON meta.

    Returns:
        The group name.

    Raises:
        StorageError: when the directory cannot be written (nothing is changed).
    """
    if name is None:
        name = book_name(report.method if report else "book", book.k)
    group = GROUP_PREFIX + name
    meta: dict[str, Any] = {"k": book.k, "halo_hops": book.halo_hops}
    if report is not None:
        meta["report"] = report.to_dict()
    save_arrays(directory, group, book.to_arrays(), meta=meta)
    return group


def load_partition_book(directory: str | Path, name: str) -> PartitionBook:
    """Read the book ``partition/<name>`` (memory-mapped arrays).

    Raises:
        DatasetError: if the group is missing or damaged.
    """
    return PartitionBook.from_arrays(load_arrays(directory, GROUP_PREFIX + name))


def partition_book_meta(directory: str | Path, name: str) -> dict[str, Any]:
    """The JSON meta stored with a book (``k``, ``halo_hops``, ``report``)."""
    return dict(read_manifest(directory).groups[GROUP_PREFIX + name].meta)


def list_partition_books(directory: str | Path) -> list[str]:
    """Names of the books stored in ``directory`` (sorted)."""
    groups = read_manifest(directory).groups
    return sorted(g[len(GROUP_PREFIX) :] for g in groups if g.startswith(GROUP_PREFIX))
