"""The plans the planner weighs: :class:`Candidate` and :func:`candidates`.

A candidate is one way to train the same model on the same graph:

* ``full``: full-graph training in one process
  (:class:`~strata.operators.trainers.FullGraphTrainer`);
* ``exact``: full-graph, partition-parallel on a gang of ``workers`` processes
  with a halo exchange every layer (the same gradients as ``full``);
* ``hongtu``: full-graph, chunked (``chunks`` per worker) with the host store,
  recompute/cache and deduplicated loading (the same gradients again, less
  memory per worker);
* ``sampled``: mini-batches of ``batch_size`` seeds over blocks sampled with
  ``fanouts`` (:class:`~strata.operators.trainers.SampledTrainer`); a different
  estimator of the gradient, so the planner takes it only where the job is a
  sampled one or no full-graph plan fits.

Examples:
    >>> Candidate(PlanKind.HONGTU, workers=2, chunks=4).label
    'hongtu K=2 M=4'
    >>> Candidate(PlanKind.SAMPLED, batch_size=1024, fanouts=(10, 5)).label
    'sampled b=1024 f=10,5'
    >>> [c.label for c in candidates(max_workers=2, chunks=(2,), sampled=None)]
    ['full', 'exact K=2', 'hongtu K=1 M=2', 'hongtu K=2 M=2']
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Candidate", "PlanKind", "candidates"]


class PlanKind(enum.Enum):
    """How a candidate trains."""

    FULL = "full"
    EXACT = "exact"
    HONGTU = "hongtu"
    SAMPLED = "sampled"

    @property
    def full_graph(self) -> bool:
        """One exact full-graph gradient step per epoch."""
        return self is not PlanKind.SAMPLED


@dataclass(frozen=True, slots=True)
class Candidate:
    """One plan (see the module docstring).

    Attributes:
        kind: how it trains.
        workers: gang size (1 for ``full`` and ``sampled``).
        chunks: HongTu chunks per worker (1 otherwise).
        batch_size: seeds per mini-batch (``sampled`` only).
        fanouts: sampled in-neighbours per layer (``sampled`` only).
    """

    kind: PlanKind
    workers: int = 1
    chunks: int = 1
    batch_size: int = 0
    fanouts: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """Short name for tables and logs (``exact K=2``)."""
        if self.kind is PlanKind.FULL:
            return "full"
        if self.kind is PlanKind.EXACT:
            return f"exact K={self.workers}"
        if self.kind is PlanKind.HONGTU:
            return f"hongtu K={self.workers} M={self.chunks}"
        fan = ",".join(str(f) for f in self.fanouts)
        return f"sampled b={self.batch_size} f={fan}"

    def to_dict(self) -> dict[str, object]:
        """JSON-able form."""
        return {
            "kind": self.kind.value,
            "workers": self.workers,
            "chunks": self.chunks,
            "batch_size": self.batch_size,
            "fanouts": list(self.fanouts),
            "label": self.label,
        }

    @staticmethod
    def from_dict(data: dict[str, object]) -> Candidate:
        """Inverse of :meth:`to_dict`."""
        fanouts = data.get("fanouts") or ()
        assert isinstance(fanouts, list | tuple)
        return Candidate(
            PlanKind(str(data["kind"])),
            int(str(data.get("workers", 1))),
            int(str(data.get("chunks", 1))),
            int(str(data.get("batch_size", 0))),
            tuple(int(f) for f in fanouts),
        )


def candidates(
    *,
    max_workers: int,
    chunks: Sequence[int] = (2, 4, 8),
    sampled: tuple[int, tuple[int, ...]] | None = None,
    batch_sizes: Sequence[int] = (),
) -> list[Candidate]:
    """Every plan worth costing.

    Args:
        max_workers: the largest gang (workers 1, 2, 4, ... up to it).
        chunks: HongTu chunk counts per worker.
        sampled: ``(batch_size, fanouts)`` of the job's sampling settings, or
            None to leave sampled plans out.
        batch_sizes: further batch sizes to try with the same fan-outs.
    """
    gangs = [k for k in (2, 4, 8, 16) if k <= max_workers]
    plans = [Candidate(PlanKind.FULL)]
    plans += [Candidate(PlanKind.EXACT, workers=k) for k in gangs]
    plans += [
        Candidate(PlanKind.HONGTU, workers=k, chunks=m)
        for k in [1, *gangs]
        for m in chunks
    ]
    if sampled is not None:
        size, fanouts = sampled
        for b in dict.fromkeys([size, *batch_sizes]):
            plans.append(Candidate(PlanKind.SAMPLED, batch_size=b, fanouts=fanouts))
    return plans
