"""One feature-server process per partition: :class:`FeatureServerGroup`.

The group puts each partition's rows in shared memory (so a trainer can read its
own partition's rows in place, :func:`attach_partition`) and starts one
:class:`~strata.storage.features.server.FeatureServer` process per partition. The
children import numpy and pyzmq only, never torch (they start in a fresh
interpreter that skips the package ``__init__`` files), exit when their parent
dies, and :meth:`FeatureServerGroup.close` removes every process and segment.
"""

from __future__ import annotations

import os
import secrets
import signal
import tempfile
from collections.abc import Mapping
from multiprocessing import shared_memory
from typing import Any, NoReturn

import numpy as np

from strata.storage._spawn import (
    ServerProcesses,
    await_ready,
    package_paths,
    serve_as_child,
    start_child,
    startup_error,
)
from strata.storage.errors import FeatureError
from strata.storage.features.network import NetworkModel
from strata.storage.features.server import FeatureServer, query_stats
from strata.storage.features.traffic import Traffic
from strata.storage.features.wire import (
    MAX_FRAME_BYTES,
    MAX_REQUEST_IDS,
    dtype_code,
)

__all__ = ["FeatureServerGroup", "attach_partition", "partition_here"]

# --------------------------------------------------------------- server processes
#: The module a feature server's child process runs (its ``_child_main``).
_MODULE = "strata.storage.features.server_group"


def attach_partition(
    layout: Mapping[str, Any],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Map one partition's shared segments read-only, in any process.

    Args:
        layout: :meth:`FeatureServerGroup.layout` of the partition (JSON-able).

    Returns:
        ``(owned_ids, tables)``; row ``i`` of each table is vertex ``owned_ids[i]``.
    """

    def mapped(segment: str, dtype: str, shape: list[int]) -> np.ndarray:
        if int(np.prod(shape)) == 0:
            return np.empty(shape, dtype=dtype)
        # /dev/shm is where Linux keeps POSIX shared memory: a plain file map
        # leaves the segment's lifetime to the group (no resource tracker here).
        return np.memmap(
            f"/dev/shm/{segment}", dtype=dtype, mode="r", shape=tuple(shape)
        )

    ids = layout["ids"]
    owned = mapped(ids["segment"], "int64", [ids["rows"]])
    tables = {
        t["attr"]: mapped(t["segment"], t["dtype"], t["shape"])
        for t in layout["tables"]
    }
    return owned, tables


def partition_here(layout: Mapping[str, Any]) -> bool:
    """Whether this machine holds the partition's segments (so it can attach)."""
    return os.path.exists(f"/dev/shm/{layout['ids']['segment']}")


def _child_main(spec: Mapping[str, Any]) -> None:
    """Entry of a server process: serve until stdin closes or the parent dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    parent = os.getppid()
    owned, tables = attach_partition(spec["layout"])
    latency, bandwidth = spec["network"] or (0.0, float("inf"))
    server = FeatureServer(
        tables,
        owned,
        spec["layout"]["partition"],
        endpoint=spec["endpoint"],
        name=spec["name"],
        network=NetworkModel(latency, bandwidth) if spec["network"] else None,
        max_request_ids=spec["limits"][0],
        max_frame_bytes=spec["limits"][1],
    )
    serve_as_child(server, server.bind(), parent)


class FeatureServerGroup(ServerProcesses):
    """One :class:`FeatureServer` process per partition, tables in shared memory.

    Args:
        tables: full arrays by attribute name (row ``v`` is vertex ``v``).
        owner: the partition of each vertex (ints ``>= 0``).
        network: a simulated link for every server.
        name: prefix of the servers' names (``<name>-p<part>``).
        startup_timeout_s: deadline for every server to report ready.
        num_parts: partitions (default ``owner.max() + 1``); one without rows
            still gets a (empty) server.
        max_request_ids: each server's limit on ids per request.
        max_frame_bytes: each server's limit on bytes per frame.
        transport: ``"tcp"`` (loopback, default) or ``"ipc"`` (Unix sockets in a
            private folder; about 25% faster for large replies on one machine).
        host: the address TCP servers bind and publish: ``127.0.0.1``, or this
            machine's address when clients run on other machines (a Ray gang);
            they then read even their own partition over the wire
            (:func:`attach_partition` maps this machine's ``/dev/shm`` only).

    Attributes:
        endpoints: ``{part: endpoint}``; ``pids``: ``{part: pid}``;
        names: ``{part: server name}`` (for ``RemoteFeatureStore(names=...)``);
        owner: the ``owner`` array; num_parts: the number of partitions.

    Raises:
        FeatureError: on bad input, or a server that fails to start in time (its
            stderr is quoted); nothing is left behind.
    """

    def __init__(
        self,
        tables: Mapping[str, np.ndarray],
        owner: np.ndarray,
        *,
        network: NetworkModel | None = None,
        name: str = "features",
        startup_timeout_s: float = 30.0,
        num_parts: int | None = None,
        max_request_ids: int = MAX_REQUEST_IDS,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        transport: str = "tcp",
        host: str = "127.0.0.1",
    ) -> None:
        where = f"FeatureServerGroup {name!r}"
        if transport not in ("tcp", "ipc"):
            raise FeatureError.build(
                "transport", where, "'tcp' or 'ipc'", repr(transport)
            )
        owner = np.asarray(owner)
        if (
            owner.ndim != 1
            or owner.dtype.kind not in "iu"
            or (owner.size and owner.min() < 0)
        ):
            raise FeatureError.build(
                "owner",
                where,
                "a 1-D array of partitions >= 0",
                f"{owner.dtype} {owner.shape}",
            )
        parts = (
            int(num_parts) if num_parts is not None else int(owner.max(initial=-1)) + 1
        )
        if owner.size and owner.max() >= parts:
            raise FeatureError.build(
                "owner", where, f"partitions < num_parts={parts}", str(int(owner.max()))
            )
        self.name = name
        self.owner = owner
        self.num_parts = parts
        self.names = {p: f"{name}-p{p}" for p in range(parts)}
        self.endpoints: dict[int, str] = {}
        self.pids: dict[int, int] = {}
        self.imports_torch: dict[int, bool] = {}
        super().__init__()
        try:
            self._layouts = self._share(tables, owner, where)
            self._start(
                network,
                (int(max_request_ids), int(max_frame_bytes)),
                startup_timeout_s,
                "ipc://" if transport == "ipc" else f"tcp://{host}:0",
            )
        except BaseException:
            self.close()
            raise

    def _share(
        self, tables: Mapping[str, np.ndarray], owner: np.ndarray, where: str
    ) -> list[dict[str, Any]]:
        arrays = {}
        for attr, table in tables.items():
            array = np.asarray(table)
            if array.ndim == 0 or array.shape[0] != owner.shape[0]:
                raise FeatureError.build(
                    f"table {attr!r}",
                    where,
                    f"{owner.shape[0]} rows",
                    f"shape {array.shape}",
                )
            dtype_code(array.dtype)
            arrays[attr] = array
        order = np.argsort(owner, kind="stable")
        bounds = np.concatenate(
            [[0], np.cumsum(np.bincount(owner, minlength=self.num_parts))]
        )
        token = f"sfs_{os.getpid()}_{secrets.token_hex(4)}"
        layouts = []
        for part in range(self.num_parts):
            ids = order[bounds[part] : bounds[part + 1]].astype(np.int64)
            layout: dict[str, Any] = {"partition": part, "tables": []}
            arange = np.arange(ids.size)
            layout["ids"] = {
                "segment": self._segment(f"{token}_{part}_ids", ids, arange),
                "rows": ids.size,
            }
            for i, (attr, array) in enumerate(sorted(arrays.items())):
                layout["tables"].append(
                    {
                        "attr": attr,
                        "segment": self._segment(f"{token}_{part}_{i}", array, ids),
                        "dtype": array.dtype.str,
                        "shape": [ids.size, *array.shape[1:]],
                    }
                )
            layouts.append(layout)
        return layouts

    def _segment(self, name: str, data: np.ndarray, rows: np.ndarray) -> str:
        """A new segment holding ``data[rows]`` (gathered in place, no temporary)."""
        shape = (rows.size, *data.shape[1:])
        nbytes = data.dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        segment = shared_memory.SharedMemory(
            name=name, create=True, size=max(1, nbytes)
        )
        self._state.segments.append(segment)
        view: np.ndarray = np.ndarray(shape, dtype=data.dtype, buffer=segment.buf)
        np.take(data, rows, axis=0, out=view)
        del view
        segment.close()  # children and attach() map the file; we only unlink it
        return name

    def _start(
        self,
        network: NetworkModel | None,
        limits: tuple[int, int],
        timeout_s: float,
        endpoint: str,
    ) -> None:
        """Start the servers; ``endpoint`` is ``ipc://`` or ``tcp://host:0``."""
        packages = package_paths()
        folder = ""
        if endpoint == "ipc://":
            folder = tempfile.mkdtemp(prefix="strata-features-")
            self._state.folders.append(folder)
        for part in range(self.num_parts):
            spec = {
                "packages": packages,
                "layout": self._layouts[part],
                "endpoint": f"ipc://{folder}/p{part}" if folder else endpoint,
                "name": self.names[part],
                "network": [network.latency_s, network.bandwidth_Bps]
                if network
                else None,
                "limits": list(limits),
            }
            log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by shutdown)
            self._state.logs[part] = log
            self._state.procs[part] = start_child(_MODULE, spec, log)
        ready = await_ready(self._state.procs, timeout_s, self._fail)
        for part, message in sorted(ready.items()):
            self.endpoints[part] = message["endpoint"]
            self.pids[part] = message["pid"]
            self.imports_torch[part] = message["torch"]

    def _fail(self, part: int, got: str) -> NoReturn:
        where = f"feature server {self.names[part]} (partition {part})"
        raise startup_error(FeatureError, where, got, self._state.logs[part])

    # ----------------------------------------------------------------- access
    def layout(self, part: int) -> dict[str, Any]:
        """Partition ``part``'s segments (JSON-able, for :func:`attach_partition`)."""
        return self._layouts[part]

    def attach(self, part: int) -> dict[str, np.ndarray]:
        """Partition ``part``'s tables, mapped read-only, in owned-id order."""
        return attach_partition(self._layouts[part])[1]

    def owned_ids(self, part: int) -> np.ndarray:
        """Sorted global ids partition ``part`` owns."""
        return attach_partition(self._layouts[part])[0]

    def served(self, part: int, timeout_s: float = 5.0) -> Traffic:
        """Server ``part``'s served counters, asked over the wire (STATS)."""
        return query_stats(self.endpoints[part], timeout_s)[0]

    def refused(self, part: int, timeout_s: float = 5.0) -> int:
        """How many requests server ``part`` refused (ERROR replies)."""
        return query_stats(self.endpoints[part], timeout_s)[1]

    def kill(self, part: int) -> None:
        """Kill server ``part`` (SIGKILL; for failure tests); its segments stay."""
        self._kill(part)

    def alive(self, part: int) -> bool:
        """Whether server ``part``'s process is running."""
        return self._alive(part)

    @property
    def segments(self) -> list[str]:
        """Names of the shared-memory segments this group created (under /dev/shm)."""
        return [s.name for s in self._state.segments]
