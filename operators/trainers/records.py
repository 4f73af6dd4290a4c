"""Trainer output: an :class:`EpochRecord` per epoch, then a :class:`TrainResult`.

Both convert to plain dicts of JSON scalars (``to_dict``), which is what trainer
steps emit: the engine carries them on every executor and writes them into reports.
Timing fields (``seconds``, ``*_s``, ``seeds_per_s``) differ between runs; every
other field is a deterministic function of the data and the configuration (on CPU).

Examples:
    >>> record = EpochRecord(epoch=0, loss=1.9, train_accuracy=0.4, val_loss=1.8,
    ...                      val_accuracy=0.35, improved=True, seconds=0.01)
    >>> record.to_dict()["val_accuracy"]
    0.35
    >>> "seeds_per_s" in TIMING_KEYS
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strata.operators.trainers.metrics import SplitMetrics

#: Keys whose values are wall-clock measurements (they differ from run to run).
TIMING_KEYS = frozenset(
    {
        "seconds",
        "epoch_s",
        "train_s",
        "sample_s",
        "gather_s",
        "stall_s",
        "eval_s",
        "seeds_per_s",
        # a sampled gang's waits and phases (gang_outputs)
        "compute_s",
        "schedule_s",
        "trainer_stall_s",
        "recv_wait_s",
        "send_blocked_s",
    }
)


@dataclass(frozen=True, slots=True)
class EpochRecord:
    """Metrics of one epoch.

    Attributes:
        epoch: the epoch's index, from 0.
        loss: mean training loss of the epoch's steps (with dropout).
        train_accuracy: accuracy on the training nodes, in evaluation mode.
        val_loss: loss on the validation nodes.
        val_accuracy: accuracy on the validation nodes.
        improved: whether the monitored metric beat every earlier epoch.
        seconds: wall-clock seconds of the epoch (training and evaluation).
        seeds: training nodes processed (the training set size per epoch).
        batches: optimiser steps taken (1 for full-graph training).
        sample_s: seconds the prefetch thread spent sampling (sampled training).
        gather_s: seconds the prefetch thread spent gathering features.
        stall_s: seconds the training loop waited for the next batch.
        eval_s: seconds spent evaluating.
    """

    epoch: int
    loss: float
    train_accuracy: float
    val_loss: float
    val_accuracy: float
    improved: bool
    seconds: float
    seeds: int = 0
    batches: int = 1
    sample_s: float = 0.0
    gather_s: float = 0.0
    stall_s: float = 0.0
    eval_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The record as a dict of JSON scalars."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpochRecord:
        """Inverse of :meth:`to_dict` (e.g. from a checkpoint)."""
        return cls(**data)


@dataclass(frozen=True, slots=True)
class TrainResult:
    """The outcome of a training run.

    Attributes:
        epochs_run: epochs completed (resumed runs count earlier epochs too).
        best_epoch: the epoch whose monitored metric was best (-1 if none was).
        stopped_early: early stopping ended the run before ``epochs``.
        resumed_from: epochs already done when this run resumed (0: fresh run).
        train_accuracy: final accuracy on the training nodes.
        val_accuracy: final accuracy on the validation nodes.
        test_accuracy: final accuracy on the test nodes.
        val_loss: final validation loss.
        test_loss: final test loss.
        final_loss: training loss of the last epoch.
        train_s: wall-clock seconds of every epoch (a resumed run's include the
            epochs before the resume, as their records measured them).
        seeds_per_s: training nodes per second over every epoch's training.
        metrics: the task's named scores of the final weights, as
            ``val_<name>`` and ``test_<name>`` (link prediction: ``test_auc``,
            ``test_mrr``, ``test_hits@20``; regression: ``test_mse``, ...);
            :meth:`to_dict` puts them beside the other fields.
    """

    epochs_run: int
    best_epoch: int
    stopped_early: bool
    resumed_from: int
    train_accuracy: float
    val_accuracy: float
    test_accuracy: float
    val_loss: float
    test_loss: float
    final_loss: float
    train_s: float
    seeds_per_s: float
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The result as a dict of JSON scalars (``metrics`` flattened into it)."""
        data = asdict(self)
        data.update(data.pop("metrics"))
        return data

    @classmethod
    def from_history(
        cls,
        history: Sequence[EpochRecord],
        final: Mapping[str, SplitMetrics],
        *,
        best_epoch: int,
        stopped_early: bool,
        resumed_from: int = 0,
    ) -> TrainResult:
        """The result of a run: its epoch records and the final weights' metrics.

        ``train_s`` sums the epochs' seconds; ``seeds_per_s`` divides their
        seeds by their training seconds (evaluation excluded).
        """
        train_s = sum(r.seconds for r in history)
        busy = sum(r.seconds - r.eval_s for r in history)
        seeds = sum(r.seeds for r in history)
        return cls(
            epochs_run=len(history),
            best_epoch=best_epoch,
            stopped_early=stopped_early,
            resumed_from=resumed_from,
            train_accuracy=final["train"].accuracy,
            val_accuracy=final["val"].accuracy,
            test_accuracy=final["test"].accuracy,
            val_loss=final["val"].loss,
            test_loss=final["test"].loss,
            final_loss=history[-1].loss if history else math.nan,
            train_s=train_s,
            seeds_per_s=seeds / busy if busy > 0 else 0.0,
            metrics={
                f"{split}_{name}": value
                for split in ("val", "test")
                for name, value in final[split].scores.items()
            },
        )


def training_outputs(
    results: list[dict[str, Any]],
    epochs: list[dict[str, Any]],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Batch step: a trainer's result and epoch records as a job's ``outputs``.

    Args:
        results: the trainer's ``result`` port (one dict).
        epochs: the trainer's ``epochs`` port (one dict per epoch of the whole
            run: a resumed trainer emits the epochs before the resume too).
        extra: JSON scalars to add first (dataset, model, settings).

    Returns:
        ``extra``, then the :class:`TrainResult` fields, ``epoch_s`` (mean seconds
        per epoch), the total ``sample_s``, ``gather_s`` and ``stall_s`` when the
        trainer measured them, ``loss_curve`` (training loss per epoch, 4
        significant digits) and ``curves`` (``train_accuracy``, ``val_loss`` and
        ``val_accuracy`` per epoch, alike; None for NaN), all over every epoch of
        the run. ``strata plot`` draws them.

    Examples:
        >>> result = {"epochs_run": 2, "test_accuracy": 0.5}
        >>> records = [{"loss": 1.23456, "seconds": 0.5}, {"loss": 0.5, "seconds": 1.5}]
        >>> training_outputs([result], records, {"model": "gcn"})
        {'model': 'gcn', 'epochs_run': 2, 'test_accuracy': 0.5, 'epoch_s': 1.0, \
'loss_curve': [1.235, 0.5]}
    """
    (result,) = results
    outputs = dict(extra or {})
    outputs.update(result)
    seconds = [r["seconds"] for r in epochs]
    outputs["epoch_s"] = sum(seconds) / len(seconds) if seconds else 0.0
    for key in ("sample_s", "gather_s", "stall_s"):  # sampled training only
        total = sum(r.get(key, 0.0) for r in epochs)
        if total:
            outputs[key] = total
    outputs["loss_curve"] = [float(f"{r['loss']:.4g}") for r in epochs]
    curves = {
        name: [_rounded(r[name]) for r in epochs]
        for name in ("train_accuracy", "val_loss", "val_accuracy")
        if epochs and all(name in r for r in epochs)
    }
    if curves:
        outputs["curves"] = curves
    return outputs


def _rounded(value: float) -> float | None:
    """4 significant digits; None for NaN (JSON has no NaN, and NaN != NaN)."""
    return None if math.isnan(value) else float(f"{value:.4g}")
