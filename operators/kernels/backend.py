"""Which formulation runs the sparse primitives, per device.

``benchmarks/kernels/test_spmm.py`` compares the candidates on an RMAT graph (scale
18, 7.6M edges) with 2 CPU threads. There, a row-parallel numba CSR kernel is
1.25x (busy machine) to 2-3x (quiet) faster than ``torch.sparse.mm`` on a CSR
tensor (MKL) at 128 features and on par at 16; forward + backward it is 1.16x
ahead of the same autograd Function on torch's kernels and 2x ahead of torch's own
autograd through a CSR tensor (PyG's path). Gather + ``index_add_`` /
``scatter_reduce`` / ``segment_reduce`` are 6-12x slower and materialise one
message per edge.
So :attr:`Backend.AUTO` picks numba for large CPU kernels (full graphs; see
:data:`NUMBA_MIN_WORK` for why small ones, e.g. sampled blocks, stay on torch) and
torch's sparse CSR kernels (cuSPARSE on CUDA) everywhere else. On CPU,
half-precision inputs are computed in float32 and cast back (neither formulation
has half arithmetic there).

numba is otherwise kept to CPU preprocessing (ARCHITECTURE.md); these CPU kernels are
the one exception, taken because the benchmark shows it pays, and the torch path
stays complete so every device, and any CPU run with ``use_backend(Backend.TORCH)``,
works without them.

Examples:
    >>> import torch
    >>> resolve(torch.empty(2, 2), work=1 << 30) is Backend.NUMBA
    True
    >>> resolve(torch.empty(2, 2), work=1 << 10) is Backend.TORCH
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

# Below this many gathered elements (edges x width) a CPU kernel runs on torch.
# numba's parallel kernels use their own OpenMP runtime (not torch's); a process
# that alternates small numba and torch kernels (sampled training: a few
# milliseconds each) keeps two thread teams spin-waiting on the same cores, which
# on a 2-core machine cost more than the kernels. Big full-graph kernels amortise
# it, and there numba is faster (benchmarks/kernels/test_spmm.py).
NUMBA_MIN_WORK = 1 << 24
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


def resolve(x: torch.Tensor, work: int | None = None) -> Backend:
    """The concrete backend (``NUMBA`` or ``TORCH``) for a kernel over ``x``.

    Args:
        x: the kernel's main input (its device decides).
        work: gathered elements (edges x row width), when known. Under ``AUTO``,
            CPU kernels smaller than :data:`NUMBA_MIN_WORK` run on torch.
    """
    requested = current()
    if requested is Backend.TORCH or x.device.type != "cpu":
        return Backend.TORCH
    if requested is Backend.AUTO and work is not None and work < NUMBA_MIN_WORK:
        return Backend.TORCH
    return Backend.NUMBA


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a CPU kernel computes in: float32 for half types.

    Neither torch's CPU sparse matmul nor the numba kernels do half arithmetic.
    """
    return dtype if dtype in _NUMBA_DTYPES else torch.float32
