"""Reuse of constant aggregates: ``A . X`` computed once while ``X`` is unchanged.

When a layer's aggregation has no parameters (sum, mean, max, GCN's symmetric
normalisation, a weighted sum over the graph's weights) and its input needs no
gradient and is sent unchanged (the raw features of a first layer without dropout
before it), the aggregate ``A . X`` is the same in every epoch: only the dense
transform after it learns. :meth:`MessagePassing.forward
<strata.operators.layers.message_passing.MessagePassing.forward>` then keeps the
aggregate on the graph's :class:`DeviceGraph` and serves it again, which removes
the largest sparse product of a full-graph GCN or GraphSAGE epoch (and its
backward, which the first layer never needs).

Exactness and safety: the entry is keyed by the aggregation value and the input
tensor's identity, and checked on every use against the input's version counter
(any in-place change bumps it), data pointer, shape, strides and dtype, and
against the cached result's own version counter (nothing may have written into
it). A mismatch recomputes. The graph is immutable once built (as every cached
structure of a :class:`DeviceGraph` assumes), and a new graph object is a new
``DeviceGraph``. The cache holds one aggregate (``[N, F]``) per graph and
aggregation, and only a weak reference to the input: when the input is freed,
the entry goes too. Dropout before the layer makes a new input each epoch, so the
cache then never hits and the aggregate is recomputed, as without it.

``reuse_constant_aggregates(False)`` turns the reuse off in the calling thread
(benchmarks report both figures; results are identical either way).

Examples:
    >>> reuse_enabled()
    True
    >>> with reuse_constant_aggregates(False):
    ...     reuse_enabled()
    False
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_state = threading.local()


def reuse_enabled() -> bool:
    """Whether constant aggregates are reused in this thread (default: yes)."""
    enabled: bool = getattr(_state, "enabled", True)
    return enabled


@contextlib.contextmanager
def reuse_constant_aggregates(enabled: bool) -> Iterator[None]:
    """Turn the reuse of constant aggregates on or off in the enclosed block."""
    previous = reuse_enabled()
    _state.enabled = enabled
    try:
        yield
    finally:
        _state.enabled = previous
