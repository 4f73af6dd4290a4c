"""Run a plan: its trainer, a job's training input, and measured epochs.

* :func:`trainer_for_plan`: the training step a :class:`Candidate` stands for;
* :func:`job_training` / :func:`training_input`: a job's config and its
  training step's input, by running the batch steps upstream of the step that
  trains (the job's own loading and task steps, nothing else);
* :func:`measure_plan`: train a plan for a few epochs in a fresh process and
  report its epoch seconds and peak resident memory, the figures the cost model
  predicts (``python -m strata.operators.planning.runner`` is that process).

Peak memory is ``VmHWM`` of the training process (reset after the data loaded,
with ``/proc/self/clear_refs``, so loading's transient copies do not count)
plus each gang worker's peak RSS.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strata.engine import Operator
from strata.operators.errors import OperatorError
from strata.operators.planning.candidates import Candidate, PlanKind
from strata.operators.trainers.config import TrainConfig

__all__ = [
    "JobTraining",
    "Measurement",
    "job_training",
    "measure_plan",
    "trainer_for_plan",
    "training_input",
]


def trainer_for_plan(
    candidate: Candidate, train: TrainConfig, sampling: Any = None
) -> Operator[Any, Any]:
    """The training step that runs ``candidate`` with ``train``'s settings.

    Args:
        candidate: the plan.
        train: model, optimiser, epochs, seed.
        sampling: the job's :class:`~strata.operators.trainers.SamplingConfig`
            (sampled plans keep its prefetch and evaluation settings).
    """
    from strata.operators.trainers import FullGraphTrainer, SampledTrainer
    from strata.operators.trainers.sampled import SamplingConfig

    kind = candidate.kind
    if kind is PlanKind.FULL:
        return FullGraphTrainer(train)
    if kind is PlanKind.SAMPLED:
        base = sampling or SamplingConfig()
        chosen = dataclasses.replace(
            base, batch_size=candidate.batch_size, fanouts=candidate.fanouts
        )
        return SampledTrainer(train, chosen)
    from strata.operators.trainers.distributed import (
        DistributedConfig,
        DistributedTrainer,
        Exact,
        GangConfig,
        HongTu,
    )

    mode = Exact() if kind is PlanKind.EXACT else HongTu(chunks=candidate.chunks)
    dist = DistributedConfig(gang=GangConfig(workers=candidate.workers), mode=mode)
    return DistributedTrainer(train, dist)


@dataclass(frozen=True, slots=True)
class JobTraining:
    """A job's training step, as the planner reads it.

    Attributes:
        step_id: the training step's id.
        train: its model and training settings.
        sampling: its sampling settings (sampled trainers), else None.
        sampled: whether the job trains on sampled mini-batches.
        workers: the gang size the job asked for (1: one process).
        pipeline: the job's pipeline.
    """

    step_id: str
    train: TrainConfig
    sampling: Any
    sampled: bool
    workers: int
    pipeline: Any


def job_training(job: str, assignments: Sequence[str] = ()) -> JobTraining:
    """Load ``job`` with ``--set`` assignments and find its training step.

    Raises:
        OperatorError: a job without a trainer step.
    """
    from strata.engine.job import job_spec, load_job
    from strata.operators.trainers import SampledTrainer
    from strata.operators.trainers.base import Trainer

    module = load_job(job)
    spec = job_spec(module)
    pipeline = spec.build(**spec.arguments(assignments))
    for step in pipeline.steps:
        fn = step.fn
        inner = getattr(fn, "inner", None)  # a PlannedTrainer wraps the settings
        config = getattr(fn, "config", None)
        if isinstance(config, TrainConfig) and (
            isinstance(fn, Trainer) or hasattr(fn, "dist") or inner is not None
        ):
            sampled = isinstance(fn, SampledTrainer)
            dist = getattr(fn, "dist", None)
            workers = dist.gang.workers if dist is not None else 1
            workers = getattr(fn, "workers", workers)
            return JobTraining(
                step.id,
                config,
                getattr(fn, "sampling", None),
                sampled,
                workers,
                pipeline,
            )
    raise OperatorError.build(
        "job",
        "strata plan",
        "a job with a training step (a trainer operator)",
        job,
        "strata plan reads the trainer's config to plan its training",
    )


def training_input(training: JobTraining) -> Any:
    """Run the batch steps the training step depends on; return its input."""
    from strata.engine.pipeline import split_ref

    steps = {s.id: s for s in training.pipeline.steps}
    values: dict[str, Any] = {}

    def value(ref: str) -> Any:
        step_id, port = split_ref(ref)
        if step_id not in values:
            step = steps[step_id]
            args = [value(r) for r in step.inputs]
            values[step_id] = step.fn(*args, **dict(step.params))
        result = values[step_id]
        return result if port is None else result[port]

    (source,) = steps[training.step_id].inputs
    return value(source)


@dataclass(frozen=True, slots=True)
class Measurement:
    """A plan's measured epochs.

    Attributes:
        plan: the plan's label.
        epoch_s: median seconds of the epochs after the first (each epoch's
            record: training step and evaluation).
        epoch_spread: ``(min, max)`` of those epochs.
        train_s: median training-step seconds (evaluation excluded).
        eval_s: median evaluation seconds.
        peak_bytes: peak resident bytes: the training process since its data
            loaded, plus every gang worker's peak.
        rss_before_bytes: the training process's resident bytes before training.
        epochs: epoch seconds, every epoch.
    """

    plan: str
    epoch_s: float
    epoch_spread: tuple[float, float]
    train_s: float
    eval_s: float
    peak_bytes: int
    rss_before_bytes: int
    epochs: list[float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return dataclasses.asdict(self)


def _hwm() -> int:
    """``VmHWM`` of this process, bytes."""
    with open("/proc/self/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status")  # pragma: no cover


def _reset_hwm() -> None:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as handle:
        handle.write("5")


def run_measurement(
    job: str, assignments: Sequence[str], candidate: Candidate, epochs: int
) -> Measurement:
    """Train ``candidate`` for ``epochs`` epochs in this process and measure it."""
    from strata.operators.planning.calibration import current_rss
    from strata.operators.trainers.base import Trainer

    training = job_training(job, assignments)
    data = training_input(training)
    train = dataclasses.replace(
        training.train,
        epochs=epochs,
        patience=0,
        checkpoint_dir=None,
        resume=False,
        plan="fixed",
    )
    trainer = trainer_for_plan(candidate, train, training.sampling)
    _reset_hwm()
    before = current_rss()
    records: list[Any] = []
    if isinstance(trainer, Trainer):
        trainer.fit(data, on_epoch=records.append)
        peak = _hwm()
    else:  # a gang: its result carries the records and every worker's peak
        result = trainer.fit(data)  # type: ignore[attr-defined]
        peak = _hwm()
        records = list(result.history)
        peak += sum(int(w["peak_rss_bytes"]) for w in result.report["per_worker"])
    seconds = [r.seconds for r in records]
    later = seconds[1:] or seconds
    return Measurement(
        candidate.label,
        statistics.median(later),
        (min(later), max(later)),
        statistics.median([r.seconds - r.eval_s for r in records[1:] or records]),
        statistics.median([r.eval_s for r in records[1:] or records]),
        peak,
        before,
        seconds,
    )


def measure_plan(
    job: str,
    assignments: Sequence[str],
    candidate: Candidate,
    *,
    epochs: int = 5,
    timeout_s: float = 600.0,
) -> Measurement:
    """Train ``candidate`` in a fresh process for ``epochs`` epochs; measure it.

    Raises:
        OperatorError: the run failed (its last lines of output are named).
    """
    request = {
        "job": job,
        "set": list(assignments),
        "plan": candidate.to_dict(),
        "epochs": epochs,
    }
    out = subprocess.run(
        [sys.executable, "-m", "strata.operators.planning.runner", json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise OperatorError.build(
            "measure",
            "strata plan --measure",
            f"a run of {candidate.label}",
            f"exit {out.returncode}: {' | '.join(tail)}",
        )
    data = json.loads(lines[-1])
    data["epoch_spread"] = tuple(data["epoch_spread"])
    return Measurement(**data)


def main(argv: Sequence[str] | None = None) -> int:
    """The measuring process: one JSON request in, one JSON line out."""
    args = sys.argv[1:] if argv is None else list(argv)
    request: Mapping[str, Any] = json.loads(args[0])
    start = time.perf_counter()
    measured = run_measurement(
        request["job"],
        request["set"],
        Candidate.from_dict(request["plan"]),
        int(request["epochs"]),
    )
    print(
        f"measured {measured.plan} in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
    print(json.dumps(measured.to_dict()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
