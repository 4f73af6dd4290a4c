"""A8's exact programme on a very small instance: it lower-bounds every placement."""

from __future__ import annotations

import numpy as np
import pytest

from strata.storage.geo.layers import LayerTree
from strata.storage.geo.optimal import evaluate_holders, solve_optimal, tiny_instance
from strata.storage.geo.placement import geolayer_place
from strata.storage.geo.topology import table1
from strata.storage.geo.workload import GeoWorkloadConfig, synthetic_workload


def test_optimum_bounds_geolayer_home_and_full() -> None:
    topo = table1()
    cfg = GeoWorkloadConfig(
        num_vertices=300, history_ops=400, test_ops=10, max_items=32
    )
    w = synthetic_workload(topo, cfg, seed=0)
    inst = tiny_instance(w, topo, num_patterns=15)
    opt = solve_optimal(inst, time_limit=60)
    assert opt.status == 0  # proven optimal
    assert opt.lower_bound_usd == pytest.approx(opt.cost_usd, rel=1e-6)
    placed = geolayer_place(w.history, w.space, w.graph, LayerTree.build(topo), topo)
    geo = evaluate_holders(inst, placed.holders[inst.items])
    home = evaluate_holders(inst, inst.home_holders())
    full = evaluate_holders(inst, np.full(inst.items.size, 0b11111, np.uint32))
    for other in (geo, home, full):
        assert opt.cost_usd <= other.cost_usd * (1 + 1e-9)
    # Re-costing the optimum's own placement gives the optimum back.
    again = evaluate_holders(inst, opt.holders)
    assert again.cost_usd == pytest.approx(opt.cost_usd, rel=1e-6)
