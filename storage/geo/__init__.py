"""GeoLayer: a geo-distributed, latency-layered graph store (spec systems/geolayer.md).

A plain library (numpy, numba, pyarrow, pyzmq and ``strata.storage`` only): regions
and links (:mod:`.topology`), items and holder bitmasks (:mod:`.items`), the layer
tree (:mod:`.layers`), routers (:mod:`.routing`), the cost model (:mod:`.cost`),
directed heat diffusion (:mod:`.heat`), placement and baselines (:mod:`.placement`),
the synthetic workload (:mod:`.workload`), the analytic twin (:mod:`.twin`), the
WAN shim (:mod:`.wan`), the compared configurations (:mod:`.configurations`) and
their per-run figures (:mod:`.summary`).
"""

from strata.storage.geo.cost import CostBreakdown, CostConfig
from strata.storage.geo.errors import GeoError
from strata.storage.geo.heat import HeatConfig, HeatResult, diffuse
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.layers import Cluster, LayerTree, cross_region_pairs
from strata.storage.geo.placement import (
    GeoPlaceConfig,
    full_replication,
    geolayer_place,
    hash_layout,
    home_only,
    random_k,
    single_primary,
    top_k,
)
from strata.storage.geo.routing import (
    LayeredRouter,
    LocaliseResult,
    NearestRouter,
    RandomRouter,
    Router,
    localise,
    write_plan,
)
from strata.storage.geo.topology import Prices, Topology, table1, uniform
from strata.storage.geo.twin import TwinResult, simulate
from strata.storage.geo.workload import (
    GeoWorkload,
    GeoWorkloadConfig,
    Requests,
    synthetic_workload,
)

__all__ = [
    "Cluster",
    "CostBreakdown",
    "CostConfig",
    "GeoError",
    "GeoPlaceConfig",
    "GeoWorkload",
    "GeoWorkloadConfig",
    "HeatConfig",
    "HeatResult",
    "ItemSpace",
    "LayerTree",
    "LayeredRouter",
    "LocaliseResult",
    "NearestRouter",
    "Placement",
    "Prices",
    "RandomRouter",
    "Requests",
    "Router",
    "Topology",
    "TwinResult",
    "cross_region_pairs",
    "diffuse",
    "full_replication",
    "geolayer_place",
    "hash_layout",
    "home_only",
    "localise",
    "random_k",
    "simulate",
    "single_primary",
    "synthetic_workload",
    "table1",
    "top_k",
    "uniform",
    "write_plan",
]
