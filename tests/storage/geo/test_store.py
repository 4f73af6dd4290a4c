"""GeoStore against the in-memory tables: reads, writes, latency bound, failures."""

from __future__ import annotations

import contextlib
import pickle
import time
from collections.abc import Callable, Iterator
from functools import partial

import numpy as np
import pytest

from strata.storage.errors import FeatureError
from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.routing import NearestRouter, RandomRouter
from strata.storage.geo.server import RegionCluster
from strata.storage.geo.store import (
    GeoReadError,
    GeoStore,
    GeoStoreSpec,
    GeoWriteError,
)
from strata.storage.geo.topology import Topology, uniform

pytestmark = pytest.mark.multiprocess

V, E, R = 40, 20, 3
RNG = np.random.default_rng(7)
X = RNG.standard_normal((V, 4)).astype(np.float32)
W = RNG.integers(0, 100, size=(E, 2)).astype(np.int64)
HOME = (np.arange(V + E) % R).astype(np.int8)
SPACE = ItemSpace(V, E, np.full(V + E, 32, dtype=np.int32), HOME)
TABLES = {("node", "x"): X, ("edge", "w"): W}


def _placement(kind: str) -> Placement:
    placement = Placement.home_only(SPACE)
    if kind == "full":
        for r in range(R):
            placement.add(r, np.arange(V + E))
    elif kind == "mixed":  # even items get a second copy in the next region
        even = np.arange(0, V + E, 2)
        placement.add(1, even[HOME[even] == 0])
        placement.add(2, even[HOME[even] == 1])
        placement.add(0, even[HOME[even] == 2])
    return placement


class Forced:
    """Serve every item from one region (to read a given holder's copy)."""

    def __init__(self, region: int) -> None:
        self.region = region

    def plan(self, origin: int, items: np.ndarray) -> dict[int, np.ndarray]:
        return {self.region: np.sort(items)}


def _topo() -> Topology:
    rtt = np.array([[1.0, 100.0, 60.0], [100.0, 1.0, 80.0], [60.0, 80.0, 1.0]])
    bw = np.array([[1e4, 100.0, 100.0], [100.0, 1e4, 100.0], [100.0, 100.0, 1e4]])
    return Topology(("A", "B", "C"), rtt, bw)


@pytest.fixture(scope="module")
def home() -> Iterator[RegionCluster]:
    """A home-only cluster on _topo() that no test writes to."""
    with RegionCluster.start(_topo(), _placement("home"), SPACE, TABLES, 0.05) as c:
        yield c


@pytest.mark.parametrize("kind", ["home", "full", "mixed"])
def test_reads_return_exactly_the_stored_rows(kind: str, home: RegionCluster) -> None:
    placement = _placement(kind)
    topo = _topo()
    with contextlib.ExitStack() as stack:
        cluster = (
            home
            if kind == "home"
            else stack.enter_context(
                RegionCluster.start(topo, placement, SPACE, TABLES, 0.02)
            )
        )
        for origin in range(R):
            router = NearestRouter(placement, topo)
            with GeoStore(cluster, origin, router) as store:
                ids = RNG.integers(0, V, size=25)  # duplicates on purpose
                np.testing.assert_array_equal(store.get(("node", "x"), ids), X[ids])
                edges = RNG.integers(0, E, size=9)
                np.testing.assert_array_equal(store.get(("edge", "w"), edges), W[edges])
                np.testing.assert_array_equal(store.get(("node", "x")), X)
                regions = store.stats.reads[0].regions
                if kind == "full":
                    assert regions == (origin,)  # everything is local
                elif kind == "home":
                    assert set(regions) == set(HOME[np.unique(ids)].tolist())
            with GeoStore(cluster, origin, RandomRouter(placement, seed=3)) as store:
                ids = np.arange(V)
                np.testing.assert_array_equal(store.get(("node", "x"), ids), X)


def test_small_read_latency_is_at_least_the_scaled_rtt(home: RegionCluster) -> None:
    topo = _topo()
    placement = _placement("home")
    with GeoStore(home, 0, NearestRouter(placement, topo)) as store:
        for _ in range(3):
            store.get(("node", "x"), np.array([1]))  # item 1 lives in B
        summary = store.stats.summary()
    stats = store.stats.reads
    assert all(s.regions == (1,) and s.items == 1 for s in stats)
    # A loose lower bound only: RTT(A, B) = 100 ms unscaled (no upper bound here).
    assert min(s.latency_ms for s in stats) >= 100.0 * 0.95
    assert summary.reads.count == 3
    assert summary.reads.p50_ms >= 95.0
    assert summary.items_by_region == (0, 3, 0)


def test_read_after_write_sees_the_write_on_every_holder() -> None:
    topo = uniform(R, 20.0, 1000.0)
    placement = _placement("mixed")
    with RegionCluster.start(topo, placement, SPACE, TABLES, 0.02) as cluster:
        with GeoStore(cluster, 2, NearestRouter(placement, topo)) as store:
            ids = np.array([0, 1, 2, 3, 4, 5])
            new = np.full((6, 4), 9.5, dtype=np.float32)
            ack = store.write(("node", "x"), ids, new)
            assert set(ack.regions) == {0, 1, 2}
            assert store.stats.summary().writes.count == 1
            store.put(("edge", "w"), W + 1)  # put = write every row
        for item in ids:
            for region in np.flatnonzero((placement.holders[item] >> np.arange(R)) & 1):
                with GeoStore(cluster, 0, Forced(int(region))) as one:
                    got = one.get(("node", "x"), np.array([item]))
                    np.testing.assert_array_equal(got, new[:1])
        with GeoStore(cluster, 1, NearestRouter(placement, topo)) as store:
            np.testing.assert_array_equal(store.get(("edge", "w")), W + 1)


def _read_into(
    got: list[np.ndarray], store: GeoStore, key: tuple[str, str], ids: np.ndarray
) -> None:
    got.append(store.get(key, ids).numpy())


def _attempt(call: Callable[[], object]) -> Exception | None:
    try:
        call()
    except (GeoReadError, GeoWriteError) as error:
        return error
    return None


def test_kill_region_loses_no_acknowledged_write_and_never_hangs() -> None:
    topo = uniform(R, 20.0, 1000.0)
    placement = _placement("mixed")
    key = ("node", "x")
    acked = X.copy()
    maybe: dict[int, list[float]] = {}  # values of failed (unacknowledged) writes
    failed: list[tuple[np.ndarray, np.ndarray]] = []
    deadline, kill_at, steps = 0.4, 5, 10
    with RegionCluster.start(topo, placement, SPACE, TABLES, 0.02) as cluster:
        router = NearestRouter(placement, topo)
        with GeoStore(cluster, 0, router, deadline_s=deadline, attempt_s=0.1) as store:
            rng = np.random.default_rng(1)
            for step in range(steps):
                if step == kill_at:
                    cluster.kill(1)
                ids = np.unique(rng.integers(0, V, size=4))
                rows = np.full((ids.size, 4), float(step), dtype=np.float32)
                start = time.perf_counter()
                error = _attempt(partial(store.write, key, ids, rows))
                assert time.perf_counter() - start < deadline + 0.5
                if error is None:
                    acked[ids] = rows
                    assert step < kill_at or not (placement.holders[ids] & 2).any()
                else:
                    assert isinstance(error, GeoWriteError)
                    assert step >= kill_at
                    assert "1 (R1)" in str(error)
                    assert "NOT acknowledged" in str(error)
                    failed.append((ids, rows))
                    for i in ids:
                        maybe.setdefault(int(i), []).append(float(step))
                reads = np.unique(rng.integers(0, V, size=6))
                start = time.perf_counter()
                got: list[np.ndarray] = []
                error = _attempt(partial(_read_into, got, store, key, reads))
                assert time.perf_counter() - start < deadline + 0.5
                if error is None:
                    for i, row in zip(reads, got[0], strict=True):
                        # The acknowledged value, or one a failed write left on
                        # a live holder (no two-phase commit, see GeoStore).
                        assert (row == acked[i]).all() or row[0] in maybe.get(i, [])
                else:
                    # Only items whose single holder is region 1 may fail.
                    assert isinstance(error, GeoReadError)
                    assert step >= kill_at
                    assert "1 (R1)" in str(error)
                    assert f"deadline of {deadline} s" in str(error)
                    assert (placement.holders[reads] == 2).any()
            assert failed
            assert store.stats.summary().failovers > 0
        cluster.restart(1)
        with GeoStore(cluster, 0, router, deadline_s=deadline) as store:
            for ids, rows in failed:  # the caller retries until acknowledged
                store.write(key, ids, rows)
                acked[ids] = rows
        # Every acknowledged write is on every holder, the restarted one included.
        for region in range(R):
            held = np.flatnonzero(placement.holders[:V] & (1 << region))
            with GeoStore(cluster, region, Forced(region)) as one:
                np.testing.assert_array_equal(one.get(key, held).numpy(), acked[held])


def test_bad_input_gets_clear_errors(home: RegionCluster) -> None:
    topo = _topo()
    placement = _placement("home")
    cluster = home
    with pytest.raises(GeoError, match=r"origin in GeoStore: expected a region 0\.\.2"):
        GeoStore(cluster, 5, NearestRouter(placement, topo))
    with GeoStore(cluster, 0, NearestRouter(placement, topo)) as store:
        with pytest.raises(FeatureError, match="node/x"):
            store.get(("node", "x"), np.array([V]))
        with pytest.raises(FeatureError, match="key"):
            store.get(("node", "y"), np.array([0]))
        with pytest.raises(GeoError, match="float32 rows of shape"):
            store.write(("node", "x"), [0], np.zeros((1, 4), dtype=np.float64))
        with pytest.raises(GeoError, match="distinct ids"):
            store.write(("node", "x"), [0, 0], np.zeros((2, 4), dtype=np.float32))
        with pytest.raises(GeoError, match="fixed when the cluster starts"):
            store.put(("node", "z"), np.zeros((V, 1), dtype=np.float32))
    # A router that sends items to a region that does not hold them.
    with (
        GeoStore(cluster, 0, Forced(1)) as wrong,
        pytest.raises(GeoReadError, match=r"region 1 \(B\).*not held.*item 0"),
    ):
        wrong.get(("node", "x"), np.array([0]))
    spec = GeoStoreSpec(cluster.info, 1, NearestRouter(placement, topo))
    with pickle.loads(pickle.dumps(spec)).open() as store:
        np.testing.assert_array_equal(store.get(("node", "x"), [3]), X[[3]])
