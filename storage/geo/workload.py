"""The synthetic geo workload of spec §3.7: a homophilous community graph, Zipf reads.

* **Graph:** Strata's planted-community generator
  (:func:`strata.storage.generators.sbm`) with one community per region, so
  ``homophily`` (default 80%) of edges stay inside a region. A vertex's home is its
  community; an edge's home is its source's. Vertex payloads are 64-256 B, edges 32 B.
* **Requests:** Zipf source popularity (``zipf_s``); 70% from the source's home region,
  the rest from a uniform other region. Reads are 30% 1-hop and 30% 2-hop
  neighbourhoods (capped at ``max_items``) and 40% 3-hop random walks; writes
  (``write_fraction``) touch one vertex drawn by Zipf from a fixed ``mutable_fraction``
  of vertices. SLOs are ``eta * gamma_max_ms`` with eta in ``slo_etas``.
* **Arrivals:** open-loop Poisson at a rate that keeps even the slowest link below
  ``max_link_utilisation`` if every byte of every request crossed it.

Items of a request are stored CSR-style and grouped per hop (``round_indptr``), so a
traversal can fetch one hop per round (pitfall 6).

Examples:
    >>> from strata.storage.geo.topology import table1
    >>> w = synthetic_workload(table1(), GeoWorkloadConfig.small(), seed=0)
    >>> w.space.num_vertices, w.history.num_requests, w.test.num_requests
    (2000, 2000, 500)
    >>> h = w.history
    >>> bool(h.is_write.mean() < 0.2), bool(h.indptr[-1] == h.items.size)
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from strata.storage.csr import CSRGraph
from strata.storage.generators import sbm
from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import ItemSpace
from strata.storage.geo.topology import Topology

__all__ = [
    "KIND_ONE_HOP",
    "KIND_TWO_HOP",
    "KIND_WALK",
    "KIND_WRITE",
    "GeoWorkload",
    "GeoWorkloadConfig",
    "Requests",
    "synthetic_workload",
]

KIND_WRITE, KIND_ONE_HOP, KIND_TWO_HOP, KIND_WALK = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class GeoWorkloadConfig:
    """Sizes and mix of the synthetic workload (defaults: the full-size spec run)."""

    num_vertices: int = 200_000
    avg_degree: float = 10.0
    regions: int = 5
    homophily: float = 0.8
    zipf_s: float = 1.0
    history_ops: int = 100_000
    test_ops: int = 10_000
    write_fraction: float = 0.1
    mutable_fraction: float = 0.3
    home_origin_fraction: float = 0.7
    mix: tuple[float, float, float] = (0.3, 0.3, 0.4)
    max_items: int = 512
    vertex_bytes: tuple[int, int] = (64, 256)
    edge_bytes: int = 32
    gamma_max_ms: float = 200.0
    slo_etas: tuple[float, ...] = (0.5, 1.0)
    max_link_utilisation: float = 0.5

    @classmethod
    def small(cls) -> GeoWorkloadConfig:
        """The unit-test size: 2k vertices, 2k history and 500 test operations."""
        return cls(num_vertices=2_000, history_ops=2_000, test_ops=500)


@dataclass(frozen=True, eq=False)
class Requests:
    """Operations as arrays; items CSR-style (``indptr``/``items``) grouped per hop.

    Request ``i``'s hops are rounds ``request_rounds[i]:request_rounds[i+1]``; round
    ``k``'s items are ``items[round_indptr[k]:round_indptr[k+1]]``, so
    ``indptr[i] == round_indptr[request_rounds[i]]``.
    """

    origin: np.ndarray
    is_write: np.ndarray
    kind: np.ndarray
    indptr: np.ndarray
    items: np.ndarray
    request_rounds: np.ndarray
    round_indptr: np.ndarray
    source: np.ndarray
    slo_ms: np.ndarray
    arrival_s: np.ndarray

    @property
    def num_requests(self) -> int:
        """How many operations."""
        return int(self.origin.shape[0])

    def items_of(self, i: int) -> np.ndarray:
        """All item ids of request ``i``."""
        return self.items[self.indptr[i] : self.indptr[i + 1]]

    def rounds_of(self, i: int) -> list[np.ndarray]:
        """Item ids of request ``i`` per hop (traversal semantics)."""
        lo, hi = int(self.request_rounds[i]), int(self.request_rounds[i + 1])
        ptr = self.round_indptr
        return [self.items[ptr[k] : ptr[k + 1]] for k in range(lo, hi)]

    def subset(self, index: np.ndarray) -> Requests:
        """The requests at ``index`` (in that order), arrivals kept."""
        idx = np.asarray(index, dtype=np.int64)
        items, rounds, counts, rcounts = [], [], [], []
        for i in idx.tolist():
            items.append(self.items_of(i))
            lo, hi = int(self.request_rounds[i]), int(self.request_rounds[i + 1])
            sizes = np.diff(self.round_indptr[lo : hi + 1])
            rounds.append(sizes)
            counts.append(int(sizes.sum()))
            rcounts.append(hi - lo)
        all_items = np.concatenate(items) if items else np.zeros(0, np.int64)
        sizes = np.concatenate(rounds) if rounds else np.zeros(0, np.int64)
        return Requests(
            origin=self.origin[idx],
            is_write=self.is_write[idx],
            kind=self.kind[idx],
            indptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            items=all_items.astype(np.int64),
            request_rounds=np.concatenate([[0], np.cumsum(rcounts)]).astype(np.int64),
            round_indptr=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            source=self.source[idx],
            slo_ms=self.slo_ms[idx],
            arrival_s=self.arrival_s[idx],
        )


@dataclass(frozen=True, eq=False)
class GeoWorkload:
    """A graph with homes, its item space, a history log and a test set."""

    graph: CSRGraph
    vertex_home: np.ndarray
    space: ItemSpace
    history: Requests
    test: Requests
    mutable: np.ndarray
    rate_per_s: float
    seed: int
    config: GeoWorkloadConfig = field(default_factory=GeoWorkloadConfig)


@numba.njit(cache=True)
def _expand(  # pragma: no cover - numba
    indptr: np.ndarray,
    indices: np.ndarray,
    num_vertices: int,
    sources: np.ndarray,
    kinds: np.ndarray,
    walk_seed: int,
    max_items: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items per request grouped by hop: (items, round sizes, rounds per request)."""
    n = sources.shape[0]
    out = np.empty(n * 16 + 1024, dtype=np.int64)
    round_sizes = np.empty(n * 4, dtype=np.int64)
    rounds = np.zeros(n, dtype=np.int64)
    stamp = np.full(num_vertices, -1, dtype=np.int64)
    frontier = np.empty(max_items, dtype=np.int64)
    nxt = np.empty(max_items, dtype=np.int64)
    np.random.seed(walk_seed)  # noqa: NPY002 - numba has only the legacy API
    pos = 0
    nr = 0
    for i in range(n):
        if out.shape[0] < pos + max_items + 8:
            grown = np.empty(out.shape[0] * 2 + max_items, dtype=np.int64)
            grown[:pos] = out[:pos]
            out = grown
        v = sources[i]
        kind = kinds[i]
        start = pos
        out[pos] = v
        pos += 1
        stamp[v] = i
        round_sizes[nr] = 1
        nr += 1
        rounds[i] = 1
        if kind == 3:
            cur = v
            for _hop in range(3):
                deg = indptr[cur + 1] - indptr[cur]
                if deg == 0:
                    break
                e = indptr[cur] + np.random.randint(0, deg)  # noqa: NPY002
                nb = indices[e]
                before = pos
                seen = False
                for k in range(start, pos):  # a walk may step back along an edge
                    if out[k] == num_vertices + e:
                        seen = True
                if not seen:
                    out[pos] = num_vertices + e
                    pos += 1
                if stamp[nb] != i:
                    stamp[nb] = i
                    out[pos] = nb
                    pos += 1
                if pos > before:
                    round_sizes[nr] = pos - before
                    nr += 1
                    rounds[i] += 1
                cur = nb
        elif kind == 1 or kind == 2:
            nf = 1
            frontier[0] = v
            hops = kind
            for _hop in range(hops):
                before = pos
                nn = 0
                for f in range(nf):
                    u = frontier[f]
                    for e in range(indptr[u], indptr[u + 1]):
                        if pos - start + 2 > max_items:
                            break
                        nb = indices[e]
                        out[pos] = num_vertices + e
                        pos += 1
                        if stamp[nb] != i:
                            stamp[nb] = i
                            out[pos] = nb
                            pos += 1
                            nxt[nn] = nb
                            nn += 1
                if pos > before:
                    round_sizes[nr] = pos - before
                    nr += 1
                    rounds[i] += 1
                for f in range(nn):
                    frontier[f] = nxt[f]
                nf = nn
                if pos - start + 2 > max_items:
                    break
    return out[:pos], round_sizes[:nr], rounds


def _zipf_ranks(num: int, s: float, draws: int, rng: np.random.Generator) -> np.ndarray:
    weights = 1.0 / np.arange(1, num + 1, dtype=np.float64) ** s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(draws)), num - 1).astype(np.int64)


def _requests(
    graph: CSRGraph,
    vertex_home: np.ndarray,
    popular: np.ndarray,
    mutable_popular: np.ndarray,
    cfg: GeoWorkloadConfig,
    num_regions: int,
    count: int,
    rng: np.random.Generator,
) -> Requests:
    is_write = rng.random(count) < cfg.write_fraction
    read_kind = 1 + np.searchsorted(
        np.cumsum(cfg.mix) / sum(cfg.mix), rng.random(count)
    )
    kind = np.where(is_write, KIND_WRITE, np.minimum(read_kind, KIND_WALK)).astype(
        np.int8
    )
    source = popular[_zipf_ranks(popular.shape[0], cfg.zipf_s, count, rng)]
    wsource = mutable_popular[
        _zipf_ranks(mutable_popular.shape[0], cfg.zipf_s, count, rng)
    ]
    source = np.where(is_write, wsource, source).astype(np.int64)
    home = vertex_home[source].astype(np.int64)
    away = rng.random(count) >= cfg.home_origin_fraction
    shift = rng.integers(1, max(num_regions, 2), size=count)
    origin = np.where(away & (num_regions > 1), (home + shift) % num_regions, home)
    slo = (
        rng.choice(np.asarray(cfg.slo_etas, dtype=np.float64), size=count)
        * cfg.gamma_max_ms
    )
    items, round_sizes, rounds = _expand(
        graph.indptr,
        graph.indices.astype(np.int64),
        graph.num_nodes,
        source,
        kind.astype(np.int64),
        int(rng.integers(0, 2**31 - 1)),
        cfg.max_items,
    )
    request_rounds = np.concatenate([[0], np.cumsum(rounds)]).astype(np.int64)
    round_indptr = np.concatenate([[0], np.cumsum(round_sizes)]).astype(np.int64)
    return Requests(
        origin=origin.astype(np.int8),
        is_write=is_write,
        kind=kind,
        indptr=round_indptr[request_rounds],
        items=items,
        request_rounds=request_rounds,
        round_indptr=round_indptr,
        source=source,
        slo_ms=slo,
        arrival_s=np.zeros(count),
    )


def _with_arrivals(req: Requests, rate: float, rng: np.random.Generator) -> Requests:
    gaps = rng.exponential(1.0 / rate, size=req.num_requests)
    return Requests(
        origin=req.origin,
        is_write=req.is_write,
        kind=req.kind,
        indptr=req.indptr,
        items=req.items,
        request_rounds=req.request_rounds,
        round_indptr=req.round_indptr,
        source=req.source,
        slo_ms=req.slo_ms,
        arrival_s=np.cumsum(gaps),
    )


def synthetic_workload(
    topology: Topology, cfg: GeoWorkloadConfig | None = None, seed: int = 0
) -> GeoWorkload:
    """Generate the graph, item space, history log and test set for ``seed``.

    The test set uses a stream derived from ``seed`` but distinct from the history's.
    """
    cfg = cfg or GeoWorkloadConfig()
    where = "synthetic_workload"
    if cfg.regions != topology.num_regions:
        raise GeoError.build(
            "regions",
            where,
            f"{topology.num_regions} (the topology's)",
            str(cfg.regions),
        )
    if cfg.num_vertices < cfg.regions or cfg.history_ops < 0 or cfg.test_ops < 0:
        raise GeoError.build(
            "sizes",
            where,
            "num_vertices >= regions and op counts >= 0",
            f"{cfg.num_vertices}, {cfg.history_ops}, {cfg.test_ops}",
        )
    if not 0.0 <= cfg.write_fraction <= 1.0 or not 0.0 < cfg.mutable_fraction <= 1.0:
        raise GeoError.build(
            "fractions",
            where,
            "0 <= write_fraction <= 1 and 0 < mutable_fraction <= 1",
            f"{cfg.write_fraction}, {cfg.mutable_fraction}",
        )
    graph, blocks = sbm(
        cfg.num_vertices, cfg.regions, cfg.avg_degree, cfg.homophily, seed=seed
    )
    rng = np.random.default_rng([seed, 1])
    vertex_home = blocks.astype(np.int8)
    v, m = graph.num_nodes, graph.num_edges
    lo, hi = cfg.vertex_bytes
    item_bytes = np.concatenate(
        [rng.integers(lo, hi + 1, size=v), np.full(m, cfg.edge_bytes)]
    ).astype(np.int32)
    src = np.repeat(np.arange(v), np.diff(graph.indptr))
    home = np.concatenate([vertex_home, vertex_home[src]]).astype(np.int8)
    space = ItemSpace(v, m, item_bytes, home)
    popular = rng.permutation(v).astype(np.int64)
    mutable = np.zeros(v, dtype=bool)
    mutable[
        rng.choice(v, size=max(1, round(cfg.mutable_fraction * v)), replace=False)
    ] = True
    mutable_popular = popular[mutable[popular]]
    history = _requests(
        graph,
        vertex_home,
        popular,
        mutable_popular,
        cfg,
        cfg.regions,
        cfg.history_ops,
        rng,
    )
    test_rng = np.random.default_rng([seed, 2])
    test = _requests(
        graph,
        vertex_home,
        popular,
        mutable_popular,
        cfg,
        cfg.regions,
        cfg.test_ops,
        test_rng,
    )
    # Open-loop Poisson: even if all of a mean request's bytes crossed the slowest link,
    # that link stays below max_link_utilisation.
    mean_bytes = 1.0
    if test.items.size:
        per_request = item_bytes[test.items].astype(np.int64)
        sizes = np.add.reduceat(per_request, test.indptr[:-1])
        mean_bytes = float(np.mean(sizes))
    off = ~np.eye(topology.num_regions, dtype=bool)
    slowest = (
        float(topology.bw_mbps[off].min()) if off.any() else topology.intra_bw_mbps
    )
    rate = cfg.max_link_utilisation * slowest * 1e6 / 8.0 / max(mean_bytes, 1.0)
    history = _with_arrivals(history, rate, np.random.default_rng([seed, 3]))
    test = _with_arrivals(test, rate, np.random.default_rng([seed, 4]))
    return GeoWorkload(
        graph, vertex_home, space, history, test, mutable, rate, seed, cfg
    )
