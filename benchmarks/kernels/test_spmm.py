"""SpMM formulations on CPU: which one the kernels use, and why.

``out[i] = sum_{j -> i} w_ij x_j`` over RMAT scale 18 (7.6M edges) at 16 and 128
features, 2 threads, float32. Formulations:

* ``numba_csr``: Strata's row-parallel CSR kernel (``Backend.NUMBA``);
* ``torch_csr``: ``torch.sparse_csr_tensor @ x`` (MKL; ``Backend.TORCH``);
* ``index_add``: gather ``x[src] * w`` and ``out.index_add_(0, dst, msg)``;
* ``scatter_reduce``: the same messages through ``scatter_reduce(..., "sum")``;
* ``segment_reduce``: the same messages through ``torch.segment_reduce`` with the
  CSR offsets.

The three gather formulations materialise one message per edge (3.9 GB at 128
features); they run over slices of about 2M edges (whole rows), which bounds their
memory and is how one would use them at this size. ``*_fwd_bwd`` cases time
forward + backward of the autograd Functions (numba and torch back ends) against
torch's own autograd through a CSR tensor (what PyG's CSR path does).

Run: ``pytest benchmarks/kernels/test_spmm.py -m large -s -p no:cacheprovider``.
``extra_info["over_numba_csr"]`` is each case's time over ``numba_csr`` at the
same width (from one run). The smoke variant runs everything at scale 10.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from strata.operators.kernels import Backend, spmm, use_backend
from strata.operators.kernels._primitives import spmm_raw

CHUNK_EDGES = 1 << 21
_TIMES: dict[tuple[str, str, int], float] = {}


def _row_slices(dg):
    """Slices of whole rows holding about CHUNK_EDGES edges each."""
    indptr = dg.indptr
    bounds = torch.searchsorted(
        indptr, torch.arange(0, dg.num_edges + CHUNK_EDGES, CHUNK_EDGES)
    ).clamp(max=dg.num_dst)
    rows = sorted(set(bounds.tolist()) | {0, dg.num_dst})
    return list(itertools.pairwise(rows))


def _gather(dg, x, w, reduce_fn):
    src, dst = dg.src_index(), dg.dst_index()
    out = x.new_zeros((dg.num_dst, x.shape[1]))
    for lo, hi in _row_slices(dg):
        e0, e1 = int(dg.indptr[lo]), int(dg.indptr[hi])
        msg = x.index_select(0, src[e0:e1]) * w[e0:e1, None]
        reduce_fn(out, lo, hi, e0, dst[e0:e1], msg)
    return out


def _index_add(out, lo, hi, e0, dst, msg):
    out.index_add_(0, dst, msg)


def _scatter_reduce(out, lo, hi, e0, dst, msg):
    out.scatter_reduce_(0, dst[:, None].expand_as(msg), msg, "sum")


def _segment_reduce(dg):
    def reduce(out, lo, hi, e0, dst, msg):
        offsets = dg.indptr[lo : hi + 1] - e0
        out[lo:hi] = torch.segment_reduce(msg, "sum", offsets=offsets, axis=0)

    return reduce


def _torch_autograd_csr(dg, x, w):
    adj = torch.sparse_csr_tensor(
        dg.indptr, dg.src_index(), w, (dg.num_dst, dg.num_src)
    )
    return torch.sparse.mm(adj, x)


FORMULATIONS = {
    "numba_csr": spmm_raw,  # run under use_backend(NUMBA)
    "torch_csr": spmm_raw,  # run under use_backend(TORCH)
    "index_add": lambda dg, x, w: _gather(dg, x, w, _index_add),
    "scatter_reduce": lambda dg, x, w: _gather(dg, x, w, _scatter_reduce),
    "segment_reduce": lambda dg, x, w: _gather(dg, x, w, _segment_reduce(dg)),
}


@pytest.fixture(scope="module", autouse=True)
def _ratio_table():
    """Print every case's time over the numba kernel's, once all have run."""
    yield
    if not _TIMES:
        return
    lines = ["SpMM formulations (min s; ratio to numba at the same width and pass)"]
    for (kind, name, width), seconds in sorted(_TIMES.items()):
        ref = _TIMES.get(
            (kind, "numba_csr" if kind == "fwd" else "numba_fwd_bwd", width)
        )
        ratio = f"{seconds / ref:.2f}x" if ref else "-"
        lines.append(f"  {kind:4} {name:20} F={width:<4} {seconds:8.3f} s  {ratio}")
    print("\n" + "\n".join(lines))


def _run(benchmark, dg, name, width, rounds):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(dg.num_src, width, generator=gen)
    w = torch.rand(dg.num_edges, generator=gen)
    fn = FORMULATIONS[name]
    backend = Backend.NUMBA if name == "numba_csr" else Backend.TORCH

    def target():
        with use_backend(backend):
            return fn(dg, x, w)

    out = benchmark.pedantic(target, rounds=rounds, warmup_rounds=1, iterations=1)
    with use_backend(Backend.NUMBA):
        expected = spmm_raw(dg, x, w)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-3)
    _record(benchmark, name, width, dg.num_edges)


def _record(benchmark, name, width, num_edges):
    if benchmark.disabled:
        return
    seconds = benchmark.stats.stats.min
    info = benchmark.extra_info
    info["width"] = width
    info["gflops"] = 2 * num_edges * width / seconds / 1e9
    info["edges_per_s"] = num_edges / seconds
    _TIMES[("fwd", name, width)] = seconds
    ref = _TIMES.get(("fwd", "numba_csr", width))
    if ref:
        info["over_numba_csr"] = seconds / ref


@pytest.mark.large
@pytest.mark.timeout(3600)  # minutes of work; the suite default is 300 s
@pytest.mark.parametrize("width", [128, 16])
@pytest.mark.parametrize("name", list(FORMULATIONS))
def test_spmm_forward(benchmark, rmat18, name, width):
    slow = name in ("index_add", "scatter_reduce", "segment_reduce")
    _run(benchmark, rmat18, name, width, rounds=2 if slow else 5)


@pytest.mark.parametrize("name", list(FORMULATIONS))
def test_spmm_forward_smoke(benchmark, rmat10, name):
    _run(benchmark, rmat10, name, 16, rounds=2)


def _fwd_bwd(benchmark, dg, name, width, rounds):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(dg.num_src, width, generator=gen, requires_grad=True)
    w = torch.rand(dg.num_edges, generator=gen)
    grad = torch.randn(dg.num_dst, width, generator=gen)

    def target():
        x.grad = None
        if name == "torch_autograd_csr":
            out = _torch_autograd_csr(dg, x, w)
        else:
            backend = Backend.NUMBA if name == "numba_fwd_bwd" else Backend.TORCH
            with use_backend(backend):
                out = spmm(dg, x, w)
        out.backward(grad)

    benchmark.pedantic(target, rounds=rounds, warmup_rounds=1, iterations=1)
    if not benchmark.disabled:
        seconds = benchmark.stats.stats.min
        benchmark.extra_info["width"] = width
        _TIMES[("fb", name, width)] = seconds
        ref = _TIMES.get(("fb", "numba_fwd_bwd", width))
        if ref:
            benchmark.extra_info["over_numba_fwd_bwd"] = seconds / ref


FWD_BWD = ["numba_fwd_bwd", "torch_fwd_bwd", "torch_autograd_csr"]


@pytest.mark.large
@pytest.mark.timeout(3600)  # minutes of work; the suite default is 300 s
@pytest.mark.parametrize("width", [128, 16])
@pytest.mark.parametrize("name", FWD_BWD)
def test_spmm_forward_backward(benchmark, rmat18, name, width):
    _fwd_bwd(benchmark, rmat18, name, width, rounds=3)


@pytest.mark.parametrize("name", FWD_BWD)
def test_spmm_forward_backward_smoke(benchmark, rmat10, name):
    _fwd_bwd(benchmark, rmat10, name, 16, rounds=2)
