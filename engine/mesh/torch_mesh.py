"""``TorchMesh``: the mesh protocol over a gang's ``torch.distributed`` (gloo).

A round is two ``all_to_all_single`` collectives on a process group of the mesh's
own (so its deadline is the mesh's ``timeout_s``, and its traffic never mixes with
the caller's collectives): first every rank's byte count for each peer (int64),
then the bytes. gloo supports ``all_to_all_single`` on CPU tensors (with uneven
splits) but not the list form ``all_to_all``, hence one flat buffer per round.

What a rank sends a peer is the same messages :class:`ZmqMesh` would send
(:mod:`.wire`: DATA groups and the END marker with its count, encoded by
:mod:`strata.engine.net.frames`), laid end to end after a small index
(``uint64``: frame count, then each frame's length). The stats count those
messages exactly as the other meshes do; the index and the size collective are
transport overhead and not counted. Packing copies the arrays once into the send
buffer; received arrays are read-only views of the receive buffer.

Allreduce gathers every rank's value and folds it in rank order (numpy), so the
result is identical on every rank and to the other meshes (gloo's own allreduce
may not fold in rank order). A dead peer fails the collective after
``timeout_s`` (gloo's deadline); in a gang the supervisor usually names it first.

Example (needs a process group; see :func:`strata.engine.mesh.run_mesh`)::

    def fn(mesh: Mesh) -> float:
        return float(mesh.allreduce(np.ones(1), "sum", Tag(0, 0))[0])

    run_mesh(fn, 2, kind="torch")      # [2.0, 2.0]
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

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


class TorchMesh(ExchangeCollectives):
    """One rank's end of a mesh over ``torch.distributed`` (see the module).

    Every rank of the default process group must build it (a collective).

    Args:
        ctx: The gang rank (only for its name in errors); ``None`` outside a
            gang, with the default group already initialised.
        timeout_s: Deadline of one round (the mesh group's gloo timeout).
    """

    def __init__(
        self, ctx: GangContext | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        import torch.distributed as dist

        self._rank = dist.get_rank()
        self._size = dist.get_world_size()
        self._timeout_s = timeout_s
        self._group: Any = dist.new_group(
            backend="gloo", timeout=datetime.timedelta(seconds=timeout_s)
        )
        self._stats = MeshStats()
        self._last: Tag | None = None
        self._closed = False

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
        """This rank's traffic so far (the messages, as ZmqMesh counts them)."""
        return self._stats

    def exchange(
        self, outgoing: Sequence[Sequence[np.ndarray]], tag: Tag
    ) -> list[list[np.ndarray]]:
        """Send ``outgoing[p]`` to every rank ``p``; return ``incoming[p]`` by rank.

        Raises:
            MeshError: The collective failed (a peer died or timed out) or a
                peer's messages were for another round.
        """
        import torch
        import torch.distributed as dist

        tag = check_tag(tag, self._last, self._rank)
        check_outgoing(outgoing, self._size, self._rank, tag)
        if self._closed:
            raise self._error(tag, "an open mesh end", "this end was closed")
        self._last = tag
        me, stats = self._rank, self._stats
        parts: list[np.ndarray] = []
        sizes = np.zeros(self._size, np.int64)
        for peer in range(self._size):
            if peer == me:
                continue
            frames, nbytes, messages = _pack(outgoing[peer], tag)
            stats.frames_sent += messages
            stats.bytes_sent += nbytes
            stats.sent_to[peer] = stats.sent_to.get(peer, 0) + nbytes
            sizes[peer] = sum(f.nbytes for f in frames)
            parts.extend(frames)
        send = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        start = time.perf_counter()
        try:
            recv_sizes = torch.zeros(self._size, dtype=torch.int64)
            dist.all_to_all_single(
                recv_sizes, torch.from_numpy(sizes), group=self._group
            )
            splits = recv_sizes.tolist()
            recv = torch.empty(int(sum(splits)), dtype=torch.uint8)
            dist.all_to_all_single(
                recv,
                torch.from_numpy(send),
                output_split_sizes=splits,
                input_split_sizes=sizes.tolist(),
                group=self._group,
            )
        except RuntimeError as exc:
            raise self._error(
                tag,
                f"every rank in the collective within {self._timeout_s:g} s",
                f"{type(exc).__name__}: {exc}",
                "a peer died, is stuck, or is in another round",
            ) from exc
        finally:
            stats.wait_s += time.perf_counter() - start
        stats.rounds += 1
        data = recv.numpy()
        incoming: list[list[np.ndarray]] = []
        offset = 0
        for peer in range(self._size):
            if peer == me:
                incoming.append([_read_only(a) for a in outgoing[me]])
                continue
            chunk = data[offset : offset + splits[peer]]
            offset += splits[peer]
            incoming.append(self._unpack(chunk, peer, tag))
        return incoming

    def _unpack(self, chunk: np.ndarray, peer: int, tag: Tag) -> list[np.ndarray]:
        stats = self._stats
        count = int(chunk[:8].view(np.uint64)[0])
        lengths = chunk[8 : 8 * (count + 1)].view(np.uint64).tolist()
        frames = []
        offset = 8 * (count + 1)
        for length in lengths:
            frames.append(chunk[offset : offset + length])
            offset += length
        arrays: list[np.ndarray] = []
        index = 0
        data_messages = 0
        while index < len(frames):
            header = frames[index]
            n = int(header[6]) | int(header[7]) << 8  # the header's array count
            try:
                message = decode(frames[index : index + n + 1], _LIMITS)
            except FrameError as exc:
                raise self._error(tag, f"rank {peer} to send frames", str(exc)) from exc
            index += n + 1
            stats.frames_received += 1
            stats.bytes_received += message.nbytes
            if message.tag != tuple(tag):
                raise self._error(
                    tag,
                    f"rank {peer} in the same round",
                    f"its messages for round {message.tag}",
                    "every rank must make the same rounds",
                )
            if message.kind is Kind.DATA:
                data_messages += 1
                arrays.extend(message.arrays)
            else:
                if int(message.arrays[0][0]) != data_messages:
                    raise self._error(
                        tag, f"rank {peer}'s marker to count its messages", "a mismatch"
                    )
                arrays.extend(message.arrays[1:])
        return [_read_only(a) for a in arrays]

    def close(self) -> None:
        """Destroy the mesh's process group (idempotent; a collective)."""
        if not self._closed:
            import torch.distributed as dist

            self._closed = True
            if dist.is_initialized():
                dist.destroy_process_group(self._group)

    def _error(self, tag: Tag, expected: str, got: str, hint: str = "") -> MeshError:
        where = f"TorchMesh rank {self._rank} of {self._size}"
        return MeshError(
            format_where(f"round {tuple(tag)}", where, expected, got, hint or None)
        )

    def __repr__(self) -> str:
        return f"TorchMesh(rank={self._rank}, size={self._size})"


def _pack(arrays: Sequence[np.ndarray], tag: Tag) -> tuple[list[np.ndarray], int, int]:
    """``(buffers, message bytes, messages)``: one peer's messages, indexed."""
    groups, start = chunks(arrays)
    meta = np.array([len(groups)], np.uint64)
    messages = [encode(Kind.DATA, tag, group, _LIMITS) for group in groups]
    messages.append(encode(Kind.END, tag, [meta, *arrays[start:]], _LIMITS))
    frames = [_as_bytes(f) for m in messages for f in m]
    index = np.array([len(frames), *(f.nbytes for f in frames)], np.uint64)
    nbytes = sum(f.nbytes for f in frames)
    return [index.view(np.uint8), *frames], nbytes, len(messages)


def _as_bytes(frame: Any) -> np.ndarray:
    return np.frombuffer(frame, np.uint8) if len(memoryview(frame)) else _EMPTY


_EMPTY = np.zeros(0, np.uint8)


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view
