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

import math
import mmap
import os
import secrets
import tempfile
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from multiprocessing import resource_tracker
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

#: Name prefix of every segment, so leftovers are easy to find (``ls /dev/shm``).
PREFIX = "strata-gang-"
_ALIGN = 64  # cache-line alignment of every array
_SHM_DIR = "/dev/shm"


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
        if self._map is None:
            fd = os.open(self.path, os.O_RDWR)
            try:
                self._map = mmap.mmap(fd, self.size)
            finally:
                os.close(fd)
        flat = torch.frombuffer(
            self._map, dtype=dtype, count=slot.numel, offset=slot.offset
        )
        return flat.view(slot.shape)


def _unlink(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)
        if os.path.dirname(path) == _SHM_DIR:
            resource_tracker.unregister(_tracker_name(path), "shared_memory")


def _tracker_name(path: str) -> str:
    """The POSIX shared-memory name of a file in /dev/shm (what shm_unlink takes)."""
    return "/" + os.path.basename(path)
