"""Replica placement: GeoLayer-lite (spec §3.2) and the baselines of spec §3.6.

GeoLayer-lite works offline from the access log. Read-dominant read requests are
grouped into *patterns* (same source and kind); each (pattern, reader region) pair
walks the layer tree top-down. At each node the reader's child cluster either already
holds every item of the pattern, or gets the missing items copied into it when

* **SLO sinking:** reading the missing items from their nearest holders outside the
  child would break the pattern's SLO on the *real* reader->holder RTT (pitfall 3), or
* **gain test:** ``read cost saved + association penalty saved - storage added -
  write cost added >= 0`` (costs of the history window, :mod:`.cost`).

The copy goes to the child's region that reads the pattern most (the reader itself at
layer 1). Patterns that fail the gain test are decomposed into Venn cells (items keyed
by a hash of the set of patterns containing them; cells under ``min_items`` merge into
their most-read pattern's cell, pitfall 4); a cell that fails its own gain test goes to
the child whose regions' diffused heat over the cell is largest (:mod:`.heat`, read
frequency breaking ties). Finally each region pre-caches items whose diffused heat is
at or above the ``precache_quantile`` of its positive heats.

Every replica of a region (sinking, gain-test copies and pre-caching, in that
priority) stays within ``replica_budget`` x its home bytes; copies inside one phase
are admitted in priority order by a cumulative byte count that ignores overlaps, so
the budget is never exceeded. Ties break on the lower region index.

Examples:
    >>> from strata.storage.geo.layers import LayerTree
    >>> from strata.storage.geo.topology import table1
    >>> from strata.storage.geo.workload import GeoWorkloadConfig, synthetic_workload
    >>> topo = table1()
    >>> w = synthetic_workload(topo, GeoWorkloadConfig.small(), seed=0)
    >>> p = geolayer_place(w.history, w.space, w.graph, LayerTree.build(topo), topo)
    >>> p.check(w.space)
    >>> home = Placement.home_only(w.space).storage_bytes(w.space, 5)
    >>> extra = p.storage_bytes(w.space, 5) - home
    >>> bool((extra >= 0).all())
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from strata.storage.csr import CSRGraph
from strata.storage.generators.hashing import mix64
from strata.storage.geo.cost import HOURS_PER_MONTH, CostConfig
from strata.storage.geo.errors import GeoError
from strata.storage.geo.heat import HeatConfig, diffuse
from strata.storage.geo.items import ItemSpace, Placement, popcount32, region_bits
from strata.storage.geo.layers import LayerTree
from strata.storage.geo.topology import Topology
from strata.storage.geo.workload import Requests

__all__ = [
    "GeoPlaceConfig",
    "PatternLog",
    "full_replication",
    "geolayer_place",
    "hash_layout",
    "home_only",
    "pattern_log",
    "random_k",
    "single_primary",
    "top_k",
]

_GB = 1e9


@dataclass(frozen=True, slots=True)
class GeoPlaceConfig:
    """Knobs of GeoLayer-lite (defaults: spec §3.2)."""

    replica_budget: float = 1.0
    precache_quantile: float = 0.55
    min_items: int = 8
    precache: bool = True
    cost: CostConfig = field(default_factory=CostConfig)
    heat: HeatConfig = field(default_factory=HeatConfig)


@dataclass(frozen=True, eq=False)
class PatternLog:
    """Read patterns: items per pattern (CSR) and reads per (pattern, region)."""

    ptr: np.ndarray
    items: np.ndarray
    reads: np.ndarray
    slo_ms: np.ndarray
    item_writes: np.ndarray

    @property
    def num_patterns(self) -> int:
        """How many distinct patterns."""
        return int(self.reads.shape[0])

    @property
    def pattern_of(self) -> np.ndarray:
        """Pattern id of each entry of ``items``."""
        return np.repeat(np.arange(self.num_patterns), np.diff(self.ptr))


def pattern_log(history: Requests, num_items: int, num_regions: int) -> PatternLog:
    """Group read requests by (source, kind); count writes per item."""
    n = history.num_requests
    sizes = np.diff(history.indptr)
    req = np.repeat(np.arange(n), sizes)
    writes = history.is_write[req]
    item_writes = np.bincount(history.items[writes], minlength=num_items)
    reads = ~history.is_write
    key = history.source.astype(np.int64) * 4 + history.kind.astype(np.int64)
    ukey, pid_req = np.unique(np.where(reads, key, -1), return_inverse=True)
    # Pattern 0 may be the write bucket (-1): drop it by shifting ids.
    has_writes = bool(ukey.size and ukey[0] == -1)
    pid_req = pid_req - int(has_writes)
    num_p = ukey.size - int(has_writes)
    occ_req = req[~writes]
    occ_pair = pid_req[occ_req].astype(np.int64) * num_items + history.items[~writes]
    pairs = np.unique(occ_pair)
    occ_p = pairs // num_items
    occ_x = pairs % num_items
    ptr = np.concatenate([[0], np.cumsum(np.bincount(occ_p, minlength=num_p))])
    freq = np.zeros((num_p, num_regions), dtype=np.float64)
    np.add.at(freq, (pid_req[reads], history.origin[reads].astype(np.int64)), 1.0)
    slo = np.full(num_p, np.inf)
    np.minimum.at(slo, pid_req[reads], history.slo_ms[reads])
    return PatternLog(
        ptr.astype(np.int64), occ_x.astype(np.int64), freq, slo, item_writes
    )


def _region_heat(
    graph: CSRGraph,
    space: ItemSpace,
    history: Requests,
    num_regions: int,
    cfg: HeatConfig,
) -> np.ndarray:
    """(R, V) diffused heat of each region's vertex reads (pitfalls 1-2)."""
    v = space.num_vertices
    sizes = np.diff(history.indptr)
    origin = np.repeat(history.origin.astype(np.int64), sizes)
    read = np.repeat(~history.is_write, sizes)
    items = history.items
    vert = read & (items < v)
    edge_counts = np.bincount(items[read & (items >= v)] - v, minlength=space.num_edges)
    src = np.repeat(np.arange(v), np.diff(graph.indptr))
    used = np.flatnonzero(edge_counts > 0)
    heat = np.zeros((num_regions, v))
    for r in range(num_regions):
        counts = np.bincount(items[vert & (origin == r)], minlength=v).astype(
            np.float64
        )
        if counts.sum() == 0:
            continue
        res = diffuse(
            v,
            src[used],
            graph.indices[used],
            edge_counts[used].astype(np.float64),
            counts,
            counts / max(counts.sum(), 1.0),
            cfg,
        )
        heat[r] = res.heat
    return heat


def _item_heat(heat_v: np.ndarray, graph: CSRGraph) -> np.ndarray:
    """Heat per item: vertices' own, edges the mean of their endpoints'."""
    src = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    edge = 0.5 * (heat_v[src] + heat_v[graph.indices])
    return np.concatenate([heat_v, edge])


class _Budget:
    """Bytes each region may still add as replicas."""

    def __init__(self, space: ItemSpace, placement: Placement, r: int, factor: float):
        self.space, self.r = space, r
        self.home = Placement.home_only(space).storage_bytes(space, r)
        self.cap = factor * self.home
        self.placement = placement

    def left(self) -> np.ndarray:
        used = self.placement.storage_bytes(self.space, self.r) - self.home
        out: np.ndarray = np.maximum(self.cap - used, 0.0)
        return out


def _admit(
    rep: np.ndarray, cost: np.ndarray, order: np.ndarray, left: np.ndarray
) -> np.ndarray:
    """Bool per candidate (in ``order`` priority): fits its region's budget."""
    ok = np.zeros(rep.shape[0], dtype=bool)
    for region in np.unique(rep[order]).tolist():
        idx = order[rep[order] == region]
        ok[idx] = np.cumsum(cost[idx]) <= left[region]
    return ok


def geolayer_place(
    history: Requests,
    space: ItemSpace,
    graph: CSRGraph,
    tree: LayerTree,
    topology: Topology,
    cfg: GeoPlaceConfig | None = None,
) -> Placement:
    """GeoLayer-lite: SLO sinking and gain tests down the tree, then pre-caching."""
    cfg = cfg or GeoPlaceConfig()
    r = topology.num_regions
    space.check_regions(r, "geolayer_place")
    if tree.num_regions != r:
        raise GeoError.build(
            "tree", "geolayer_place", f"{r} regions", str(tree.num_regions)
        )
    if graph.num_nodes != space.num_vertices or graph.num_edges != space.num_edges:
        raise GeoError.build(
            "graph",
            "geolayer_place",
            f"{space.num_vertices} vertices, {space.num_edges} edges",
            f"{graph.num_nodes}, {graph.num_edges}",
        )
    log = pattern_log(history, space.num_items, r)
    placement = Placement.home_only(space)
    budget = _Budget(space, placement, r, cfg.replica_budget)
    prices, cc = topology.prices, cfg.cost
    num_p = log.num_patterns
    occ_p, occ_x = log.pattern_of, log.items
    occ_b = space.item_bytes[occ_x].astype(np.float64)
    occ_w = log.item_writes[occ_x].astype(np.float64)
    pattern_writes = np.bincount(occ_p, occ_w, num_p)
    dominant = log.reads.sum(axis=1) >= pattern_writes
    write_unit = occ_w * (
        prices.put_usd_per_million / 1e6 + occ_b / _GB * prices.transfer_usd_per_gb
    )
    heat = _region_heat(graph, space, history, r, cfg.heat)
    decomposed = np.zeros(num_p, dtype=bool)
    for level in range(tree.depth, 0, -1):
        child = tree.cluster_masks(level - 1)
        for y in range(r):
            readers = dominant & (log.reads[:, y] > 0)
            if not readers.any():
                continue
            mask_c = child[y]
            sel = readers[occ_p]
            held = placement.holders[occ_x]
            miss = sel & ((held & mask_c) == 0)
            if not miss.any():
                continue
            mp, mx = occ_p[miss], occ_x[miss]
            bits = region_bits(held[miss], r)
            rtt_y = np.where(bits, topology.rtt_ms[y][None, :], np.inf)
            near = np.argmin(rtt_y, axis=1)
            near_rtt = rtt_y[np.arange(near.shape[0]), near]
            near_bw = topology.bw_mbps[y][near]
            miss_bytes = np.bincount(mp, occ_b[miss], num_p)
            max_rtt = np.zeros(num_p)
            np.maximum.at(max_rtt, mp, near_rtt)
            min_bw = np.full(num_p, np.inf)
            np.minimum.at(min_bw, mp, near_bw)
            out_regions = np.zeros(num_p, dtype=np.uint32)
            np.bitwise_or.at(
                out_regions, mp, np.left_shift(np.uint32(1), near.astype(np.uint32))
            )
            has = miss_bytes > 0
            est = np.where(
                has,
                max_rtt + 8.0 * miss_bytes / (np.where(has, min_bw, 1.0) * 1e3),
                0.0,
            )
            need_slo = has & (est > log.slo_ms)
            f = log.reads[:, y]
            base = topology.intra_rtt_ms
            assoc_saved = (
                f
                * cc.assoc_usd
                * (
                    cc.lambda1 * popcount32(out_regions)
                    + cc.lambda2 * np.maximum(est - base, 0) / base
                )
            )
            gain = (
                f * miss_bytes / _GB * prices.transfer_usd_per_gb
                + assoc_saved
                - miss_bytes
                / _GB
                * prices.storage_usd_gb_month
                * cc.window_hours
                / HOURS_PER_MONTH
                - np.bincount(mp, write_unit[miss], num_p)
            )
            want = has & (need_slo | (gain >= 0))
            members = [x for x in range(r) if (int(mask_c) >> x) & 1]
            rep = np.asarray(members)[np.argmax(log.reads[:, members], axis=1)]
            if len(members) == 1:
                rep[:] = y
            cand = np.flatnonzero(want)
            order = cand[
                np.lexsort(
                    (-gain[cand] / np.maximum(miss_bytes[cand], 1.0), ~need_slo[cand])
                )
            ]
            ok = np.zeros(num_p, dtype=bool)
            ok[order] = _admit(
                rep[order], miss_bytes[order], np.arange(order.size), budget.left()
            )[np.arange(order.size)]
            take = ok[mp]
            np.bitwise_or.at(
                placement.holders,
                mx[take],
                np.left_shift(np.uint32(1), rep[mp[take]].astype(np.uint32)),
            )
            decomposed |= has & ~want
        if decomposed.any():
            _place_cells(
                placement, log, decomposed, heat, graph, space, tree, level, cfg, budget
            )
            decomposed[:] = False
    if cfg.precache:
        _precache(placement, heat, graph, space, cfg, budget)
    return placement


def _place_cells(
    placement: Placement,
    log: PatternLog,
    decomposed: np.ndarray,
    heat: np.ndarray,
    graph: CSRGraph,
    space: ItemSpace,
    tree: LayerTree,
    level: int,
    cfg: GeoPlaceConfig,
    budget: _Budget,
) -> None:
    """Venn cells of decomposed patterns go to the child winning on heat."""
    occ_p, occ_x = log.pattern_of, log.items
    sel = decomposed[occ_p]
    p, x = occ_p[sel], occ_x[sel]
    # An order-free hash of the set of patterns containing each item (pitfall 4).
    hashed = np.array([mix64(np.uint64(v)) for v in np.unique(p)], dtype=np.uint64)
    hp = hashed[np.searchsorted(np.unique(p), p)]
    items, inv = np.unique(x, return_inverse=True)
    key = np.zeros(items.shape[0], dtype=np.uint64)
    np.bitwise_xor.at(key, inv, hp)
    ukey, cell = np.unique(key, return_inverse=True)
    size = np.bincount(cell)
    # Small cells merge into the cell of their most-read pattern.
    weight = log.reads.sum(axis=1)
    first = np.lexsort((-weight[p], inv))
    top_pattern = np.zeros(items.shape[0], dtype=np.int64)
    top_pattern[inv[first][::-1]] = p[first][::-1]
    small = size[cell] < cfg.min_items
    cell = np.where(small, ukey.shape[0] + top_pattern, cell)
    _, cell = np.unique(cell, return_inverse=True)
    item_heat = np.stack(
        [_item_heat(heat[r], graph)[items] for r in range(heat.shape[0])]
    )
    clusters = tree.clusters(level - 1)
    left = budget.left()
    order = np.argsort(cell, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(cell))])
    for c in range(bounds.size - 1):
        members = order[bounds[c] : bounds[c + 1]]
        ids = items[members]
        cell_heat = item_heat[:, members].sum(axis=1)
        scores = [cell_heat[list(cl.regions)].sum() for cl in clusters]
        winner = clusters[int(np.argmax(scores))]
        target = max(winner.regions, key=lambda z: (cell_heat[z], -z))
        need = ids[(placement.holders[ids] & np.uint32(winner.mask)) == 0]
        cost = float(space.item_bytes[need].sum())
        if need.size and cost <= left[target]:
            placement.add(target, need)
            left[target] -= cost


def _precache(
    placement: Placement,
    heat: np.ndarray,
    graph: CSRGraph,
    space: ItemSpace,
    cfg: GeoPlaceConfig,
    budget: _Budget,
) -> None:
    """Layer 0: each region caches its hottest items above the heat quantile."""
    left = budget.left()
    for r in range(heat.shape[0]):
        h = _item_heat(heat[r], graph)
        positive = h[h > 0]
        if positive.size == 0 or left[r] <= 0:
            continue
        theta = float(np.quantile(positive, cfg.precache_quantile))
        cand = np.flatnonzero((h >= theta) & (h > 0) & ~placement.holds(r))
        cand = cand[np.argsort(-h[cand], kind="stable")]
        fits = np.cumsum(space.item_bytes[cand].astype(np.float64)) <= left[r]
        placement.add(r, cand[fits])


# ---------------------------------------------------------------- baselines (§3.6)


def home_only(space: ItemSpace) -> Placement:
    """Every item at its home only (reference row)."""
    return Placement.home_only(space)


def full_replication(space: ItemSpace, num_regions: int) -> Placement:
    """Every region holds everything."""
    return Placement(np.full(space.num_items, (1 << num_regions) - 1, dtype=np.uint32))


def _rehomed(space: ItemSpace, vertex_home: np.ndarray, graph: CSRGraph) -> ItemSpace:
    src = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    home = np.concatenate([vertex_home, vertex_home[src]]).astype(np.int8)
    return ItemSpace(space.num_vertices, space.num_edges, space.item_bytes, home)


def single_primary(
    space: ItemSpace, graph: CSRGraph, region: int = 0
) -> tuple[ItemSpace, Placement]:
    """Everything at one region (USE): a re-homed space and its home-only placement."""
    homes = np.full(space.num_vertices, region, dtype=np.int8)
    moved = _rehomed(space, homes, graph)
    return moved, Placement.home_only(moved)


def hash_layout(
    space: ItemSpace, graph: CSRGraph, num_regions: int
) -> tuple[ItemSpace, Placement]:
    """Each vertex and its out-edges at ``hash(id) mod R``, no replicas (re-homed)."""
    ids = np.arange(space.num_vertices, dtype=np.uint64)
    mixed = (ids * np.uint64(0x9E3779B97F4A7C15)) ^ (ids >> np.uint64(7))
    homes = ((mixed >> np.uint64(17)) % np.uint64(num_regions)).astype(np.int8)
    moved = _rehomed(space, homes, graph)
    return moved, Placement.home_only(moved)


def random_k(
    space: ItemSpace, num_regions: int, k: int = 3, seed: int = 0
) -> Placement:
    """``k`` distinct regions per item: its home plus ``k - 1`` uniform others."""
    if not 1 <= k <= num_regions:
        raise GeoError.build("k", "random_k", f"1 <= k <= {num_regions}", str(k))
    rng = np.random.default_rng(seed)
    keys = rng.random((space.num_items, num_regions))
    keys[np.arange(space.num_items), space.home.astype(np.int64)] = -1.0
    chosen = np.argsort(keys, axis=1)[:, :k]
    holders = np.bitwise_or.reduce(
        np.left_shift(np.uint32(1), chosen.astype(np.uint32)), axis=1
    )
    return Placement(holders.astype(np.uint32))


def top_k(
    history: Requests, space: ItemSpace, num_regions: int, k: int = 3
) -> Placement:
    """Home plus the regions reading each item most, up to ``k`` distinct regions."""
    sizes = np.diff(history.indptr)
    origin = np.repeat(history.origin.astype(np.int64), sizes)
    read = np.repeat(~history.is_write, sizes)
    counts = np.zeros((space.num_items, num_regions), dtype=np.float64)
    np.add.at(counts, (history.items[read], origin[read]), 1.0)
    counts[np.arange(space.num_items), space.home.astype(np.int64)] = np.inf
    # Stable order: most reads first, lower region index on ties.
    order = np.argsort(-counts, axis=1, kind="stable")[:, :k]
    picked = np.take_along_axis(counts, order, axis=1) > 0
    bits = np.where(
        picked, np.left_shift(np.uint32(1), order.astype(np.uint32)), np.uint32(0)
    )
    return Placement(np.bitwise_or.reduce(bits, axis=1).astype(np.uint32))
