"""Partitioners by name (the CLI's ``--method``), and the engine each name runs.

:func:`resolve` turns a method name and its settings into a partitioner config and
the name of the backend that will run it, the same string the partition's report
carries in ``backend``:

=============  ==============================================================
``metis``      pymetis when it imports (``pymetis``), else Strata's multilevel
               (``strata-multilevel``), with an INFO note on the ``strata``
               logger
``kahip``      KaHIP's kaffpa (``kahip``); a :class:`PartitionError` naming the
               ``kahip`` extra when it is not installed
``multilevel`` Strata's own METIS-style multilevel (``strata-multilevel``)
``grem``, ``ldg``, ``fennel``, ``hdrf``, ``random``, ``hash``
               Strata's own (``strata-<name>``)
=============  ==============================================================

Examples:
    >>> partitioner, backend = resolve("multilevel", k=4, seed=1)
    >>> type(partitioner).__name__, backend
    ('MultilevelPartitioner', 'strata-multilevel')
    >>> resolve("fennel", k=4, passes=3)[0].passes
    3
"""

from __future__ import annotations

import logging

from strata.partition.backends import (
    KahipPartitioner,
    PymetisPartitioner,
    backend_available,
    import_backend,
)
from strata.partition.baselines import HashPartitioner, RandomPartitioner
from strata.partition.errors import PartitionError
from strata.partition.grem import GremPartitioner
from strata.partition.hdrf import HDRFPartitioner
from strata.partition.multilevel import MultilevelPartitioner
from strata.partition.streaming import FennelPartitioner, LDGPartitioner
from strata.partition.types import Partitioner

#: Every name :func:`resolve` accepts.
METHODS = (
    "metis",
    "kahip",
    "multilevel",
    "grem",
    "ldg",
    "fennel",
    "hdrf",
    "random",
    "hash",
)

#: The methods that take ``edge_imbalance`` (a second, edge balance constraint).
EDGE_BALANCED = ("metis", "multilevel", "grem")

_LOG = logging.getLogger(__name__)


def resolve(
    method: str,
    *,
    k: int,
    imbalance: float = 0.03,
    seed: int = 0,
    passes: int | None = None,
    edge_imbalance: float | None = None,
) -> tuple[Partitioner, str]:
    """The partitioner ``method`` names, with its defaults, and its backend's name.

    Args:
        method: one of :data:`METHODS`.
        k: number of parts.
        imbalance: eps of the balance cap (HDRF, random and hash ignore it).
        seed: the partitioner's seed.
        passes: stream passes for ``grem`` (default 5), ``ldg`` and ``fennel``
            (default 1); ignored by the others.
        edge_imbalance: eps of a second balance constraint on edges (each part's
            degree sum), for ``multilevel``, ``grem`` and ``metis`` (pymetis with
            ``ncon = 2``); the other methods refuse it.

    Returns:
        ``(partitioner, backend)``: ``backend`` is what the report's ``backend``
        field will say (``pymetis``, ``kahip``, ``strata-multilevel``, ...).

    Raises:
        PartitionError: on an unknown method, bad settings, or ``kahip`` without
            KaHIP installed.
    """
    if edge_imbalance is not None and method not in EDGE_BALANCED:
        raise PartitionError.build(
            "edge_imbalance",
            f"resolve({method!r})",
            f"None for {method} (edge balance: {', '.join(EDGE_BALANCED)})",
            repr(edge_imbalance),
        )
    if method == "metis":
        if backend_available("pymetis"):
            metis = PymetisPartitioner(
                k, imbalance, seed=seed, edge_imbalance=edge_imbalance
            )
            return metis, "pymetis"
        _LOG.info(
            "metis: pymetis is not installed, so Strata's multilevel runs instead "
            "(pip install 'strata-gnn[metis]' for METIS)"
        )
        method = "multilevel"
    if method == "kahip":
        import_backend("kahip", "resolve('kahip')")
        return KahipPartitioner(k, imbalance, seed=seed), "kahip"
    if method == "multilevel":
        multilevel = MultilevelPartitioner(
            k, imbalance, seed=seed, edge_imbalance=edge_imbalance
        )
        return multilevel, "strata-multilevel"
    partitioner: Partitioner
    if method == "grem":
        partitioner = GremPartitioner(
            k,
            imbalance,
            passes=passes or 5,
            seed=seed,
            edge_imbalance=edge_imbalance,
        )
    elif method == "ldg":
        partitioner = LDGPartitioner(k, imbalance, passes=passes or 1, seed=seed)
    elif method == "fennel":
        partitioner = FennelPartitioner(k, imbalance, passes=passes or 1, seed=seed)
    elif method == "hdrf":
        partitioner = HDRFPartitioner(k, seed=seed)
    elif method == "random":
        partitioner = RandomPartitioner(k, seed=seed)
    elif method == "hash":
        partitioner = HashPartitioner(k, seed=seed)
    else:
        raise PartitionError.build(
            "method", "resolve", f"one of {', '.join(METHODS)}", repr(method)
        )
    return partitioner, f"strata-{method}"
