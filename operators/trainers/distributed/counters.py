"""What a distributed worker moved: bytes and rows by epoch, phase, layer and peer.

Every transfer is counted at its call site (payload ``rows * width * itemsize``,
``hongtu.md`` §3.8), never inferred afterwards, so a counter can be checked
against the plan it executes. A :class:`TransferCounters` keeps the current
epoch's counts keyed by ``(phase, layer, name, peer)``:

* ``phase``: ``"fwd"``, ``"bwd"`` (training), ``"eval"`` (evaluation passes) or
  ``"setup"`` (once per run: features to the device, plan index lists);
* ``layer``: 1..L for per-layer traffic, 0 for the rest (gradient all-reduce);
* ``peer``: the other worker of a device-to-device transfer, or -1.

:meth:`TransferCounters.end_epoch` closes an epoch: its totals become one entry of
:attr:`TransferCounters.epochs`, and are also added to the gang's per-worker
metrics (``ctx.metrics``) as ``"<phase>.<name>"`` counters, so the engine's run
report shows them.

Names used by the trainers: ``h2d_bytes``/``h2d_rows`` (plan loads from the host
store), ``d2h_bytes`` (outputs and gradient flushes), ``peer_send_bytes``,
``peer_recv_bytes``, ``peer_send_rows``, ``peer_recv_rows``, ``reuse_rows``,
``halo_send_rows``/``halo_recv_rows``/``halo_send_bytes``/``halo_recv_bytes``
(partition-parallel halo exchange), ``grad_h2d_bytes`` (output gradients read),
``cache_h2d_bytes``/``cache_d2h_bytes``, ``topo_h2d_bytes``, ``allreduce_bytes``.

Examples:
    >>> c = TransferCounters()
    >>> c.add("h2d_bytes", 400, phase="fwd", layer=1)
    >>> c.add("peer_send_bytes", 80, phase="fwd", layer=1, peer=1)
    >>> c.add("peer_send_bytes", 40, phase="bwd", layer=1, peer=1)
    >>> c.total("peer_send_bytes"), c.total("peer_send_bytes", phase="fwd")
    (120, 80)
    >>> c.end_epoch()["fwd.h2d_bytes"]
    400
    >>> c.total("h2d_bytes"), c.epoch_total(0, "h2d_bytes")
    (0, 400)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

Key = tuple[str, int, str, int]


class TransferCounters:
    """One worker's transfer counts (see the module docstring).

    Attributes:
        epochs: per closed epoch, ``{"<phase>.<name>": total}``.
        layers: per closed epoch, ``{"<phase>.l<layer>.<name>": total}``.
    """

    def __init__(self) -> None:
        self._now: defaultdict[Key, int] = defaultdict(int)
        self.epochs: list[dict[str, int]] = []
        self.layers: list[dict[str, int]] = []

    def add(
        self, name: str, amount: int, *, phase: str, layer: int = 0, peer: int = -1
    ) -> None:
        """Count ``amount`` under ``name`` in the current epoch."""
        self._now[(phase, layer, name, peer)] += int(amount)

    def total(
        self,
        name: str,
        *,
        phase: str | None = None,
        layer: int | None = None,
        peer: int | None = None,
    ) -> int:
        """Sum of ``name`` in the current epoch, optionally for one phase/layer/peer."""
        return sum(
            value
            for (p, lay, n, q), value in self._now.items()
            if n == name
            and (phase is None or p == phase)
            and (layer is None or lay == layer)
            and (peer is None or q == peer)
        )

    def epoch_total(self, epoch: int, name: str, phase: str | None = None) -> int:
        """Sum of ``name`` over a closed epoch (all phases unless one is named)."""
        record = self.epochs[epoch]
        if phase is not None:
            return record.get(f"{phase}.{name}", 0)
        return sum(v for k, v in record.items() if k.split(".", 1)[1] == name)

    def end_epoch(self, metrics: Any = None) -> dict[str, int]:
        """Close the epoch; return its ``"<phase>.<name>"`` totals.

        Args:
            metrics: a gang ``WorkerMetrics`` to add the totals to (optional).
        """
        totals: defaultdict[str, int] = defaultdict(int)
        per_layer: defaultdict[str, int] = defaultdict(int)
        for (phase, layer, name, _), value in self._now.items():
            totals[f"{phase}.{name}"] += value
            per_layer[f"{phase}.l{layer}.{name}"] += value
        record = dict(sorted(totals.items()))
        self.epochs.append(record)
        self.layers.append(dict(sorted(per_layer.items())))
        if metrics is not None:
            for key, value in record.items():
                metrics.add(key, value)
        self._now.clear()
        return record

    def snapshot(self) -> dict[str, Any]:
        """Everything counted, as JSON-able data (closed epochs only)."""
        return {"epochs": list(self.epochs), "layers": list(self.layers)}
