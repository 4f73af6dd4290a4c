"""``ZmqMesh``: one rank per process, rounds of typed frames over pyzmq.

Every rank binds one ROUTER socket (its inbox, a free TCP port on ``host``) and
connects one DEALER per peer to that peer's inbox, its identity naming the
sender's rank. ZeroMQ keeps order per socket pair only, so every message carries
its round's :class:`Tag` in the frame header (:mod:`strata.engine.net.frames`: a
small binary header, then raw numpy buffers; never pickle), and a rank ends its
messages to each peer in each round with an END marker whose meta array says how
many DATA messages came before it (:mod:`.wire`). A receiver keeps messages that
arrive for a later round (a peer can be one round ahead) and uses them when it
gets there; a message for an earlier round is a protocol error.

Sends never wait behind receives: a round queues its messages without blocking
and one ``zmq.Poller`` serves the inbox (readable) and every outbox still holding
messages (writable) until all are sent and every peer's marker has come, so two
ranks sending each other more than the queues hold cannot deadlock (tdorch.md
pitfall 4). Each round has a deadline (``timeout_s``): a dead or stuck peer is a
:class:`MeshError` naming the peers that did not finish, never a hang.

Sends copy the arrays into zmq's messages once (a memcpy: ~0.1 ms per MiB), so
the caller may reuse them as soon as ``exchange`` returns. pyzmq's zero-copy
sends were measured and dropped: each sent buffer's release goes through a
collector thread that competes with the rank's thread for the GIL, and 1 MiB
rounds took 15-50 ms instead of ~1 ms (P=2, loopback). Received arrays are views
of the received frames, no copy (read-only; copy to write).

Endpoints are exchanged through a store (:meth:`ZmqMesh.from_store`: any object
with ``set(key, value)`` and a blocking ``get(key)``, such as torch's
``TCPStore``) or through a gang (:meth:`ZmqMesh.from_gang`: an
``all_gather_object`` over the gang's process group).

Examples:
    >>> import numpy as np
    >>> mesh = ZmqMesh(0, 1, lambda endpoint: [endpoint])  # a mesh of one
    >>> mesh.exchange([[np.arange(3)]], Tag(0, 0))[0][0].tolist()
    [0, 1, 2]
    >>> mesh.close()
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import zmq

from strata.engine.errors import format_where
from strata.engine.mesh.base import MeshError, MeshStats, Tag
from strata.engine.mesh.wire import (
    CHUNK,
    ExchangeCollectives,
    check_outgoing,
    check_tag,
    chunks,
)
from strata.engine.net.frames import FrameError, FrameLimits, Kind, decode, encode

if TYPE_CHECKING:
    from strata.engine.gang import GangContext

#: Default deadline of one round, in seconds.
DEFAULT_TIMEOUT_S = 300.0
_LIMITS = FrameLimits(max_arrays=CHUNK, max_ndim=32, max_bytes=1 << 62)
_HWM = 1000  # messages queued per socket before a send waits (in the poller)

#: Publishes this rank's endpoint; returns every rank's, in rank order.
Share = Callable[[str], Sequence[str]]


class ZmqMesh(ExchangeCollectives):
    """One rank's end of a mesh over pyzmq (see the module docstring).

    Args:
        rank: This rank, ``0 <= rank < size``.
        size: Number of ranks.
        share: Publishes this rank's endpoint and returns every rank's in rank
            order (a collective: :meth:`from_store` and :meth:`from_gang` build it).
        host: Address to bind the inbox on (peers connect to it).
        timeout_s: Deadline of one round.

    Attributes:
        endpoint: This rank's inbox.
        early_kept: Messages that arrived before their round and were kept.
    """

    def __init__(
        self,
        rank: int,
        size: int,
        share: Share,
        *,
        host: str = "127.0.0.1",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if not 0 <= rank < size:
            raise ValueError(
                format_where("rank", "ZmqMesh", f"0 <= rank < {size}", str(rank))
            )
        self._rank = rank
        self._size = size
        self._timeout_s = timeout_s
        self._stats = MeshStats()
        self._last: Tag | None = None
        # Messages that came before their round: tag -> [(peer, message)].
        self._early: dict[Tag, list[tuple[int, Any]]] = {}
        self.early_kept = 0  # how many messages were kept for a later round
        self._closed = False
        self._failed = False  # a round failed: close without waiting for peers
        self._context = zmq.Context(io_threads=1)
        self._inbox: Any = self._context.socket(zmq.ROUTER)
        self._outboxes: dict[int, Any] = {}
        try:
            self._inbox.setsockopt(zmq.RCVHWM, _HWM)
            self._inbox.setsockopt(zmq.LINGER, 0)
            self._inbox.bind(f"tcp://{host}:*")
            self.endpoint: str = self._inbox.getsockopt_string(zmq.LAST_ENDPOINT)
            endpoints = list(share(self.endpoint))
            if len(endpoints) != size:
                raise ValueError(
                    format_where(
                        "endpoints",
                        f"ZmqMesh rank {rank}",
                        f"one per rank ({size})",
                        str(len(endpoints)),
                    )
                )
            identity = rank.to_bytes(4, "little")
            for peer, endpoint in enumerate(endpoints):
                if peer == rank:
                    continue
                outbox = self._context.socket(zmq.DEALER)
                outbox.setsockopt(zmq.IDENTITY, identity)
                outbox.setsockopt(zmq.SNDHWM, _HWM)
                # Closing flushes what peers have not read yet, up to the deadline.
                outbox.setsockopt(zmq.LINGER, int(timeout_s * 1000))
                outbox.connect(endpoint)
                self._outboxes[peer] = outbox
        except BaseException:
            self._drop()
            raise
        self._poller = zmq.Poller()
        self._poller.register(self._inbox, zmq.POLLIN)
        self._polled: set[int] = set()  # outboxes registered for POLLOUT

    @classmethod
    def from_store(
        cls,
        store: Any,
        rank: int,
        size: int,
        *,
        prefix: str = "strata/mesh",
        host: str = "127.0.0.1",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> ZmqMesh:
        """Build rank ``rank``'s end, exchanging endpoints through ``store``.

        Args:
            store: ``set(key, value)`` and a ``get(key)`` that waits for the key
                (torch's ``TCPStore``: its own timeout applies).
            rank: This rank.
            size: Number of ranks.
            prefix: Key prefix, unique per mesh within the store.
            host: Address to bind (and to give peers).
            timeout_s: Deadline of one round.
        """

        def share(endpoint: str) -> list[str]:
            store.set(f"{prefix}/{rank}", endpoint)
            return [_text(store.get(f"{prefix}/{peer}")) for peer in range(size)]

        return cls(rank, size, share, host=host, timeout_s=timeout_s)

    @classmethod
    def from_gang(
        cls,
        ctx: GangContext,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        host: str | None = None,
    ) -> ZmqMesh:
        """Build this gang rank's end: endpoints gathered over the gang's group.

        Every rank of the gang must call it (it is a collective). The inbox binds
        on ``host``: by default the loopback address for a gang on one machine,
        and the address this node reaches the job store from for a gang across
        nodes.
        """
        if host is None:
            host = _gang_host()
        return cls(
            ctx.rank,
            ctx.world_size,
            ctx.all_gather_object,
            host=host,
            timeout_s=timeout_s,
        )

    @property
    def rank(self) -> int:
        """This rank."""
        return self._rank

    @property
    def size(self) -> int:
        """How many ranks the mesh has."""
        return self._size

    @property
    def stats(self) -> MeshStats:
        """This rank's traffic so far."""
        return self._stats

    def exchange(
        self, outgoing: Sequence[Sequence[np.ndarray]], tag: Tag
    ) -> list[list[np.ndarray]]:
        """Send ``outgoing[p]`` to every rank ``p``; return ``incoming[p]`` by rank.

        Raises:
            MeshError: A peer did not finish the round by the deadline, or sent
                a malformed or out-of-order message.
        """
        tag = check_tag(tag, self._last, self._rank)
        check_outgoing(outgoing, self._size, self._rank, tag)
        if self._closed:
            raise self._error(tag, "an open mesh end", "this end was closed")
        self._last = tag
        try:
            return _Round(self, outgoing, tag).run()
        except BaseException:
            self._failed = True
            raise

    def close(self, linger_s: float | None = None) -> None:
        """Flush what peers have not read yet, then close (idempotent).

        Args:
            linger_s: How long to wait for peers to take queued messages: by
                default the round deadline, and 0 after a failed round (a dead
                peer never takes them).
        """
        if not self._closed:
            self._closed = True
            if linger_s is None and self._failed:
                linger_s = 0.0
            self._drop(linger_s)

    def _drop(self, linger_s: float | None = 0.0) -> None:
        self._inbox.close(linger=0)
        linger_ms = None if linger_s is None else int(linger_s * 1000)
        for outbox in self._outboxes.values():
            outbox.close(linger=linger_ms)
        self._context.term()

    def _error(self, tag: Tag, expected: str, got: str, hint: str = "") -> MeshError:
        where = f"ZmqMesh rank {self._rank} of {self._size}"
        return MeshError(
            format_where(f"round {tuple(tag)}", where, expected, got, hint or None)
        )

    def __enter__(self) -> ZmqMesh:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(None if exc[0] is None else 0.0)

    def __repr__(self) -> str:
        return (
            f"ZmqMesh(rank={self._rank}, size={self._size}, endpoint={self.endpoint!r})"
        )


class _Round:
    """One exchange: queue the messages, then serve sends and receives until done."""

    def __init__(
        self, mesh: ZmqMesh, outgoing: Sequence[Sequence[np.ndarray]], tag: Tag
    ) -> None:
        self.mesh = mesh
        self.tag = tag
        me = mesh.rank
        self.incoming: list[list[np.ndarray]] = [[] for _ in range(mesh.size)]
        self.incoming[me] = [_read_only(a) for a in outgoing[me]]
        self.counted = [0] * mesh.size  # DATA messages received, by peer
        self.waiting = set(mesh._outboxes)  # peers whose marker has not come
        self.pending: dict[int, list[list[Any]]] = {}
        stats = mesh.stats
        for peer in mesh._outboxes:
            arrays = outgoing[peer]
            groups, start = chunks(arrays)
            meta = np.array([len(groups)], np.uint64)
            messages = [encode(Kind.DATA, tag, group, _LIMITS) for group in groups]
            messages.append(encode(Kind.END, tag, [meta, *arrays[start:]], _LIMITS))
            nbytes = sum(_nbytes(frame) for frames in messages for frame in frames)
            stats.frames_sent += len(messages)
            stats.bytes_sent += nbytes
            stats.sent_to[peer] = stats.sent_to.get(peer, 0) + nbytes
            self.pending[peer] = messages

    def run(self) -> list[list[np.ndarray]]:
        mesh, stats = self.mesh, self.mesh.stats
        deadline = time.monotonic() + mesh._timeout_s
        for peer, message in mesh._early.pop(self.tag, []):
            self._take(peer, message)
        self._send()
        while self.waiting or self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._late()
            start = time.perf_counter()  # waiting for peers: the poll only
            events = dict(mesh._poller.poll(max(1, int(left * 1000))))
            stats.wait_s += time.perf_counter() - start
            if mesh._inbox in events:
                self._receive()
            if self.pending:
                self._send()
        stats.rounds += 1
        return self.incoming

    def _send(self) -> None:
        """Queue what the outboxes take without waiting; poll the rest."""
        mesh = self.mesh
        for peer in list(self.pending):
            outbox = mesh._outboxes[peer]
            queue = self.pending[peer]
            while queue:
                try:
                    # Copied into zmq's messages: see the module docstring.
                    outbox.send_multipart(queue[0], flags=zmq.NOBLOCK, copy=True)
                except zmq.Again:
                    break
                queue.pop(0)
            if queue and peer not in mesh._polled:
                mesh._poller.register(outbox, zmq.POLLOUT)
                mesh._polled.add(peer)
            elif not queue:
                del self.pending[peer]
                if peer in mesh._polled:
                    mesh._poller.unregister(outbox)
                    mesh._polled.discard(peer)

    def _receive(self) -> None:
        """Read every message the inbox holds now."""
        mesh = self.mesh
        while True:
            try:
                frames = mesh._inbox.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            peer = int.from_bytes(frames[0].bytes, "little")
            try:
                message = decode(frames[1:], _LIMITS)
            except FrameError as exc:
                raise self._bad(peer, f"a malformed message ({exc})") from exc
            mesh.stats.frames_received += 1
            mesh.stats.bytes_received += message.nbytes
            got = Tag(*message.tag)
            if got == self.tag:
                self._take(peer, message)
            elif got > self.tag:
                mesh._early.setdefault(got, []).append((peer, message))
                mesh.early_kept += 1
            else:
                raise self._bad(peer, f"a message for the past round {tuple(got)}")

    def _take(self, peer: int, message: Any) -> None:
        if peer not in self.waiting:
            raise self._bad(peer, "a message after its end-of-round marker")
        arrays = message.arrays
        if message.kind is Kind.DATA:
            self.counted[peer] += 1
            self.incoming[peer].extend(_read_only(a) for a in arrays)
            return
        if not arrays or arrays[0].dtype != np.uint64 or arrays[0].shape != (1,):
            raise self._bad(peer, "an end-of-round marker without its count")
        if int(arrays[0][0]) != self.counted[peer]:
            raise self._bad(
                peer,
                f"a marker counting {int(arrays[0][0])} messages after "
                f"{self.counted[peer]} arrived",
            )
        self.incoming[peer].extend(_read_only(a) for a in arrays[1:])
        self.waiting.discard(peer)

    def _late(self) -> MeshError:
        mesh = self.mesh
        missing = sorted(self.waiting)
        unsent = sorted(self.pending)
        got = f"no end-of-round marker from rank(s) {missing}" if missing else ""
        if unsent:
            got += ("; " if got else "") + f"messages to rank(s) {unsent} unsent"
        return mesh._error(
            self.tag,
            f"every peer to finish the round within {mesh._timeout_s:g} s",
            got,
            "the named ranks died, are stuck, or are in another round; "
            "their own errors say which",
        )

    def _bad(self, peer: int, what: str) -> MeshError:
        return self.mesh._error(self.tag, f"rank {peer} to follow the protocol", what)


def _nbytes(frame: Any) -> int:
    return memoryview(frame).nbytes


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _gang_host() -> str:
    """The address peers reach this process at: loopback, or this node's."""
    from strata.engine.gang.cluster import current

    group = current()
    if group is None or not group.spans:
        return "127.0.0.1"
    # The interface that routes to the job store is the one other nodes reach.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((group.master_addr, group.master_port))
        address: str = probe.getsockname()[0]
    return address
