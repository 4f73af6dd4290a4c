"""Aggregate-then-transform or transform-then-aggregate, chosen by cost.

For a linear aggregation ``A`` and a weight ``W``, ``A (X W) == (A X) W``. The
two orders cost differently:

* the sparse product runs at the width it is applied to (``in`` for ``(A X) W``,
  ``out`` for ``A (X W)``) and is memory-bound, so it dominates;
* in training, ``A (X W)`` needs a second sparse product in backward (``A^T G``,
  for ``W``'s gradient), while ``(A X) W`` needs one only if ``X`` itself requires
  a gradient: the first layer of a model never does;
* the dense product runs over ``num_dst`` rows after aggregation but ``num_src``
  rows before it, which matters for sampled blocks.

``benchmarks/kernels/test_aggregation_order.py`` measures both orders (the model
picks the faster one in all three GCN cases there); DGL's ``GraphConv``
makes the same choice by width only.

Examples:
    >>> aggregate_first(num_src=100, num_dst=100, num_edges=1000, in_width=128,
    ...                 out_width=16, x_requires_grad=True, training=True)
    False
    >>> aggregate_first(num_src=100, num_dst=100, num_edges=1000, in_width=128,
    ...                 out_width=128, x_requires_grad=False, training=True)
    True
"""

from __future__ import annotations

# A dense multiply-add costs about this fraction of one gathered sparse element
# (2 CPU threads, float32; from test_spmm.py: ~0.3 s per 7.6M x 128 SpMM against
# ~0.05 s per 262k x 128 x 128 GEMM).
_DENSE_COST = 1.0 / 32


def aggregate_first(
    *,
    num_src: int,
    num_dst: int,
    num_edges: int,
    in_width: int,
    out_width: int,
    x_requires_grad: bool,
    training: bool,
) -> bool:
    """Whether ``(A X) W`` is estimated cheaper than ``A (X W)`` (ties: True).

    Args:
        num_src: rows of ``X``.
        num_dst: rows of the output.
        num_edges: non-zeros of ``A``.
        in_width: columns of ``X``.
        out_width: columns of ``W``.
        x_requires_grad: whether ``X`` needs a gradient.
        training: whether a backward pass will follow (autograd on and a
            parameter requires a gradient).

    Returns:
        True to aggregate first.
    """
    dense = in_width * out_width * _DENSE_COST * (3 if training else 1)
    agg_first = float(num_edges * in_width * (2 if training and x_requires_grad else 1))
    agg_first += num_dst * dense
    transform_first = float(num_edges * out_width * (2 if training else 1))
    transform_first += num_src * dense
    return agg_first <= transform_first
