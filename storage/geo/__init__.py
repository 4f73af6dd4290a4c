"""GeoLayer: a geo-distributed, latency-layered graph store (spec systems/geolayer.md).

A plain library (numpy, numba, pyarrow, pyzmq and ``strata.storage`` only): regions
and links (:mod:`.topology`), items and holder bitmasks (:mod:`.items`), the layer
tree (:mod:`.layers`), routers (:mod:`.routing`), the cost model (:mod:`.cost`),
directed heat diffusion (:mod:`.heat`), placement and baselines (:mod:`.placement`),
the synthetic workload (:mod:`.workload`), the analytic twin (:mod:`.twin`) and the
WAN shim (:mod:`.wan`).
"""

from strata.storage.geo.cost import CostBreakdown, CostConfig
from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.layers import Cluster, LayerTree, cross_region_pairs
from strata.storage.geo.routing import (
    LayeredRouter,
    NearestRouter,
    RandomRouter,
    Router,
    write_plan,
)
from strata.storage.geo.topology import Prices, Topology, table1, uniform

__all__ = [
    "Cluster",
    "CostBreakdown",
    "CostConfig",
    "GeoError",
    "ItemSpace",
    "LayerTree",
    "LayeredRouter",
    "NearestRouter",
    "Placement",
    "Prices",
    "RandomRouter",
    "Router",
    "Topology",
    "cross_region_pairs",
    "table1",
    "uniform",
    "write_plan",
]
