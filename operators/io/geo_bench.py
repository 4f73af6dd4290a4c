"""The steps of ``jobs/geo_bench.py``: GeoLayer and its baselines on the twin and servers.

Spec ``design/systems/geolayer.md`` §3.5-§3.7 and §4. One seeded synthetic workload
(:func:`~strata.storage.geo.workload.synthetic_workload`) is placed by every
configuration (a placement and a router, :mod:`strata.storage.geo.configurations`),
served on the analytic twin (all test requests) and on the region servers (the first
``server_requests`` test requests, open-loop arrivals scaled by ``time_scale``), and
summarised per configuration::

    workload -> placements -+-> twin -----+-> summary (outputs)
                            +-> servers --+

Values between steps are wire-encodable (dicts of numpy arrays and scalars), so the
job runs on every executor. The servers step starts one
:class:`~strata.storage.geo.server.RegionCluster` per distinct placement; the twin
step also simulates the servers' request prefix on its own, so A1 compares the same
requests with the same arrivals. The summary, A1 and the printed table are in
:mod:`strata.operators.io.geo_report`.

Examples:
    >>> [c.name for c in configurations(("geolayer", "hash"))]
    ['geolayer', 'hash']
    >>> configurations(("nope",))
    Traceback (most recent call last):
    ...
    strata.operators.errors.OperatorError: configurations in geo.configurations: expected names from geolayer, geolayer-random, random3-layered, random3-random, random3-nearest, top3-random, top3-nearest, single-primary, hash, full-replication, home-only, geolayer-nearest, got 'nope'.
"""  # noqa: E501

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from strata.operators.errors import OperatorError
from strata.storage.csr import CSRGraph
from strata.storage.geo import configurations as geo_configurations
from strata.storage.geo.configurations import (
    CONFIGURATIONS,
    GeoConfiguration,
    layer_tree,
    router_of,
)
from strata.storage.geo.configurations import place as place_one
from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.summary import run_arrays
from strata.storage.geo.topology import Topology, table1, uniform
from strata.storage.geo.twin import Semantics, simulate
from strata.storage.geo.workload import (
    GeoWorkload,
    GeoWorkloadConfig,
    Requests,
    synthetic_workload,
)

__all__ = [
    "CONFIGURATIONS",
    "GeoConfiguration",
    "configurations",
    "generate",
    "topology_of",
    "workload_of",
]

WHERE = "geo_bench"

#: The topologies a run can use: the paper's Table I, and the uniform matrix of A10.
TOPOLOGIES = ("table1", "uniform")
UNIFORM_RTT_MS, UNIFORM_BW_MBPS = 70.0, 90.0


def configurations(names: Sequence[str]) -> tuple[GeoConfiguration, ...]:
    """The configurations called ``names`` (:mod:`strata.storage.geo.configurations`).

    In that order, once each; unknown names raise :class:`OperatorError`.
    """
    try:
        return geo_configurations.configurations(names)
    except GeoError as error:
        raise OperatorError(str(error)) from error


def topology_of(name: str) -> Topology:
    """``table1`` (spec Table I) or ``uniform`` (5 regions, 70 ms / 90 Mbps: A10)."""
    if name == "table1":
        return table1()
    if name == "uniform":
        return uniform(5, UNIFORM_RTT_MS, UNIFORM_BW_MBPS)
    raise OperatorError.build("topology", WHERE, " or ".join(TOPOLOGIES), repr(name))


# -- the workload as a wire-encodable payload -------------------------------------

_REQUEST_FIELDS = (
    "origin",
    "is_write",
    "kind",
    "indptr",
    "items",
    "request_rounds",
    "round_indptr",
    "source",
    "slo_ms",
    "arrival_s",
)


def generate(workload: GeoWorkloadConfig, topology: str, seed: int) -> dict[str, Any]:
    """The ``workload`` step: the seeded synthetic workload as arrays."""
    w = synthetic_workload(topology_of(topology), workload, seed)
    return {
        "topology": topology,
        "seed": seed,
        "rate_per_s": float(w.rate_per_s),
        "indptr": w.graph.indptr,
        "indices": w.graph.indices,
        "vertex_home": w.vertex_home,
        "item_bytes": w.space.item_bytes,
        "home": w.space.home,
        "mutable": w.mutable,
        "history": _requests_arrays(w.history),
        "test": _requests_arrays(w.test),
    }


def _requests_arrays(requests: Requests) -> dict[str, np.ndarray]:
    return {name: getattr(requests, name) for name in _REQUEST_FIELDS}


def workload_of(payload: Mapping[str, Any], config: GeoWorkloadConfig) -> GeoWorkload:
    """Rebuild the :class:`GeoWorkload` of :func:`generate`'s payload."""
    indptr = np.asarray(payload["indptr"])
    graph = CSRGraph(indptr, np.asarray(payload["indices"]), len(indptr) - 1)
    space = ItemSpace(
        graph.num_nodes,
        graph.num_edges,
        np.asarray(payload["item_bytes"]),
        np.asarray(payload["home"]),
    )
    return GeoWorkload(
        graph=graph,
        vertex_home=np.asarray(payload["vertex_home"]),
        space=space,
        history=Requests(**payload["history"]),
        test=Requests(**payload["test"]),
        mutable=np.asarray(payload["mutable"]),
        rate_per_s=float(payload["rate_per_s"]),
        seed=int(payload["seed"]),
        config=config,
    )


# -- placements -------------------------------------------------------------------


def place(
    workload_payload: Mapping[str, Any],
    *,
    workload: GeoWorkloadConfig,
    placements: Sequence[str],
    seed: int,
) -> dict[str, dict[str, Any]]:
    """The ``placements`` step: each placement's holders, homes and seconds to place.

    ``home`` is the placement's item homes: single-primary and hash move every item
    to a new home (and the cost of a write follows the new home).
    """
    w = workload_of(workload_payload, workload)
    topology = topology_of(str(workload_payload["topology"]))
    out: dict[str, dict[str, Any]] = {}
    for name in placements:
        start = time.perf_counter()
        space, placement = place_one(name, w, topology, seed)
        seconds = time.perf_counter() - start
        placement.check(space)
        out[name] = {
            "holders": placement.holders,
            "home": space.home,
            "placement_s": seconds,
        }
    return out


def placement_of(
    w: GeoWorkload, placed: Mapping[str, Any]
) -> tuple[ItemSpace, Placement]:
    """One placement of the ``placements`` step's output, rebuilt on ``w``'s items."""
    space = ItemSpace(
        w.space.num_vertices,
        w.space.num_edges,
        w.space.item_bytes,
        np.asarray(placed["home"]),
    )
    return space, Placement(np.asarray(placed["holders"]))


# -- the twin ---------------------------------------------------------------------


def simulate_twin(
    workload_payload: Mapping[str, Any],
    placements: Mapping[str, Mapping[str, Any]],
    *,
    workload: GeoWorkloadConfig,
    configs: Sequence[str],
    semantics: str,
    prefix: int,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """The ``twin`` step: every test request of every configuration, simulated.

    With ``prefix > 0`` the first ``prefix`` test requests are also simulated on
    their own (``prefix_latency_ms``): the servers replay exactly those, and a later
    request can delay an earlier one's reply on a shared link, so the full run's
    first latencies are not quite the prefix's.
    """
    w = workload_of(workload_payload, workload)
    topology = topology_of(str(workload_payload["topology"]))
    tree = layer_tree(w, topology)
    mode: Semantics = "traversal" if semantics == "traversal" else "pattern"
    head = w.test.subset(np.arange(min(prefix, w.test.num_requests)))
    out: dict[str, dict[str, Any]] = {}
    for config in configurations(configs):
        space, placement = placement_of(w, placements[config.placement])
        router = router_of(config.router, placement, topology, tree, seed)
        result = simulate(
            w.test, placement, router, topology, space=space, semantics=mode
        )
        out[config.name] = run_arrays(result)
        if head.num_requests:
            router = router_of(config.router, placement, topology, tree, seed)
            first = simulate(
                head, placement, router, topology, space=space, semantics="pattern"
            )
            out[config.name]["prefix_latency_ms"] = first.latency_ms
    return out


# -- the region servers -----------------------------------------------------------


def replay_servers(
    workload_payload: Mapping[str, Any],
    placements: Mapping[str, Mapping[str, Any]],
    *,
    workload: GeoWorkloadConfig,
    configs: Sequence[str],
    requests: int,
    time_scale: float,
    deadline_s: float,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """The ``servers`` step: the first ``requests`` test requests on region servers.

    One :class:`~strata.storage.geo.server.RegionCluster` per placement (its
    configurations replay on it in turn, each with a fresh router seeded as the
    twin's, so both plan every request alike). Latencies come back unscaled.
    """
    if requests <= 0:
        return {}
    from strata.engine.gang.start import allow_children
    from strata.storage.geo.replay import replay
    from strata.storage.geo.server import RegionCluster

    w = workload_of(workload_payload, workload)
    topology = topology_of(str(workload_payload["topology"]))
    tree = layer_tree(w, topology)
    head = w.test.subset(np.arange(min(requests, w.test.num_requests)))
    chosen = configurations(configs)
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(c.placement for c in chosen):
        space, placement = placement_of(w, placements[name])
        # A process-executor worker is a daemon; the servers are its children.
        with (
            allow_children(),
            RegionCluster.start(
                topology, placement, space, {}, time_scale=time_scale
            ) as cluster,
        ):
            for config in (c for c in chosen if c.placement == name):
                router = router_of(config.router, placement, topology, tree, seed)
                result = replay(cluster, head, router, deadline_s=deadline_s)
                out[config.name] = {
                    "latency_ms": result.latency_ms,
                    "regions_contacted": result.regions_contacted,
                }
    return out
