"""Aggregate-then-transform vs transform-then-aggregate, forward + backward.

A GCN-style layer ``A X W`` on RMAT scale 18 (7.6M edges), 2 threads, computed as
``(A X) W`` (``aggregate_first``) or ``A (X W)`` (``transform_first``), with the
widths and input gradients a 2-layer GCN (128 -> 128 -> 16) meets:

* ``first_layer``: 128 -> 128, ``X`` needs no gradient (input features);
* ``narrowing``: 128 -> 16, ``X`` needs a gradient (hidden layer);
* ``widening``: 16 -> 128, ``X`` needs a gradient.

``extra_info["chosen"]`` is what :func:`strata.operators.kernels.aggregate_first`
picks; ``extra_info["over_chosen"]`` (printed at the end) is each order's time
over the chosen order's. Run:
``pytest benchmarks/kernels/test_aggregation_order.py -m large -s -p no:cacheprovider``.
"""

from __future__ import annotations

import pytest
import torch

from strata.operators.kernels import aggregate_first, spmm

CASES = {
    "first_layer": (128, 128, False),
    "narrowing": (128, 16, True),
    "widening": (16, 128, True),
}
_TIMES: dict[tuple[str, str], float] = {}


@pytest.fixture(scope="module", autouse=True)
def _ratio_table():
    yield
    if not _TIMES:
        return
    lines = ["Aggregation order (min s per forward + backward)"]
    for case in CASES:
        times = {
            o: _TIMES.get((case, o)) for o in ("aggregate_first", "transform_first")
        }
        if None in times.values():
            continue
        fastest = min(times, key=times.get)
        lines.append(
            f"  {case:12} aggregate_first {times['aggregate_first']:.3f} s, "
            f"transform_first {times['transform_first']:.3f} s -> fastest {fastest}"
        )
    print("\n" + "\n".join(lines))


def _run(benchmark, dg, case, order, rounds):
    in_w, out_w, x_grad = CASES[case]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(dg.num_src, in_w, generator=gen, requires_grad=x_grad)
    weight = torch.randn(in_w, out_w, generator=gen, requires_grad=True)
    values = torch.rand(dg.num_edges, generator=gen)
    grad = torch.randn(dg.num_dst, out_w, generator=gen)

    def target():
        weight.grad = None
        x.grad = None
        if order == "aggregate_first":
            out = spmm(dg, x, values) @ weight
        else:
            out = spmm(dg, x @ weight, values)
        out.backward(grad)

    benchmark.pedantic(target, rounds=rounds, warmup_rounds=1, iterations=1)
    chosen = aggregate_first(
        num_src=dg.num_src,
        num_dst=dg.num_dst,
        num_edges=dg.num_edges,
        in_width=in_w,
        out_width=out_w,
        x_requires_grad=x_grad,
        training=True,
    )
    benchmark.extra_info["chosen"] = "aggregate_first" if chosen else "transform_first"
    if not benchmark.disabled:
        _TIMES[(case, order)] = benchmark.stats.stats.min


@pytest.mark.large
@pytest.mark.timeout(3600)  # minutes of work; the suite default is 300 s
@pytest.mark.parametrize("order", ["aggregate_first", "transform_first"])
@pytest.mark.parametrize("case", list(CASES))
def test_order(benchmark, rmat18, case, order):
    _run(benchmark, rmat18, case, order, rounds=3)


@pytest.mark.parametrize("order", ["aggregate_first", "transform_first"])
def test_order_smoke(benchmark, rmat10, order):
    _run(benchmark, rmat10, "first_layer", order, rounds=2)
