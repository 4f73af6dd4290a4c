"""The partitioned feature store over pyzmq: rows, schema and counters.

Oracle: the full numpy arrays. Servers run as processes (FeatureServerGroup) or,
where a test needs no process, as threads (FeatureServer).
"""

import doctest
import os
import threading
import time

import numpy as np
import pytest
import torch

import strata.storage.features.network
import strata.storage.features.remote
import strata.storage.features.server
import strata.storage.features.wire
from strata.storage import FeatureError
from strata.storage.features import (
    FeatureServer,
    FeatureServerGroup,
    Key,
    NetworkModel,
    RemoteFeatureStore,
    Traffic,
)
from strata.storage.features.traffic import InProcessOwners, payload_bytes

N, PARTS = 300, 3


def _tables(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.random((N, 8)).astype(np.float32),
        "y": rng.integers(0, 10**12, N).astype(np.int64),
        "z": rng.random((N, 2, 3)),
        "mask": rng.random(N) < 0.5,
    }


TABLES = _tables()
OWNER = np.random.default_rng(1).integers(0, PARTS, N)


def _served(group):
    return sum((group.served(p) for p in range(group.num_parts)), Traffic())


@pytest.fixture(scope="module")
def group():
    with FeatureServerGroup(TABLES, OWNER, name="unit") as g:
        yield g


@pytest.mark.parametrize(
    "module",
    [
        strata.storage.features.wire,
        strata.storage.features.network,
        strata.storage.features.server,
        strata.storage.features.remote,
    ],
)
def test_docstring_examples(module):
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    assert doctest.testmod(module, optionflags=flags).failed == 0


@pytest.mark.multiprocess
@pytest.mark.parametrize("local", [False, True])
def test_get_equals_the_arrays(group, local):
    kwargs = {}
    if local:
        kwargs = {"local_part": 0, "local_tables": group.attach(0)}
    rng = np.random.default_rng(2)
    with RemoteFeatureStore(
        group.endpoints, OWNER, names=group.names, **kwargs
    ) as store:
        for attr, table in TABLES.items():
            for ids in (
                rng.integers(0, N, 57),  # duplicates included
                np.array([5, 5, 5]),
                np.array([], dtype=np.int64),
                np.arange(N),
            ):
                got = store.get(Key("node", attr), torch.as_tensor(ids))
                np.testing.assert_array_equal(got.numpy(), table[ids])
        everything = store.get(("node", "z"))
        np.testing.assert_array_equal(everything.numpy(), TABLES["z"])
        if local:
            assert store.local_rows > 0
        else:
            assert store.local_rows == 0


@pytest.mark.multiprocess
def test_schema_and_row_bytes(group):
    with RemoteFeatureStore(group.endpoints, OWNER) as store:
        schema = store.schema()
        assert set(schema) == {Key("node", a) for a in TABLES}
        for attr, table in TABLES.items():
            assert schema[Key("node", attr)].shape == table.shape
            assert schema[Key("node", attr)].dtype == torch.from_numpy(table).dtype
            assert store.row_bytes(attr) == table[0].nbytes
        with pytest.raises(FeatureError, match="read-only remote"):
            store.put(("node", "x"), TABLES["x"])
        with pytest.raises(FeatureError, match="node/w"):
            store.get(("node", "w"), [0])


@pytest.mark.multiprocess
def test_fetch_counts_like_the_servers_and_the_in_process_owners(group):
    rng = np.random.default_rng(3)
    owners = InProcessOwners(TABLES, OWNER)
    before = _served(group)
    with RemoteFeatureStore(group.endpoints, OWNER) as store:
        for attr in ("x", "z", "y"):
            ids = {
                p: rng.choice(np.flatnonzero(np.equal(OWNER, p)), 40)
                for p in range(PARTS)
            }
            ids[2] = ids[2][:0]  # an owner with nothing to fetch sends nothing
            rows = store.fetch(attr, ids)
            expected = owners.fetch(attr, ids)
            for p in range(PARTS):
                np.testing.assert_array_equal(rows[p], TABLES[attr][ids[p]])
                np.testing.assert_array_equal(rows[p], expected[p])
        assert store.traffic == owners.traffic
        assert store.traffic.requests == 6
        assert _served(group) - before == store.traffic


@pytest.mark.multiprocess
def test_requests_split_into_frames(group):
    before = _served(group)
    ids = {p: np.flatnonzero(np.equal(OWNER, p)) for p in range(PARTS)}
    with RemoteFeatureStore(group.endpoints, OWNER, max_frame_bytes=7 * 32) as store:
        rows = store.fetch("x", ids)  # 7 rows of 32 bytes per frame
        for p in range(PARTS):
            np.testing.assert_array_equal(rows[p], TABLES["x"][ids[p]])
        frames = sum(-(-ids[p].size // 7) for p in range(PARTS))
        assert store.traffic == Traffic(N, payload_bytes(N, 32), frames)
        got = store.get(("node", "y"), np.arange(N)[::-1])  # 8-byte ids bound it
        np.testing.assert_array_equal(got.numpy(), TABLES["y"][::-1])
    assert _served(group) - before == store.traffic


@pytest.mark.multiprocess
def test_the_servers_limits_split_requests_too():
    with (
        FeatureServerGroup(TABLES, OWNER, max_request_ids=10) as group,
        RemoteFeatureStore(group.endpoints, OWNER) as store,
    ):
        got = store.get(("node", "x"), np.arange(N))
        np.testing.assert_array_equal(got.numpy(), TABLES["x"])
        sizes = np.bincount(OWNER, minlength=PARTS)
        assert store.traffic.requests == sum(-(-int(s) // 10) for s in sizes)
        assert _served(group) == store.traffic
        assert sum(group.refused(p) for p in range(PARTS)) == 0


@pytest.mark.multiprocess
def test_ipc_transport_serves_and_cleans_up():
    with (
        FeatureServerGroup(TABLES, OWNER, transport="ipc") as group,
        RemoteFeatureStore.of_group(group, local_part=1) as store,
    ):
        assert all(e.startswith("ipc://") for e in group.endpoints.values())
        ids = np.random.default_rng(4).integers(0, N, 80)
        np.testing.assert_array_equal(
            store.get(("node", "z"), ids).numpy(), TABLES["z"][ids]
        )
        assert _served(group) == store.traffic
        folder = os.path.dirname(group.endpoints[0].removeprefix("ipc://"))
        assert os.path.isdir(folder)
    assert not os.path.exists(folder)
    with pytest.raises(FeatureError, match="transport"):
        FeatureServerGroup(TABLES, OWNER, transport="udp")


@pytest.mark.multiprocess
def test_attach_maps_the_partitions_rows(group):
    for part in range(PARTS):
        owned = group.owned_ids(part)
        np.testing.assert_array_equal(owned, np.flatnonzero(np.equal(OWNER, part)))
        for attr, rows in group.attach(part).items():
            np.testing.assert_array_equal(rows, TABLES[attr][owned])
            assert not rows.flags.writeable


@pytest.mark.multiprocess
def test_the_server_process_does_not_import_torch(group):
    assert group.imports_torch == dict.fromkeys(range(PARTS), False)
    for pid in group.pids.values():
        with open(f"/proc/{pid}/maps") as maps:
            assert "libtorch" not in maps.read()


def test_two_threads_fetch_at_once():
    x = TABLES["x"]
    servers = [
        FeatureServer(
            {"x": x[np.equal(OWNER, p)]}, np.flatnonzero(np.equal(OWNER, p)), p
        ).start()
        for p in range(PARTS)
    ]
    errors = []
    try:
        endpoints = {p: s.endpoint for p, s in enumerate(servers)}
        with RemoteFeatureStore(endpoints, OWNER) as store:

            def work(seed):
                rng = np.random.default_rng(seed)
                try:
                    for _ in range(20):
                        ids = rng.integers(0, N, 100)
                        got = store.get(("node", "x"), ids).numpy()
                        np.testing.assert_array_equal(got, x[ids])
                except Exception as error:  # reported below
                    errors.append(error)

            threads = [threading.Thread(target=work, args=(s,)) for s in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        assert not errors
        served = sum((s.served for s in servers), Traffic())
        assert served == store.traffic
    finally:
        for s in servers:
            s.close()


def test_replies_of_growing_sizes_reuse_and_replace_buffers():
    n = 1 << 16
    table = np.arange(n * 8, dtype=np.float32).reshape(n, 8)
    owner = np.zeros(n, dtype=np.int64)
    with (
        FeatureServer({"x": table}, np.arange(n), 0) as server,
        RemoteFeatureStore({0: server.endpoint}, owner) as store,
    ):
        rng = np.random.default_rng(5)
        for size in (100, 4096, 8192, 100, 16384, 32768, 65536, 3000, 65536):
            ids = rng.integers(0, n, size)
            np.testing.assert_array_equal(store.fetch("x", {0: ids})[0], table[ids])
        assert server.refused == 0


def test_network_model_overlaps_the_owners_latencies():
    latency = 0.2
    link = NetworkModel(latency_s=latency)
    x = TABLES["x"]
    servers = [
        FeatureServer(
            {"x": x[np.equal(OWNER, p)]},
            np.flatnonzero(np.equal(OWNER, p)),
            p,
            network=link,
        ).start()
        for p in range(PARTS)
    ]
    try:
        endpoints = {p: s.endpoint for p, s in enumerate(servers)}
        with RemoteFeatureStore(endpoints, OWNER) as store:
            store.schema()
            ids = {p: np.flatnonzero(np.equal(OWNER, p))[:5] for p in range(PARTS)}
            start = time.perf_counter()
            store.fetch("x", ids)
            elapsed = time.perf_counter() - start
        # Three owners served at once: about one latency, not three.
        assert latency <= elapsed < 2.5 * latency
    finally:
        for s in servers:
            s.close()


def test_network_model_delay_and_validation():
    assert NetworkModel(0.5, 100.0).delay(50) == pytest.approx(1.0)
    with pytest.raises(FeatureError, match="latency_s"):
        NetworkModel(-1.0)
    with pytest.raises(FeatureError, match="bandwidth_Bps"):
        NetworkModel(0.0, 0.0)


def test_constructor_checks():
    with pytest.raises(FeatureError, match=r"endpoint for every partition"):
        RemoteFeatureStore({0: "tcp://127.0.0.1:1"}, OWNER)
    with pytest.raises(FeatureError, match="rows"):
        RemoteFeatureStore(
            {1: "tcp://127.0.0.1:1", 2: "tcp://127.0.0.1:2"},
            OWNER,
            local_part=0,
            local_tables={"x": TABLES["x"]},
        )
    with pytest.raises(FeatureError, match="sorted distinct"):
        FeatureServer({"x": TABLES["x"][:2]}, np.array([3, 1]), 0)
    with pytest.raises(FeatureError, match="owner"):
        FeatureServerGroup(TABLES, OWNER.astype(np.float64))
