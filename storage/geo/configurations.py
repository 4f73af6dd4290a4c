"""The configurations GeoLayer is compared with (spec ``systems/geolayer.md`` §3.6).

A configuration is a placement served through a router. This module is the one list
of them and the one way to build them: the job's steps
(:mod:`strata.operators.io.geo_bench`) and the twin harness
(``benchmarks/storage/geo/twin_acceptance.py``) both use it, so their rows describe
the same layouts. ``label`` is the display name the harness writes into its results
(``benchmarks/results/geo_twin.json``'s ``work`` and ``peer`` strings).

Examples:
    >>> configuration("random3-random").label
    'Random-3 (random routing)'
    >>> configuration("Random-3 (random routing)").name
    'random3-random'
    >>> from strata.storage.geo.topology import table1
    >>> from strata.storage.geo.workload import GeoWorkloadConfig, synthetic_workload
    >>> topo = table1()
    >>> small = GeoWorkloadConfig(num_vertices=500, history_ops=300, test_ops=50)
    >>> w = synthetic_workload(topo, small, seed=0)
    >>> built = build(configurations(("geolayer", "hash")), w, topo, seed=0)
    >>> [(b.config.name, type(b.router).__name__) for b in built]
    [('geolayer', 'LayeredRouter'), ('hash', 'NearestRouter')]
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from strata.storage.geo import placement as pl
from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.layers import LayerTree, cross_region_pairs
from strata.storage.geo.routing import (
    LayeredRouter,
    NearestRouter,
    RandomRouter,
    Router,
)
from strata.storage.geo.topology import Topology
from strata.storage.geo.workload import GeoWorkload

__all__ = [
    "ALL_CONFIGURATIONS",
    "CONFIGURATIONS",
    "DIAGNOSTICS",
    "PLACEMENTS",
    "ROUTERS",
    "BuiltConfiguration",
    "GeoConfiguration",
    "build",
    "configuration",
    "configurations",
    "layer_tree",
    "place",
    "router_of",
]

#: Placements a configuration can use; each is computed once per run.
PLACEMENTS = (
    "geolayer",
    "random3",
    "top3",
    "single-primary",
    "hash",
    "full-replication",
    "home-only",
)
ROUTERS = ("layered", "random", "nearest")


@dataclass(frozen=True, slots=True)
class GeoConfiguration:
    """One row of the comparison: a placement served through a router.

    ``name`` is the short key (job parameters, report keys); ``label`` the display
    name (the harness's rows).
    """

    name: str
    placement: str
    router: str
    label: str


#: Every configuration of spec §3.6: GeoLayer, the ablations (placement only: layered
#: placement + random routing; routing only: Random-3 + layered routing), Random-3
#: and Top-3 with random (the paper's) and nearest routing, and the single-holder
#: layouts (any router serves them the same; nearest is used).
CONFIGURATIONS = (
    GeoConfiguration("geolayer", "geolayer", "layered", "GeoLayer"),
    GeoConfiguration(
        "geolayer-random",
        "geolayer",
        "random",
        "GeoLayer placement + random routing (placement only)",
    ),
    GeoConfiguration(
        "random3-layered",
        "random3",
        "layered",
        "Random-3 + layered routing (routing only)",
    ),
    GeoConfiguration(
        "random3-random", "random3", "random", "Random-3 (random routing)"
    ),
    GeoConfiguration(
        "random3-nearest", "random3", "nearest", "Random-3 (nearest routing)"
    ),
    GeoConfiguration("top3-random", "top3", "random", "Top-3 (random routing)"),
    GeoConfiguration("top3-nearest", "top3", "nearest", "Top-3 (nearest routing)"),
    GeoConfiguration("single-primary", "single-primary", "nearest", "single-primary"),
    GeoConfiguration("hash", "hash", "nearest", "hash"),
    GeoConfiguration(
        "full-replication", "full-replication", "nearest", "full replication"
    ),
    GeoConfiguration("home-only", "home-only", "nearest", "home-only"),
)
#: Not in §3.6: GeoLayer's placement with nearest routing, the harness's evidence
#: for the p99 note (how much of GeoLayer's tail is its placement).
DIAGNOSTICS = (
    GeoConfiguration(
        "geolayer-nearest",
        "geolayer",
        "nearest",
        "GeoLayer placement + nearest routing (diagnostic)",
    ),
)
ALL_CONFIGURATIONS = CONFIGURATIONS + DIAGNOSTICS
_BY_KEY = {
    **{c.name: c for c in ALL_CONFIGURATIONS},
    **{c.label: c for c in ALL_CONFIGURATIONS},
}
_WHERE = "geo.configurations"


def configuration(key: str) -> GeoConfiguration:
    """The configuration whose ``name`` or ``label`` is ``key``; unknown keys raise."""
    found = _BY_KEY.get(key)
    if found is None:
        raise GeoError.build("configuration", _WHERE, _expected(), repr(key))
    return found


def configurations(keys: Iterable[str]) -> tuple[GeoConfiguration, ...]:
    """The configurations called ``keys`` (names or labels; in order, once each).

    Raises :class:`GeoError` naming every unknown key, or when there are none.
    """
    keys = list(keys)
    unknown = [k for k in keys if k not in _BY_KEY]
    if unknown or not keys:
        got = ", ".join(repr(k) for k in unknown) if unknown else "none"
        raise GeoError.build("configurations", _WHERE, _expected(), got)
    return tuple(dict.fromkeys(_BY_KEY[k] for k in keys))


def _expected() -> str:
    return f"names from {', '.join(c.name for c in ALL_CONFIGURATIONS)}"


def layer_tree(workload: GeoWorkload, topology: Topology) -> LayerTree:
    """The latency-layered tree over the region pairs the graph's edges join (§3.2)."""
    graph, home = workload.graph, workload.vertex_home
    src = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    pairs = cross_region_pairs(home[src], home[graph.indices], topology.num_regions)
    return LayerTree.build(topology, pairs)


def place(
    placement: str,
    workload: GeoWorkload,
    topology: Topology,
    seed: int,
    cfg: pl.GeoPlaceConfig | None = None,
    tree: LayerTree | None = None,
) -> tuple[ItemSpace, Placement]:
    """One placement of :data:`PLACEMENTS` as ``(item space, placement)``.

    Single-primary and hash re-home every item, so they return a new space (a write's
    cost follows the new home). ``cfg`` tunes GeoLayer's placement; ``tree`` saves
    rebuilding :func:`layer_tree` when the caller has it.
    """
    w, r = workload, topology.num_regions
    if placement == "geolayer":
        tree = tree or layer_tree(w, topology)
        return w.space, pl.geolayer_place(
            w.history, w.space, w.graph, tree, topology, cfg
        )
    if placement == "random3":
        return w.space, pl.random_k(w.space, r, k=3, seed=seed)
    if placement == "top3":
        return w.space, pl.top_k(w.history, w.space, r, k=3)
    if placement == "single-primary":
        return pl.single_primary(w.space, w.graph, region=0)
    if placement == "hash":
        return pl.hash_layout(w.space, w.graph, r)
    if placement == "full-replication":
        return w.space, pl.full_replication(w.space, r)
    if placement == "home-only":
        return w.space, pl.home_only(w.space)
    raise GeoError.build("placement", _WHERE, " or ".join(PLACEMENTS), repr(placement))


def router_of(
    kind: str, placement: Placement, topology: Topology, tree: LayerTree, seed: int
) -> Router:
    """A fresh router: ``layered``, ``random`` (seeded) or ``nearest``.

    Build one per run: a random router's choices are a stream from its seed.
    """
    if kind == "layered":
        return LayeredRouter(placement, tree, topology)
    if kind == "random":
        return RandomRouter(placement, seed=seed)
    if kind == "nearest":
        return NearestRouter(placement, topology)
    raise GeoError.build("router", _WHERE, " or ".join(ROUTERS), repr(kind))


@dataclass(frozen=True, eq=False)
class BuiltConfiguration:
    """A configuration ready to simulate; ``placement_s`` is its placement's time.

    ``tree`` is the layer tree the routers use (:func:`router_of` makes another).
    """

    config: GeoConfiguration
    space: ItemSpace
    placement: Placement
    router: Router
    placement_s: float
    tree: LayerTree


def build(
    configs: Sequence[GeoConfiguration],
    workload: GeoWorkload,
    topology: Topology,
    seed: int,
    cfg: pl.GeoPlaceConfig | None = None,
) -> list[BuiltConfiguration]:
    """Place each placement ``configs`` need once, and give every one its router."""
    tree = layer_tree(workload, topology)
    placed: dict[str, tuple[ItemSpace, Placement, float]] = {}
    for name in dict.fromkeys(c.placement for c in configs):
        start = time.perf_counter()
        space, placement = place(name, workload, topology, seed, cfg, tree)
        placed[name] = (space, placement, time.perf_counter() - start)
    out = []
    for c in configs:
        space, placement, seconds = placed[c.placement]
        router = router_of(c.router, placement, topology, tree, seed)
        out.append(BuiltConfiguration(c, space, placement, router, seconds, tree))
    return out
