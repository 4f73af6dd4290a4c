"""Which formulation runs the sparse primitives, per device.

``benchmarks/kernels/bench_spmm.py`` compares the candidates on an RMAT graph (scale
18, 7.6M edges) with 2 CPU threads. There, a row-parallel numba CSR kernel is about
2x faster than ``torch.sparse.mm`` on a CSR tensor (MKL) at 128 features and on
par at 16, and both are 10x or more ahead of gather + ``index_add_`` /
``scatter_reduce`` / ``segment_reduce``, which also materialise one message per edge.
So :attr:`Backend.AUTO` picks numba for CPU tensors and torch's sparse CSR kernels
(cuSPARSE on CUDA) everywhere else. On CPU, half-precision inputs are computed in
float32 and cast back (neither formulation has half arithmetic there).

numba is otherwise kept to CPU preprocessing (ARCHITECTURE.md); these CPU kernels are
the one exception, taken because the benchmark shows it pays, and the torch path
stays complete so every device, and any CPU run with ``use_backend(Backend.TORCH)``,
works without them.

Examples:
    >>> import torch
    >>> resolve(torch.empty(2, 2)) is Backend.NUMBA
    True
    >>> with use_backend(Backend.TORCH):
    ...     resolve(torch.empty(2, 2)) is Backend.TORCH
    True
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Iterator

import torch


class Backend(enum.Enum):
    """A formulation of the sparse primitives."""

    AUTO = "auto"  # the fastest measured for the tensor's device and dtype
    NUMBA = "numba"  # row-parallel CSR kernels (CPU only)
    TORCH = "torch"  # torch.sparse CSR matmul + index ops (any device)


_NUMBA_DTYPES = (torch.float32, torch.float64)
_state = threading.local()


def current() -> Backend:
    """The backend requested in this thread (``AUTO`` unless overridden)."""
    backend: Backend = getattr(_state, "backend", Backend.AUTO)
    return backend


@contextlib.contextmanager
def use_backend(backend: Backend) -> Iterator[None]:
    """Run the enclosed kernels with ``backend`` in this thread (tests, benchmarks).

    ``NUMBA`` still falls back to ``TORCH`` for tensors it cannot serve (not on
    CPU), so forcing it never breaks a model.
    """
    previous = current()
    _state.backend = backend
    try:
        yield
    finally:
        _state.backend = previous


def resolve(x: torch.Tensor) -> Backend:
    """The concrete backend (``NUMBA`` or ``TORCH``) for a kernel over ``x``."""
    if current() is Backend.TORCH:
        return Backend.TORCH
    if x.device.type == "cpu":
        return Backend.NUMBA
    return Backend.TORCH


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a CPU kernel computes in: float32 for half types.

    Neither torch's CPU sparse matmul nor the numba kernels do half arithmetic.
    """
    return dtype if dtype in _NUMBA_DTYPES else torch.float32
