"""The memory model of chunked training: a worker's peak device bytes for a plan.

``hongtu.md`` §3.3 models a step's peak as its rows (previous and current
step's sources), its destinations' intermediates, its topology and the model.
This module computes that peak *exactly as the chunked trainer allocates*: for
every layer and step it replays the trainer's arena events (the same buffers,
in the same order; see :mod:`~strata.operators.trainers.distributed.chunked.trainer`)
with the step's sizes from the load plans, and takes the largest live total.
The trainer then measures its arena against it; a test checks measured <=
modelled on every configuration it runs.

Per step, with ``d``/``d'`` the layer's input/output width and 4-byte floats:

* forward: ``max(prev + rows + max(host, sent + received),
  rows + topology + work + |D| d (z) + |D| d (root, SAGE/GIN) + |D| d' (y))``;
* backward (refetch): dy, topology with its transpose, the carried gradient,
  the refetched rows (reverse plan) and their gradient, the vertex work;
  backward (cache): dy, cached z and root, their gradients, the transposed
  aggregate; then the mirrored flush: the step's gradient, the previous step's
  carried gradient and the exchange buffers.

``model_state_bytes`` adds parameters, their gradients, Adam's two moments, the
all-reduce buffers and the best-epoch copy.

Examples:
    >>> from strata.operators.layers import GCN
    >>> model_state_bytes(GCN(4, 8, 2, num_layers=2), None) // 4  # 58 parameters
    348
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strata.operators.layers import BasicGNN
from strata.operators.trainers.distributed.modes import CachePolicy
from strata.operators.trainers.distributed.programs import LayerProgram

_B = 4  # float32


def model_state_bytes(model: BasicGNN, dist: Any) -> int:
    """Parameters, gradients, Adam moments, all-reduce buffers, best weights."""
    params = sum(p.numel() for p in model.parameters()) * _B
    compressed = dist is not None and getattr(dist, "compression", None) is not None
    return params * (9 if compressed else 6)


@dataclass(frozen=True, slots=True)
class StepSizes:
    """One worker's sizes in one step of a load plan.

    Attributes:
        src: ``|S_{g,s}|``.
        dst: ``|D_{g,s}|``.
        edges: edges of the chunk's propagation graph.
        host: rows loaded from the host.
        sent: rows sent to peers.
        received: rows received from peers.
    """

    src: int
    dst: int
    edges: int
    host: int
    sent: int
    received: int


@dataclass(frozen=True, slots=True)
class PeakReport:
    """A worker's modelled peak and where it happens.

    Attributes:
        bytes: the peak, model state included.
        phase: ``"fwd"`` or ``"bwd"``.
        layer: 1-based layer.
        step: step index.
    """

    bytes: int
    phase: str
    layer: int
    step: int


def topology_bytes(
    step: StepSizes, *, values: bool, row_scale: bool, transpose: bool
) -> int:
    """A chunk's graph on the device (as ``Transfers.topology`` accounts it)."""
    nbytes = 8 * (step.dst + 1) + 8 * step.edges
    nbytes += 4 * step.edges if values else 0
    nbytes += 4 * step.dst if row_scale else 0
    if transpose:
        nbytes += 8 * (step.src + 1) + 16 * step.edges
        nbytes += 4 * step.edges if values else 0
    return nbytes


def worker_peak(
    fwd: Sequence[StepSizes],
    rev: Sequence[StepSizes],
    *,
    widths: Sequence[tuple[int, int]],
    policies: Sequence[CachePolicy],
    program: LayerProgram,
    state_bytes: int,
    hold: bool,
    values: bool,
    row_scale: bool,
) -> PeakReport:
    """The modelled peak of one worker (see the module docstring).

    Args:
        fwd: the worker's steps in forward order.
        rev: its steps in the reverse plan's order (``rev[t]`` is forward step
            ``M - 1 - t``).
        widths: ``(d_in, d_out)`` per layer.
        policies: the recompute-or-cache policy per layer.
        program: the model's layer program.
        state_bytes: :func:`model_state_bytes`.
        hold: whether the plan keeps the previous step's rows.
        values: whether the propagation graph has edge values.
        row_scale: whether it has a per-destination scale (mean).
    """
    best = PeakReport(state_bytes, "fwd", 1, 0)
    steps = len(fwd)
    layers = len(widths)

    def note(nbytes: int, phase: str, layer: int, step: int) -> None:
        nonlocal best
        if nbytes + state_bytes > best.bytes:
            best = PeakReport(nbytes + state_bytes, phase, layer, step)

    for layer in range(1, layers + 1):
        d, d_out = widths[layer - 1]
        last = layer == layers
        for s, st in enumerate(fwd):
            prev = fwd[s - 1].src * d * _B if hold and s else 0
            rows = st.src * d * _B
            exchange = max(st.host, st.sent + st.received) * d * _B
            topo = topology_bytes(
                st, values=values, row_scale=row_scale, transpose=False
            )
            work = program.work_bytes(st.dst, d, d_out, backward=False)
            work += _B * st.dst * d if row_scale else 0
            work += 8 * st.dst * d_out if last else 0
            inter = st.dst * _B * (d * (2 if program.needs_root else 1) + d_out)
            note(prev + rows + exchange, "fwd", layer, s)
            note(rows + topo + work + inter, "fwd", layer, s)
        refetch = policies[layer - 1] is CachePolicy.REFETCH
        grads = layer > 1
        for s in reversed(range(steps)):
            st, rt = fwd[s], rev[steps - 1 - s]
            rows = st.src * d * _B
            carry = rows if grads and hold and s < steps - 1 else 0
            dy = st.dst * d_out * _B
            topo = topology_bytes(
                st, values=values, row_scale=row_scale, transpose=grads
            )
            work = program.work_bytes(st.dst, d, d_out, backward=True)
            work += _B * st.dst * d * (2 if row_scale else 1)
            held = carry + dy + topo
            if refetch:
                rprev = fwd[s + 1].src * d * _B if hold and s < steps - 1 else 0
                load = max(rt.host, rt.sent + rt.received) * d * _B
                note(held + rprev + rows + load, "bwd", layer, s)
                note(held + rows + work + (rows if grads else 0), "bwd", layer, s)
            else:
                cached = st.dst * d * _B * (2 if program.needs_root else 1)
                note(held + 2 * cached + work + (rows if grads else 0), "bwd", layer, s)
            if grads:
                carry_prev = fwd[s - 1].src * d * _B if hold and s else 0
                kept = rows if refetch else 0
                flush = max(st.sent + st.received, st.host) * d * _B
                note(rows + carry_prev + topo + kept + flush, "bwd", layer, s)
    return best
