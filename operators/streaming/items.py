"""The items streaming steps exchange, their shard routing, and vertex placement.

Every item is a dict the process executor can send (arrays, Arrow batches,
scalars; never pickled), with a ``kind``:

=========  ===================================================================
``init``   the starting graph (``indptr``, ``indices``, ``num_nodes``), the
           layer inputs ``f`` and ``live`` of the receiving layer, and the model
           (``StreamingModel.to_arrays()``); sent once, before any update
``updates`` an update batch (``batch``), its first log ``offset`` and the wall
           ``arrival_ms`` (layer 1's input)
``delta``  a :class:`~strata.operators.streaming.delta.LayerDelta` (wire form)
``tick``   the wall clock (``now_ms``) while a source idles: drives window caps
=========  ===================================================================

Sharded steps receive copies with a ``route`` key: :func:`route_key` is the step's
shard key and :func:`fan_out` picks, for each target shard, a route value that the
engine's stable hash sends exactly there.

Vertex placement (:class:`Placement`) is hash placement from
:mod:`strata.partition.baselines` (``hash_parts``): shard ``s`` of a layer owns the
vertices ``v`` with ``hash(v) mod shards == s`` and aggregates their in-edges.

Examples:
    >>> items = fan_out({"kind": "tick", "now_ms": 5}, 3)
    >>> from strata.engine.sharding import shard_of
    >>> [shard_of(route_key(item), 3) for item in items]
    [0, 1, 2]
    >>> Placement(2).owners(np.arange(6)).tolist()  # doctest: +SKIP
    [1, 0, 0, 1, 1, 0]
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from strata.engine.sharding import shard_of
from strata.partition.baselines import hash_parts

INIT, UPDATES, DELTA, TICK = "init", "updates", "delta", "tick"


@functools.cache
def _routes(shards: int) -> tuple[int, ...]:
    """For each shard, the smallest non-negative int the engine routes there."""
    found: dict[int, int] = {}
    value = 0
    while len(found) < shards:
        found.setdefault(shard_of(value, shards), value)
        value += 1
    return tuple(found[s] for s in range(shards))


def route_key(item: dict[str, Any]) -> int:
    """The shard key of streaming items (``Pipeline.step(..., key=route_key)``)."""
    return int(item["route"])


def fan_out(item: dict[str, Any], shards: int) -> list[dict[str, Any]]:
    """One copy of ``item`` per shard, each routed to its shard (shared payload)."""
    if shards == 1:
        return [item]
    return [{**item, "route": route} for route in _routes(shards)]


def routed(item: dict[str, Any], shard: int, shards: int) -> dict[str, Any]:
    """``item`` addressed to one ``shard`` of ``shards``."""
    if shards == 1:
        return item
    return {**item, "route": _routes(shards)[shard]}


class Placement:
    """Which shard owns each vertex (hash placement, stable across processes).

    Args:
        shards: Number of shards.
        seed: Hash seed (the same in every process of a run).
    """

    def __init__(self, shards: int, seed: int = 0) -> None:
        self.shards = shards
        self.seed = seed
        self._table = np.zeros(0, dtype=np.int32)

    def owners(self, nodes: np.ndarray) -> np.ndarray:
        """The owning shard of each node id."""
        ids = np.asarray(nodes, dtype=np.int64)
        if self.shards == 1:
            return np.zeros(ids.shape[0], dtype=np.int32)
        need = int(ids.max(initial=-1)) + 1
        if need > self._table.shape[0]:
            self._table = hash_parts(
                max(need, 2 * self._table.shape[0]), self.shards, self.seed
            )
        return np.asarray(self._table[ids], dtype=np.int32)

    def owned(self, nodes: np.ndarray, shard: int) -> np.ndarray:
        """Mask of the nodes ``shard`` owns."""
        if self.shards == 1:
            return np.ones(np.shape(nodes)[0], dtype=np.bool_)
        return np.asarray(self.owners(nodes) == shard, dtype=np.bool_)
