"""What a distributed worker moved: :class:`Traffic` by epoch, phase, layer and peer.

Every transfer is counted at its call site (payload ``rows * width * itemsize``,
``hongtu.md`` §3.8), never inferred afterwards, so a counter can be checked
against the plan it executes. Counters are typed: :class:`Traffic` has one
``int`` field per counter, so a misspelt counter is a type error, not a new
key. A :class:`TransferCounters` keeps the current epoch's traffic per
``(phase, layer, peer)`` cell and sums cells with ``+``:

* ``phase``: a :class:`Phase` -- forward, backward (training), evaluation,
  setup (once per run: features to the device, plan index lists), Emma's
  refresh passes and Emma's per-iteration facts;
* ``layer``: 1..L for per-layer traffic, 0 for the rest (gradient all-reduce);
* ``peer``: the other worker of a device-to-device transfer, or -1.

:meth:`TransferCounters.end_epoch` closes an epoch. The run report keeps its
JSON shape: each closed epoch is ``{"<phase>.<field>": total}`` and, per layer,
``{"<phase>.l<layer>.<field>": total}`` (nonzero fields only), and the epoch's
totals are added to the gang's per-worker metrics under the same names.

Examples:
    >>> c = TransferCounters()
    >>> c.add(Phase.FWD, Traffic(h2d_bytes=400), layer=1)
    >>> c.add(Phase.FWD, Traffic(peer_send_bytes=80), layer=1, peer=1)
    >>> c.add(Phase.BWD, Traffic(peer_send_bytes=40), layer=1, peer=1)
    >>> c.total().peer_send_bytes, c.total(phase=Phase.FWD).peer_send_bytes
    (120, 80)
    >>> c.end_epoch()["fwd.h2d_bytes"]
    400
    >>> c.total().h2d_bytes, c.epoch_total(0).h2d_bytes
    (0, 400)
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any


class Phase(enum.Enum):
    """When a transfer happened (the value is the report's key prefix)."""

    SETUP = "setup"  # once per run, booked into the first epoch
    FWD = "fwd"  # training forward
    BWD = "bwd"  # training backward (and the gradient all-reduce)
    EVAL = "eval"  # evaluation passes
    REFRESH = "refresh"  # Emma's exact refresh passes
    EMMA = "emma"  # Emma's per-iteration facts (work and reference sizes)


@dataclass(frozen=True, slots=True)
class Traffic:
    """Counts of one cell: every field is one counter (rows, bytes or items).

    Attributes:
        h2d_bytes: plan loads from the host store (and features at setup).
        h2d_rows: rows of those loads.
        d2h_bytes: outputs and gradient flushes to the host.
        grad_h2d_bytes: output gradients read from the host.
        cache_h2d_bytes: cached aggregates (and root rows) read back.
        cache_d2h_bytes: aggregates cached on the host.
        topo_h2d_bytes: a chunk's or part's graph brought to the device.
        peer_send_bytes: HongTu peer copies sent.
        peer_recv_bytes: HongTu peer copies received.
        peer_send_rows: rows of those sends.
        peer_recv_rows: rows of those receipts.
        reuse_rows: rows kept from the previous step (no transfer).
        halo_send_rows: partition-parallel halo rows sent.
        halo_recv_rows: halo rows received.
        halo_send_bytes: halo bytes sent.
        halo_recv_bytes: halo bytes received.
        allreduce_bytes: the gradient all-reduce's payload.
        buffer_bytes: Emma's moving buffers (a level, counted once at setup).
        refresh_bytes: Emma: halo bytes of refresh passes.
        eval_bytes: Emma: halo bytes of evaluation passes.
        active_sources: Emma: sources refreshed this iteration.
        edges_aggregated: Emma: edges aggregated (summed over layers).
        exact_edges: Emma: edges an exact pass aggregates (summed over layers).
        exact_exchange_bytes: Emma: bytes one exact forward exchange sends.
        exact_exchange_rows: Emma: rows one exact forward exchange sends.
        exact_bwd_bytes: Emma: bytes one exact backward exchange sends.
        control_bytes: Emma: control messages (0: chunk ids need none).
    """

    h2d_bytes: int = 0
    h2d_rows: int = 0
    d2h_bytes: int = 0
    grad_h2d_bytes: int = 0
    cache_h2d_bytes: int = 0
    cache_d2h_bytes: int = 0
    topo_h2d_bytes: int = 0
    peer_send_bytes: int = 0
    peer_recv_bytes: int = 0
    peer_send_rows: int = 0
    peer_recv_rows: int = 0
    reuse_rows: int = 0
    halo_send_rows: int = 0
    halo_recv_rows: int = 0
    halo_send_bytes: int = 0
    halo_recv_bytes: int = 0
    allreduce_bytes: int = 0
    buffer_bytes: int = 0
    refresh_bytes: int = 0
    eval_bytes: int = 0
    active_sources: int = 0
    edges_aggregated: int = 0
    exact_edges: int = 0
    exact_exchange_bytes: int = 0
    exact_exchange_rows: int = 0
    exact_bwd_bytes: int = 0
    control_bytes: int = 0

    def __add__(self, other: Traffic) -> Traffic:
        """Field-wise sum."""
        return Traffic(*(getattr(self, n) + getattr(other, n) for n in _NAMES))

    def items(self) -> Iterator[tuple[str, int]]:
        """``(field, value)`` for every nonzero field, in declaration order."""
        for name in _NAMES:
            value = getattr(self, name)
            if value:
                yield name, value


_NAMES = tuple(f.name for f in fields(Traffic))
_ZERO = Traffic()

#: One cell of the counters: (phase, layer, peer).
Cell = tuple[Phase, int, int]


class TransferCounters:
    """One worker's transfer counts (see the module docstring).

    Attributes:
        epochs: per closed epoch, the traffic of each phase.
        layers: per closed epoch, the traffic of each (phase, layer).
    """

    def __init__(self) -> None:
        self._now: dict[Cell, Traffic] = {}
        self.epochs: list[dict[Phase, Traffic]] = []
        self.layers: list[dict[tuple[Phase, int], Traffic]] = []

    def add(
        self, phase: Phase, traffic: Traffic, *, layer: int = 0, peer: int = -1
    ) -> None:
        """Count ``traffic`` in the current epoch's ``(phase, layer, peer)`` cell."""
        cell = (phase, layer, peer)
        self._now[cell] = self._now.get(cell, _ZERO) + traffic

    def total(
        self,
        *,
        phase: Phase | None = None,
        layer: int | None = None,
        peer: int | None = None,
    ) -> Traffic:
        """The current epoch's traffic, optionally of one phase/layer/peer."""
        out = _ZERO
        for (p, lay, q), traffic in self._now.items():
            if (
                (phase is None or p is phase)
                and (layer is None or lay == layer)
                and (peer is None or q == peer)
            ):
                out = out + traffic
        return out

    def epoch_total(self, epoch: int, phase: Phase | None = None) -> Traffic:
        """A closed epoch's traffic (all phases unless one is named)."""
        out = _ZERO
        for p, traffic in self.epochs[epoch].items():
            if phase is None or p is phase:
                out = out + traffic
        return out

    def end_epoch(self, metrics: Any = None) -> dict[str, int]:
        """Close the epoch; return its ``"<phase>.<field>"`` totals.

        Args:
            metrics: a gang ``WorkerMetrics`` to add the totals to (optional).
        """
        per_phase: dict[Phase, Traffic] = {}
        per_layer: dict[tuple[Phase, int], Traffic] = {}
        for (phase, layer, _), traffic in self._now.items():
            per_phase[phase] = per_phase.get(phase, _ZERO) + traffic
            cell = (phase, layer)
            per_layer[cell] = per_layer.get(cell, _ZERO) + traffic
        self.epochs.append(per_phase)
        self.layers.append(per_layer)
        record = _phase_dict(per_phase)
        if metrics is not None:
            for name, value in record.items():
                metrics.add(name, value)
        self._now.clear()
        return record

    def snapshot(self) -> dict[str, Any]:
        """Everything counted, as JSON-able data (closed epochs only)."""
        return {
            "epochs": [_phase_dict(e) for e in self.epochs],
            "layers": [
                dict(
                    sorted(
                        (f"{phase.value}.l{layer}.{name}", value)
                        for (phase, layer), traffic in e.items()
                        for name, value in traffic.items()
                    )
                )
                for e in self.layers
            ],
        }


def _phase_dict(per_phase: dict[Phase, Traffic]) -> dict[str, int]:
    """``{"<phase>.<field>": value}`` of the nonzero fields, sorted by key."""
    return dict(
        sorted(
            (f"{phase.value}.{name}", value)
            for phase, traffic in per_phase.items()
            for name, value in traffic.items()
        )
    )
