"""A GeoStore as a GNN job's feature store, and set-feature writes through a sink."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch

from strata.engine import Pipeline, execute
from strata.operators.io.datasets import community_dataset
from strata.operators.io.geo import (
    GeoFeatureSink,
    GeoFeatureTrainer,
    fit_with_geo,
    with_geo_features,
)
from strata.operators.trainers import (
    ModelConfig,
    SampledTrainer,
    SamplingConfig,
    TrainConfig,
)
from strata.operators.trainers.data import FEATURES, TrainingData, as_training_data
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.routing import NearestRouter
from strata.storage.geo.server import RegionCluster
from strata.storage.geo.store import GeoStore, GeoStoreSpec
from strata.storage.geo.topology import Topology, table1
from strata.storage.updates import feature_updates

pytestmark = pytest.mark.multiprocess

N = 240
# Three of Table I's regions (USE, USW, LON): fewer server processes to start.
_T1 = table1()
TOPO = Topology(_T1.regions[:3], _T1.rtt_ms[:3, :3], _T1.bw_mbps[:3, :3])


def _data() -> TrainingData:
    payload = community_dataset(N, 3, num_features=8, avg_degree=4.0, seed=0)
    return as_training_data(payload, "test")


@pytest.fixture(scope="module")
def geo() -> Iterator[tuple[TrainingData, Placement, RegionCluster]]:
    data = _data()
    x = data.features.get(FEATURES).numpy()
    home = (np.arange(N) % TOPO.num_regions).astype(np.int8)
    space = ItemSpace(N, 0, np.full(N, x[0].nbytes, dtype=np.int32), home)
    placement = Placement.home_only(space)
    placement.add(1, np.arange(0, N, 4))  # a mixed placement: some replicas
    with RegionCluster.start(TOPO, placement, space, {FEATURES: x}, 0.01) as c:
        yield data, placement, c


class Only:
    """Serve every item from one region (to read that holder's copy)."""

    def __init__(self, region: int) -> None:
        self.region = region

    def plan(self, origin: int, items: np.ndarray) -> dict[int, np.ndarray]:
        return {self.region: items}


def _trainer() -> SampledTrainer:
    config = TrainConfig(ModelConfig("sage", hidden=8), epochs=2, device="cpu", seed=3)
    return SampledTrainer(config, SamplingConfig(fanouts=(3, 3), batch_size=64))


def test_epoch_losses_identical_from_two_origins_and_in_memory(
    geo: tuple[TrainingData, Placement, RegionCluster],
) -> None:
    data, placement, cluster = geo
    router = NearestRouter(placement, TOPO)
    memory: list[float] = []
    _trainer().fit(data, lambda record: memory.append(record.loss))
    runs = {}
    for origin in (0, 2):  # USE and LON
        spec = GeoStoreSpec(cluster.info, origin, router)
        runs[origin] = fit_with_geo(_trainer(), data, spec)
    losses = [memory] + [[e.loss for e in r.epochs] for r in runs.values()]
    assert len(memory) == 2
    assert losses[0] == losses[1] == losses[2]  # exactly: the same rows
    for origin, run in runs.items():
        summary = run.geo
        assert summary.origin == origin
        assert summary.reads.count > 0
        assert summary.reads.mean_regions >= 1.0
        assert sum(summary.items_by_region) > 0
    # Each origin reads its own region's rows locally, the rest over the WAN.
    assert runs[0].geo.items_by_region[0] > 0
    assert runs[2].geo.items_by_region[2] > 0


def test_trainer_step_reports_geo_counters(
    geo: tuple[TrainingData, Placement, RegionCluster],
) -> None:
    _, placement, cluster = geo
    spec = GeoStoreSpec(cluster.info, 2, NearestRouter(placement, TOPO))
    p = Pipeline("geo-train")
    p.step("data", _data)
    p.step("train", GeoFeatureTrainer(_trainer(), spec), "data")
    report = execute(p, "local").report
    counters = report.steps["train"].counters
    assert counters["geo_LON_reads"] > 0
    assert counters["geo_LON_read_p99_ms"] >= counters["geo_LON_read_p50_ms"] > 0
    assert counters["epochs"] == 2
    assert sum(counters[f"geo_LON_from_{r}_items"] for r in TOPO.regions) > 0


def test_set_feature_sink_writes_every_holder(
    geo: tuple[TrainingData, Placement, RegionCluster],
) -> None:
    _, placement, cluster = geo
    spec = GeoStoreSpec(cluster.info, 1, NearestRouter(placement, TOPO))
    sink = GeoFeatureSink(spec)
    sink.open(None)
    nodes = np.array([0, 5, 8, 0])  # node 0 twice: the last row wins
    rows = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = list(sink.process(feature_updates(nodes, rows)))
    list(sink.finish())
    assert out[0]["rows"] == 3
    want = {0: rows[3], 5: rows[1], 8: rows[2]}
    for node, row in want.items():
        holders = np.flatnonzero((placement.holders[node] >> np.arange(3)) & 1)
        assert holders.size >= 1
        for region in holders:
            with GeoStore(cluster, 0, Only(int(region))) as store:
                got = store.get(FEATURES, np.array([node]))
                torch.testing.assert_close(got[0], torch.from_numpy(row))


def test_with_geo_features_checks_the_shape(
    geo: tuple[TrainingData, Placement, RegionCluster],
) -> None:
    _, placement, cluster = geo
    small = as_training_data(community_dataset(N, 3, num_features=4, seed=0), "t")
    with (
        GeoStore(cluster, 0, NearestRouter(placement, TOPO)) as store,
        pytest.raises(Exception, match="shape"),
    ):
        with_geo_features(small, store)
