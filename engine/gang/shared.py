"""Named tensors in one shared-memory segment: made before a gang, mapped by each rank.

Large inputs (a graph's arrays, a feature matrix) and buffers that workers write
into (a host store of activations) should not be pickled to every worker. A
:class:`SharedTensors` is created by the parent *before* the gang starts, holds
each array at an aligned offset of one file in ``/dev/shm`` (a RAM-backed tmpfs),
and pickles as a small handle: the segment's name and layout. Each worker maps the
segment on first access, so every rank sees the same memory, zero-copy and
writable; what a worker writes, the parent reads after the gang.

Lifetime:

* The creating process *owns* the segment: :meth:`close` (or leaving the ``with``
  block, or the owner object being garbage-collected) unlinks its name, so no
  later process can map it; memory is freed when the last mapping goes away.
  Mappings outlive ``close`` while tensors viewing them are alive (a tensor keeps
  its mapping), so ``close`` never invalidates a tensor.
* A worker that dies simply drops its mapping: nothing to clean up.
* If the owner itself is killed before ``close``, multiprocessing's resource
  tracker (a helper process that outlives it) unlinks the name when the process
  tree exits, with a "leaked shared_memory" warning.

Across machines (the network path): a rank on another node cannot map a file
in this node's ``/dev/shm``. A Ray gang (:mod:`strata.engine.gang.ray_gang`)
pickles the arguments of such a rank inside :func:`carried`, where a
``SharedTensors`` pickles *by value*: its bytes travel with the handle and the
rank gets a private, writable copy (``carried`` is then True). What the rank
writes comes back with its result: :func:`take_writes` lists the 1 MiB blocks
it changed, and the parent applies them with :func:`apply_writes`, byte by byte
against what it sent, so ranks writing disjoint rows of one buffer all land.
Ranks on other nodes do not see each other's writes *during* the run: a buffer
that ranks use to exchange data (HongTu's host store) needs them on one node.

CPU torch tensors passed directly to ``run_gang`` are shared too (torch moves
them to anonymous shared memory, one file descriptor per tensor, freed with the
last process using it); use this class for numpy arrays, for many tensors (a
worker can receive at most ~250 descriptors) and for buffers the workers fill.

Examples:
    >>> import numpy as np, pickle, torch
    >>> with SharedTensors.from_arrays({"x": np.arange(6.0).reshape(2, 3)}) as shared:
    ...     handle = pickle.loads(pickle.dumps(shared))   # what a worker receives
    ...     handle["x"][1, 2] = -1.0                      # writes the shared memory
    ...     shared["x"].tolist(), len(pickle.dumps(shared)) < 300
    ([[0.0, 1.0, 2.0], [3.0, 4.0, -1.0]], True)
    >>> out = SharedTensors.zeros({"h": ((4, 2), torch.bfloat16)})
    >>> out["h"].dtype, out["h"].shape, out.nbytes
    (torch.bfloat16, torch.Size([4, 2]), 16)
    >>> out.close()
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import mmap
import os
import secrets
import tempfile
import threading
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

#: Name prefix of every segment, so leftovers are easy to find (``ls /dev/shm``).
PREFIX = "strata-gang-"
_ALIGN = 64  # cache-line alignment of every array
_SHM_DIR = "/dev/shm"
_BLOCK = 1 << 20  # granularity of the writes a carried copy sends back


@dataclass(frozen=True, slots=True)
class _Slot:
    offset: int
    shape: tuple[int, ...]
    dtype: str  # torch dtype name, e.g. "float32"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class SharedTensors(Mapping[str, "torch.Tensor"]):
    """A read-write mapping of names to CPU tensors in shared memory.

    Build one with :meth:`from_arrays` (copies data in) or :meth:`zeros`
    (allocates outputs); see the module docstring for the lifetime rules.
    """

    def __init__(self, path: str, slots: Mapping[str, _Slot], size: int, owner: bool):
        self.path = path
        self.size = size
        self._slots = dict(slots)
        # The owner unlinks on close(), or when it is garbage-collected.
        self._unlink = weakref.finalize(self, _unlink, path) if owner else None
        self._map: mmap.mmap | None = None
        self._views: dict[str, torch.Tensor] = {}
        #: Whether this is a private copy that travelled by value (network path).
        self.carried = False

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, torch.Tensor | np.ndarray[Any, Any]]
    ) -> SharedTensors:
        """Copy ``arrays`` (CPU tensors or numpy arrays) into a new segment."""
        import torch

        tensors = {
            name: torch.from_numpy(np.ascontiguousarray(a))
            if isinstance(a, np.ndarray)
            else a.detach().cpu()
            for name, a in arrays.items()
        }
        layout = {name: (tuple(t.shape), t.dtype) for name, t in tensors.items()}
        shared = cls.zeros(layout)
        for name, tensor in tensors.items():
            shared[name].copy_(tensor)
        return shared

    @classmethod
    def zeros(
        cls,
        layout: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
        *,
        directory: str | None = None,
    ) -> SharedTensors:
        """Allocate zero-filled tensors of the given ``(shape, dtype)`` by name.

        Args:
            layout: Shape and torch dtype of each tensor.
            directory: Where the segment's file lives; ``/dev/shm`` by default
                (falls back to the temporary directory where there is none, in
                which case a crashed owner leaves the file behind).
        """
        import torch

        slots, offset = {}, 0
        for name, (shape, dtype) in layout.items():
            itemsize = torch.empty((), dtype=dtype).element_size()
            slot = _Slot(
                offset, tuple(int(s) for s in shape), str(dtype).split(".")[-1]
            )
            slots[name] = slot
            offset += -(-slot.numel * itemsize // _ALIGN) * _ALIGN
        folder = directory or (_SHM_DIR if os.path.isdir(_SHM_DIR) else None)
        folder = folder or tempfile.gettempdir()
        path = os.path.join(folder, f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}")
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, max(offset, 1))  # tmpfs pages read as zeros until written
        finally:
            os.close(fd)
        if folder == _SHM_DIR:
            resource_tracker.register(_tracker_name(path), "shared_memory")
        return cls(path, slots, max(offset, 1), owner=True)

    @property
    def nbytes(self) -> int:
        """Bytes of tensor data (without alignment padding)."""
        return sum(
            self[name].element_size() * s.numel for name, s in self._slots.items()
        )

    def __getitem__(self, name: str) -> torch.Tensor:
        view = self._views.get(name)
        if view is None:
            view = self._view(self._slots[name])
            self._views[name] = view
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def close(self) -> None:
        """Unlink the segment (owner only); tensors already viewed stay valid."""
        self._views.clear()
        if self._unlink is not None:
            self._unlink()  # runs once, however often close() is called
        self._map = None  # unmapped once the last tensor viewing it is gone

    def __enter__(self) -> SharedTensors:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        sent = getattr(_CARRY, "sent", None)
        if sent is not None:  # the network path: the bytes travel too
            data = bytes(self._mapped())
            sent[self.path] = _Sent(self, data)
            return (_receive, (self.path, self._slots, self.size, data))
        # A handle: workers map the same file; only the creator owns (unlinks) it.
        return (SharedTensors, (self.path, self._slots, self.size, False))

    def __repr__(self) -> str:
        names = ", ".join(
            f"{n}: {list(s.shape)} {s.dtype}" for n, s in self._slots.items()
        )
        return f"SharedTensors({os.path.basename(self.path)!r}, {{{names}}})"

    def _view(self, slot: _Slot) -> torch.Tensor:
        import torch

        dtype = getattr(torch, slot.dtype)
        if slot.numel == 0:
            return torch.empty(slot.shape, dtype=dtype)
        flat = torch.frombuffer(
            self._mapped(), dtype=dtype, count=slot.numel, offset=slot.offset
        )
        return flat.view(slot.shape)

    def _mapped(self) -> mmap.mmap:
        if self._map is None:
            fd = os.open(self.path, os.O_RDWR)
            try:
                self._map = mmap.mmap(fd, self.size)
            finally:
                os.close(fd)
        return self._map


# ---------------------------------------------------------------- network path
@dataclass(frozen=True, slots=True)
class _Sent:
    """A segment pickled by value: the parent's object and the bytes it sent."""

    shared: SharedTensors
    data: bytes = field(repr=False)


@dataclass(slots=True)
class _Received:
    """A carried copy in a rank, with the digest of each block as received."""

    shared: SharedTensors
    digests: list[bytes]


_CARRY = threading.local()  # .sent: {path: _Sent} while carried() is active
_RECEIVED: list[_Received] = []  # carried copies unpickled in this process


@contextlib.contextmanager
def carried() -> Iterator[dict[str, _Sent]]:
    """Pickle ``SharedTensors`` by value inside (for a rank on another node).

    Yields the segments pickled so far, by path; give them to
    :func:`apply_writes` with what the rank sends back.

    Examples:
        >>> import pickle, torch
        >>> with SharedTensors.zeros({"h": ((2, 2), torch.float32)}) as out:
        ...     with carried() as sent:
        ...         blob = pickle.dumps(out)
        ...     copy = pickle.loads(blob)                 # in the remote rank
        ...     copy["h"][1] = 7.0
        ...     apply_writes(sent, take_writes())         # back in the parent
        ...     copy.carried, out["h"].tolist()
        (True, [[0.0, 0.0], [7.0, 7.0]])
    """
    sent: dict[str, _Sent] = {}
    _CARRY.sent = sent
    try:
        yield sent
    finally:
        _CARRY.sent = None


def take_writes() -> dict[str, list[tuple[int, bytes]]]:
    """The blocks each carried copy in this process changed, by segment path.

    Forgets the copies: call it once, after the rank's function returned.
    """
    writes: dict[str, list[tuple[int, bytes]]] = {}
    for received in _RECEIVED:
        data = received.shared._mapped()
        changed = [
            (offset, data[offset : offset + _BLOCK])
            for offset, digest in zip(
                range(0, received.shared.size, _BLOCK), received.digests, strict=True
            )
            if _digest(data, offset) != digest
        ]
        if changed:
            writes.setdefault(received.shared.path, []).extend(changed)
    _RECEIVED.clear()
    return writes


def apply_writes(
    sent: Mapping[str, _Sent], writes: Mapping[str, list[tuple[int, bytes]]]
) -> None:
    """Apply a rank's :func:`take_writes` to the parent's segments.

    Only the bytes that differ from what was sent are written, so ranks that
    wrote disjoint rows of one block both land; where two ranks wrote the same
    byte, the one applied last wins.
    """
    for path, blocks in writes.items():
        origin = sent[path]
        target = np.frombuffer(origin.shared._mapped(), dtype=np.uint8)
        before = np.frombuffer(origin.data, dtype=np.uint8)
        for offset, block in blocks:
            new = np.frombuffer(block, dtype=np.uint8)
            end = offset + new.size
            changed = new != before[offset:end]
            target[offset:end][changed] = new[changed]


def _receive(
    path: str, slots: Mapping[str, _Slot], size: int, data: bytes
) -> SharedTensors:
    """Unpickle a carried segment: a private, writable, anonymous copy."""
    shared = SharedTensors(path, slots, size, owner=False)
    memory = mmap.mmap(-1, size)
    memory[:] = data
    shared._map = memory
    shared.carried = True
    digests = [_digest(memory, offset) for offset in range(0, size, _BLOCK)]
    _RECEIVED.append(_Received(shared, digests))
    return shared


def _digest(data: mmap.mmap, offset: int) -> bytes:
    block = memoryview(data)[offset : offset + _BLOCK]
    try:
        return hashlib.blake2b(block, digest_size=16).digest()
    finally:
        block.release()


def _unlink(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)
        if os.path.dirname(path) == _SHM_DIR:
            resource_tracker.unregister(_tracker_name(path), "shared_memory")


def _tracker_name(path: str) -> str:
    """The POSIX shared-memory name of a file in /dev/shm (what shm_unlink takes)."""
    return "/" + os.path.basename(path)
