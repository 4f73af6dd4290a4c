"""Routers: which holder serves each item of a read (spec §2.5, §3.3).

A plan maps serving regions to sorted, disjoint item-id arrays that together cover the
request; each region serves only what it holds, and the origin comes first when it
serves anything. Coverage is counted over the placement's uint32 holder bitmasks (a
bool (n, R) matrix per request), never with per-item Python sets.

* :class:`LayeredRouter` (GeoLayer): local items first, then a greedy set cover inside
  the origin's layer-1 cluster (the region holding the most missing items, ties to the
  lower RTT then the lower index), escalating cluster by cluster up to the root.
* :class:`RandomRouter`: a uniformly random holder per item (seeded); the baselines'
  routing in the paper.
* :class:`NearestRouter`: the lowest-RTT holder per item.

Writes go to every holder: :func:`write_plan`.

Examples:
    >>> import numpy as np
    >>> from strata.storage.geo.items import Placement
    >>> from strata.storage.geo.layers import LayerTree
    >>> from strata.storage.geo.topology import table1
    >>> topo = table1()
    >>> p = Placement(np.array([0b00001, 0b00010, 0b00110, 0b10000], np.uint32))
    >>> router = LayeredRouter(p, LayerTree.build(topo), topo)
    >>> plan = router.plan(1, np.array([0, 1, 2, 3]))
    >>> {r: ids.tolist() for r, ids in plan.items()}
    {1: [1, 2], 0: [0], 4: [3]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import Placement, region_bits
from strata.storage.geo.layers import LayerTree
from strata.storage.geo.topology import Topology

__all__ = [
    "LayeredRouter",
    "LocaliseResult",
    "NearestRouter",
    "RandomRouter",
    "Router",
    "localise",
    "plan_regions",
    "write_plan",
]

Plan = dict[int, np.ndarray]


class Router(Protocol):
    """Chooses the serving region of every item of a read from ``origin``."""

    placement: Placement

    def plan(self, origin: int, items: np.ndarray) -> Plan:
        """Regions -> sorted disjoint item ids covering ``items``; origin first."""
        ...

    def write_plan(self, items: np.ndarray) -> Plan:
        """Every holder of each item (writes are synchronous to all replicas)."""
        ...


def _prepare(placement: Placement, items: np.ndarray, where: str) -> np.ndarray:
    ids = np.unique(np.asarray(items, dtype=np.int64))
    if ids.size and (ids[0] < 0 or ids[-1] >= placement.holders.shape[0]):
        raise GeoError.build(
            "items",
            where,
            f"ids in 0..{placement.holders.shape[0] - 1}",
            f"{int(ids[0])}..{int(ids[-1])}",
        )
    return ids


def _group(ids: np.ndarray, chosen: np.ndarray, origin: int) -> Plan:
    """Group sorted ids by serving region, origin first then ascending regions."""
    out: Plan = {}
    regions = np.unique(chosen)
    if origin in regions:
        out[origin] = ids[chosen == origin]
    for r in regions.tolist():
        if r != origin:
            out[int(r)] = ids[chosen == r]
    return out


def write_plan(placement: Placement, items: np.ndarray) -> Plan:
    """Every region holding any of ``items`` -> the items it holds (ascending regions).

    >>> p = Placement(np.array([0b011, 0b100], np.uint32))
    >>> {r: v.tolist() for r, v in write_plan(p, np.array([0, 1])).items()}
    {0: [0], 1: [0], 2: [1]}
    """
    ids = _prepare(placement, items, "write_plan")
    if ids.size == 0:
        return {}
    h = placement.holders[ids]
    top = int(np.max(h)).bit_length()
    bits = region_bits(h, top)
    return {r: ids[bits[:, r]] for r in range(top) if bits[:, r].any()}


def plan_regions(plan: Plan) -> int:
    """Regions contacted by a plan."""
    return sum(1 for v in plan.values() if v.size)


class LayeredRouter:
    """GeoLayer's stepwise layered routing (spec §3.3)."""

    def __init__(
        self, placement: Placement, tree: LayerTree, topology: Topology
    ) -> None:
        if tree.num_regions != topology.num_regions:
            raise GeoError.build(
                "tree",
                "LayeredRouter",
                f"{topology.num_regions} regions",
                f"{tree.num_regions}",
            )
        self.placement = placement
        self.tree = tree
        self.topology = topology
        r = topology.num_regions
        # Candidates per (origin, layer): the cluster's other regions, best tie first.
        self._candidates: list[list[np.ndarray]] = []
        for origin in range(r):
            per_layer = []
            for cluster in tree.ancestors(origin):
                others = [x for x in cluster.regions if x != origin]
                others.sort(key=lambda x: (topology.rtt_ms[origin, x], x))
                per_layer.append(np.array(others, dtype=np.int64))
            self._candidates.append(per_layer)

    def plan(self, origin: int, items: np.ndarray) -> Plan:
        """Local first, then greedy cover per ancestor cluster (most missing items)."""
        ids = _prepare(self.placement, items, "LayeredRouter.plan")
        r = self.topology.num_regions
        if not 0 <= origin < r:
            raise GeoError.build(
                "origin", "LayeredRouter.plan", f"0..{r - 1}", str(origin)
            )
        bits = region_bits(self.placement.holders[ids], r)
        chosen = np.full(ids.shape[0], -1, dtype=np.int64)
        chosen[bits[:, origin]] = origin
        need = chosen < 0
        for candidates in self._candidates[origin]:
            while need.any() and candidates.size:
                counts = bits[need][:, candidates].sum(axis=0)
                best = int(np.argmax(counts))  # first max = lowest RTT, then index
                if counts[best] == 0:
                    break
                region = int(candidates[best])
                got = need & bits[:, region]
                chosen[got] = region
                need &= ~got
        if need.any():
            raise GeoError.build(
                "placement",
                "LayeredRouter.plan",
                "every item held somewhere",
                f"{int(need.sum())} items without any holder",
            )
        return _group(ids, chosen, origin)

    def write_plan(self, items: np.ndarray) -> Plan:
        """Every holder of each item."""
        return write_plan(self.placement, items)


class RandomRouter:
    """A uniformly random holder per item, from a seeded stream."""

    def __init__(
        self, placement: Placement, seed: int = 0, num_regions: int = 32
    ) -> None:
        self.placement = placement
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._num_regions = num_regions

    def plan(self, origin: int, items: np.ndarray) -> Plan:
        """Each item from a uniform holder."""
        ids = _prepare(self.placement, items, "RandomRouter.plan")
        if ids.size == 0:
            return {}
        h = self.placement.holders[ids]
        top = max(int(np.max(h)).bit_length(), origin + 1)
        bits = region_bits(h, top)
        count = bits.sum(axis=1)
        pick = (self._rng.random(ids.shape[0]) * count).astype(np.int64)
        chosen = np.argmax(np.cumsum(bits, axis=1) > pick[:, None], axis=1)
        return _group(ids, chosen, origin)

    def write_plan(self, items: np.ndarray) -> Plan:
        """Every holder of each item."""
        return write_plan(self.placement, items)


class NearestRouter:
    """The lowest-RTT holder per item (the origin itself when it holds a copy)."""

    def __init__(self, placement: Placement, topology: Topology) -> None:
        self.placement = placement
        self.topology = topology
        r = topology.num_regions
        self._order = []
        for origin in range(r):
            order = sorted(
                range(r), key=lambda x: (x != origin, topology.rtt_ms[origin, x], x)
            )
            self._order.append(np.array(order, dtype=np.int64))

    def plan(self, origin: int, items: np.ndarray) -> Plan:
        """Each item from its nearest holder."""
        ids = _prepare(self.placement, items, "NearestRouter.plan")
        r = self.topology.num_regions
        if not 0 <= origin < r:
            raise GeoError.build(
                "origin", "NearestRouter.plan", f"0..{r - 1}", str(origin)
            )
        order = self._order[origin]
        bits = region_bits(self.placement.holders[ids], r)[:, order]
        chosen = order[np.argmax(bits, axis=1)]
        return _group(ids, chosen, origin)

    def write_plan(self, items: np.ndarray) -> Plan:
        """Every holder of each item."""
        return write_plan(self.placement, items)


# ------------------------------------------------------------ offline (spec §2.5)


@dataclass(frozen=True, eq=False)
class LocaliseResult:
    """Where each vertex executes after localisation, and what moved."""

    vertex_region: np.ndarray
    execution: tuple[int, ...]
    removed: tuple[int, ...]
    migrated_vertices: int
    migrated_bytes: int


def _message_load(
    src: np.ndarray, dst: np.ndarray, region: np.ndarray, num_regions: int
) -> np.ndarray:
    """Per region: boundary vertices plus the replicas (mirrors) they need elsewhere."""
    cross = region[src] != region[dst]
    s, d = src[cross], dst[cross]
    boundary = np.bincount(region[np.unique(s)], minlength=num_regions)
    pairs = np.unique(s.astype(np.int64) * num_regions + region[d])
    mirrors = np.bincount(region[pairs // num_regions], minlength=num_regions)
    out: np.ndarray = (boundary + mirrors).astype(np.float64)
    return out


def localise(
    src: np.ndarray,
    dst: np.ndarray,
    vertex_region: np.ndarray,
    vertex_bytes: np.ndarray,
    tree: LayerTree,
    topology: Topology,
    iters: int = 15,
    msg_bytes: int = 12,
    xi_fraction: float = 0.2,
) -> LocaliseResult:
    """Shrink the execution set of an offline job top-down through the tree (§2.5).

    Per layer (root first) and cluster, a region leaves the execution set, and its
    vertices (``vertex_bytes``: payload plus out-edges) migrate by hash to the
    cluster's remaining regions, when ``iters * msg_bytes * (boundary + replica
    vertices) - local bytes > (1 - eta_L) * xi``; ``xi`` is ``xi_fraction`` of the
    whole inter-region message volume and ``eta_L`` the layer's mean RTT over the
    root's, so regions leave more easily higher up. One region leaves at a time (the
    largest excess), and every cluster keeps at least one region.

    >>> from strata.storage.geo.topology import uniform
    >>> topo = uniform(2, 100.0, 100.0)
    >>> src, dst = np.array([0, 1, 2, 3]), np.array([1, 0, 3, 2])   # two cut edges
    >>> res = localise(src, dst, np.array([0, 1, 0, 1]), np.full(4, 10),
    ...                LayerTree.build(topo), topo)
    >>> res.execution, res.migrated_vertices
    ((1,), 2)
    """
    where = "localise"
    r = topology.num_regions
    region = np.asarray(vertex_region, dtype=np.int64).copy()
    size = np.asarray(vertex_bytes, dtype=np.float64)
    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    if region.shape != size.shape or s.shape != d.shape:
        raise GeoError.build(
            "arrays",
            where,
            "vertex_region/vertex_bytes and src/dst of equal lengths",
            f"{region.shape}/{size.shape}, {s.shape}/{d.shape}",
        )
    if region.size and (region.min() < 0 or region.max() >= r):
        raise GeoError.build(
            "vertex_region", where, f"regions 0..{r - 1}", "out of range"
        )
    off = ~np.eye(r, dtype=bool)
    top = float(topology.rtt_ms[off].mean()) if off.any() else 1.0
    active = set(np.unique(region).tolist())
    removed: list[int] = []
    moved = np.zeros(region.shape[0], dtype=bool)
    for layer in range(tree.depth, 0, -1):
        same = tree.labels[layer][:, None] == tree.labels[layer][None, :]
        inside = same & off
        eta = float(topology.rtt_ms[inside].mean()) / top if inside.any() else 1.0
        for cluster in tree.clusters(layer):
            while True:
                members = [x for x in cluster.regions if x in active]
                if len(members) < 2:
                    break
                load = _message_load(s, d, region, r)
                xi = xi_fraction * iters * msg_bytes * float(load.sum())
                local = np.bincount(region, size, minlength=r)
                excess = iters * msg_bytes * load - local
                leave = max(members, key=lambda x: (excess[x], -x))
                if not excess[leave] > (1.0 - eta) * xi:
                    break
                stay = np.array([x for x in members if x != leave], dtype=np.int64)
                ids = np.flatnonzero(region == leave)
                mixed = (
                    ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
                ) >> np.uint64(33)
                region[ids] = stay[(mixed % np.uint64(stay.size)).astype(np.int64)]
                moved[ids] = True
                active.discard(leave)
                removed.append(leave)
    return LocaliseResult(
        vertex_region=region.astype(np.int8),
        execution=tuple(sorted(active)),
        removed=tuple(removed),
        migrated_vertices=int(moved.sum()),
        migrated_bytes=int(size[moved].sum()),
    )
