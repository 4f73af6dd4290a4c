"""Pick a training plan: cost every candidate, keep those that fit, take the fastest.

:func:`plan_training` is the planner (UniAP's idea on one machine: a cost model
calibrated on measured kernels chooses among execution plans of the same
training). For a trainer's input and its :class:`~strata.operators.trainers.TrainConfig`
it

1. summarises the graph (:func:`~strata.operators.planning.workload.graph_stats`);
2. for every gang size, runs the trainer's own level-1 partition (same method,
   same seed) to get each worker's rows, edges and halo, and for HongTu the
   trainer's own chunk plan (expansion, host and peer rows, arena peak);
3. predicts each candidate's epoch time and peak memory
   (:func:`~strata.operators.planning.cost_model.predict`);
4. rejects candidates over the memory budget, and sampled candidates for a
   full-graph job (a different gradient estimator) unless no full-graph plan
   fits; the fastest remaining one is chosen.

:class:`PlanReport` holds every prediction, the choice, each rejection's reason
and a paragraph saying why.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from strata.operators.planning.calibration import (
    Calibration,
    current_rss,
    load_calibration,
)
from strata.operators.planning.candidates import PlanKind, candidates
from strata.operators.planning.cost_model import (
    CostInputs,
    HongTuShape,
    PartShape,
    Prediction,
    gang_refusal,
    predict,
)
from strata.operators.planning.workload import GraphStats, graph_stats
from strata.operators.trainers.config import TrainConfig

__all__ = ["JobKind", "PlanReport", "PlannerConfig", "choose", "plan_training"]

_log = logging.getLogger(__name__)
_MB = 1 << 20


class JobKind(enum.Enum):
    """What the job trains: exact full-graph gradients, or sampled mini-batches."""

    FULL_GRAPH = "full-graph"
    SAMPLED = "sampled"


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    """What the planner may choose from.

    Attributes:
        memory_budget: bytes all the plan's processes may hold at their peak
            (None: this process's resident bytes plus the available RAM).
        max_workers: the largest gang (None: the core count).
        chunks: HongTu chunk counts per worker.
        batch_sizes: batch sizes tried besides the job's (sampled plans).
        chunk_plans: build HongTu's own chunk plans (exact figures; slower on
            big graphs) rather than estimating them.
    """

    memory_budget: int | None = None
    max_workers: int | None = None
    chunks: tuple[int, ...] = (2, 4)
    batch_sizes: tuple[int, ...] = ()
    chunk_plans: bool = True


@dataclass(frozen=True, slots=True)
class PlanReport:
    """The planner's answer.

    Attributes:
        stats: the graph.
        predictions: every candidate's prediction, in candidate order.
        chosen: the chosen plan's prediction.
        rejected: per candidate label, why it was not chosen.
        budget_bytes: the memory budget applied.
        why: a paragraph explaining the choice.
        calibration: the machine key of the rates used.
    """

    stats: GraphStats
    predictions: list[Prediction]
    chosen: Prediction
    rejected: dict[str, str]
    budget_bytes: int
    why: str
    calibration: str = ""
    notes: list[str] = field(default_factory=list)

    def runner_up(self) -> Prediction | None:
        """The fastest rejected candidate that fits, of the chosen one's family.

        Full-graph or sampled, as the chosen one, if one of that family fits.
        """
        others = [
            p
            for p in self.predictions
            if p is not self.chosen and p.feasible and p.peak_bytes <= self.budget_bytes
        ]
        family = self.chosen.candidate.kind.full_graph
        same = [p for p in others if p.candidate.kind.full_graph == family]
        return min(same or others, key=lambda p: p.epoch_s, default=None)

    def table(self) -> str:
        """The candidates as a text table (plan, epoch s, peak MB, fits, chosen)."""
        rows = [("plan", "epoch s", "train s", "eval s", "peak MB", "fits", "")]
        for p in self.predictions:
            fits = p.feasible and p.peak_bytes <= self.budget_bytes
            rows.append(
                (
                    p.candidate.label,
                    f"{p.epoch_s:.4f}" if p.feasible else "-",
                    f"{p.train_s:.4f}" if p.feasible else "-",
                    f"{p.eval_s:.4f}" if p.feasible else "-",
                    f"{p.peak_bytes / _MB:,.0f}" if p.feasible else "-",
                    "yes" if fits else "no",
                    "<- chosen"
                    if p is self.chosen
                    else self.rejected.get(p.candidate.label, ""),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        lines = []
        for r in rows:
            cells = [
                r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i])
                for i in range(len(widths))
            ]
            lines.append("  ".join(cells) + ("  " + r[-1] if r[-1] else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "graph": self.stats.describe(),
            "budget_bytes": self.budget_bytes,
            "chosen": self.chosen.candidate.label,
            "why": self.why,
            "rejected": self.rejected,
            "calibration": self.calibration,
            "predictions": [p.to_dict() for p in self.predictions],
            "notes": self.notes,
        }


def default_budget() -> int:
    """This process's resident bytes plus the RAM still available."""
    import psutil

    return current_rss() + int(psutil.virtual_memory().available)


def part_shapes(
    data: Any, train: TrainConfig, workers: Sequence[int], seed: int = 0
) -> dict[int, list[PartShape]]:
    """Each gang size's worker shares, from the trainer's own level-1 partition."""
    from strata.operators.trainers.data import as_training_data
    from strata.operators.trainers.distributed.config import Level1
    from strata.operators.trainers.distributed.trainer import level1_partition
    from strata.partition import build_book

    graph = as_training_data(data, "strata plan").graph
    in_degree = np.asarray(graph.in_degree())
    shapes: dict[int, list[PartShape]] = {}
    for k in workers:
        part = level1_partition(graph, k, Level1.METIS, seed)
        book = build_book(graph, part)
        owner = np.asarray(part.assignment)
        shapes[k] = [
            PartShape(
                int(np.count_nonzero(owner == g)),
                int(in_degree[owner == g].sum()),
                int(book.halo(g).size),
            )
            for g in range(k)
        ]
    return shapes


def hongtu_shapes(
    data: Any, train: TrainConfig, plans: Sequence[tuple[int, int]], seed: int = 0
) -> dict[tuple[int, int], HongTuShape]:
    """Each ``(K, M)``'s figures from the chunked trainer's own plan."""
    from strata.operators.trainers.config import build_model
    from strata.operators.trainers.data import as_training_data
    from strata.operators.trainers.distributed.chunked.plan import build_chunk_plan
    from strata.operators.trainers.distributed.config import (
        DistributedConfig,
        GangConfig,
        HongTu,
        Level1,
    )
    from strata.operators.trainers.distributed.local_graph import PropagationGraph
    from strata.operators.trainers.distributed.programs import program_for
    from strata.operators.trainers.distributed.trainer import level1_partition

    training = as_training_data(data, "strata plan")
    graph = training.graph
    model = build_model(train, training.num_features, training.num_classes)
    program = program_for(model)
    prop = PropagationGraph.build(graph, program.aggregation)
    shapes: dict[tuple[int, int], HongTuShape] = {}
    parts: dict[int, Any] = {}
    for k, m in plans:
        if k not in parts:
            parts[k] = level1_partition(graph, k, Level1.METIS, seed)
        dist = DistributedConfig(gang=GangConfig(workers=k), mode=HongTu(chunks=m))
        built = build_chunk_plan(graph, parts[k], prop, model, program, dist)
        s = built.summary
        store = sum(
            int(np.prod(shape)) * dtype.itemsize
            for shape, dtype in built.host_layout.values()
        )
        shapes[(k, m)] = HongTuShape(
            s.alpha, s.host_rows, s.peer_rows, max(s.modelled_peak_bytes), store
        )
    return shapes


def plan_training(
    data: Any,
    train: TrainConfig,
    *,
    kind: JobKind = JobKind.FULL_GRAPH,
    sampled: tuple[int, tuple[int, ...]] | None = None,
    planner: PlannerConfig | None = None,
    calibration: Calibration | None = None,
    rss_bytes: int | None = None,
) -> PlanReport:
    """Cost every candidate plan for training ``train`` on ``data``; choose one.

    Args:
        data: the trainer's input (a dataset payload, dataset, or training data).
        train: the model and training settings.
        kind: what the job trains (sampled plans are chosen for sampled jobs,
            or when no full-graph plan fits).
        sampled: the job's ``(batch_size, fanouts)`` (None: the sampled
            trainer's defaults).
        planner: the candidates and the budget.
        calibration: the rates (None: the cached calibration, measured on
            first use).
        rss_bytes: resident bytes of the training process with its data
            loaded (None: this process's).
    """
    from strata.operators.trainers.sampled import SamplingConfig

    planner = planner or PlannerConfig()
    if sampled is None:
        defaults = SamplingConfig()
        sampled = (defaults.batch_size, defaults.fanouts)
    if len(sampled[1]) != train.model.num_layers:
        sampled = (sampled[0], tuple([10] * train.model.num_layers))
    cal = calibration or load_calibration()
    stats = graph_stats(data, sampled[1])
    max_workers = planner.max_workers or cal.cores
    plans = candidates(
        max_workers=max_workers,
        chunks=planner.chunks,
        sampled=sampled,
        batch_sizes=planner.batch_sizes,
    )
    gangs = sorted({c.workers for c in plans if c.kind is PlanKind.EXACT})
    model_ok = gang_refusal(train.model, stats) is None
    if gangs and model_ok and cal.gang is None:
        cal = load_calibration(gang=True)
    notes: list[str] = []
    parts = part_shapes(data, train, gangs, train.seed) if model_ok else {}
    hongtu: dict[tuple[int, int], HongTuShape] = {}
    if model_ok and planner.chunk_plans:
        keys = [(c.workers, c.chunks) for c in plans if c.kind is PlanKind.HONGTU]
        try:
            hongtu = hongtu_shapes(data, train, keys, train.seed)
        except Exception as error:  # the chunk plan refused: estimate instead
            notes.append(f"HongTu chunk plans unavailable ({error}); estimated")
    inputs = CostInputs(
        stats,
        train.model,
        cal,
        threads=train.threads,
        rss_bytes=current_rss() if rss_bytes is None else rss_bytes,
        parts=parts,
        hongtu=hongtu,
    )
    predictions = [predict(c, inputs) for c in plans]
    budget = planner.memory_budget or default_budget()
    chosen, rejected = choose(predictions, budget, kind)
    return PlanReport(
        stats,
        predictions,
        chosen,
        rejected,
        budget,
        explain(chosen, predictions, rejected, budget, kind, cal),
        cal.key,
        notes,
    )


def choose(
    predictions: Sequence[Prediction], budget: int, kind: JobKind
) -> tuple[Prediction, dict[str, str]]:
    """The fastest candidate that runs and fits, preferring the job's kind.

    Returns:
        The choice, and for every other candidate why it was not chosen.

    Raises:
        OperatorError: when no candidate fits the budget (naming the smallest).
    """
    from strata.operators.errors import OperatorError

    rejected: dict[str, str] = {}
    fits: list[Prediction] = []
    for p in predictions:
        label = p.candidate.label
        if not p.feasible:
            rejected[label] = f"cannot run: {p.reason}"
        elif p.peak_bytes > budget:
            rejected[label] = (
                f"over budget: {p.peak_bytes / _MB:,.0f} MB > {budget / _MB:,.0f} MB"
            )
        else:
            fits.append(p)
    if not fits:
        runnable = [p for p in predictions if p.feasible]
        smallest = min(runnable, key=lambda p: p.peak_bytes, default=None)
        got = (
            f"{smallest.candidate.label} at {smallest.peak_bytes / _MB:,.0f} MB"
            if smallest
            else "no runnable plan"
        )
        raise OperatorError.build(
            "memory_budget",
            "strata plan",
            f"a plan within {budget / _MB:,.0f} MB",
            f"the smallest predicted peak: {got}",
            "raise --memory-budget, add workers or chunks, or sample",
        )
    wanted = [
        p for p in fits if p.candidate.kind.full_graph == (kind is JobKind.FULL_GRAPH)
    ]
    pool = wanted or fits
    chosen = min(pool, key=lambda p: p.epoch_s)
    for p in fits:
        if p is chosen:
            continue
        if p not in pool:
            rejected[p.candidate.label] = (
                "sampled: another gradient estimator than the job's full-graph one"
                if kind is JobKind.FULL_GRAPH
                else "full-graph: the job trains on sampled mini-batches"
            )
        else:
            rejected[p.candidate.label] = (
                f"slower: {p.epoch_s / chosen.epoch_s:.2f}x the chosen epoch"
            )
    return chosen, rejected


def explain(
    chosen: Prediction,
    predictions: Sequence[Prediction],
    rejected: dict[str, str],
    budget: int,
    kind: JobKind,
    cal: Calibration,
) -> str:
    """One paragraph: what was chosen, what it costs, why the others lost."""
    c = chosen.candidate
    parts = sorted(chosen.seconds.items(), key=lambda kv: -kv[1])
    top = ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in parts[:3] if v > 0)
    text = [
        f"Chose {c.label}: predicted {chosen.epoch_s:.3f} s per epoch "
        f"({chosen.train_s:.3f} s training, {chosen.eval_s:.3f} s evaluation; "
        f"the training step is mostly {top}) and {chosen.peak_bytes / _MB:,.0f} MB "
        f"at peak, within the {budget / _MB:,.0f} MB budget."
    ]
    over = [label for label, why in rejected.items() if why.startswith("over")]
    if over:
        text.append(f"Over the budget: {', '.join(over)}.")
    gangs = [
        p
        for p in predictions
        if p.candidate.kind in (PlanKind.EXACT, PlanKind.HONGTU) and p.feasible
    ]
    if gangs and c.kind is PlanKind.FULL:
        best = min(gangs, key=lambda p: p.epoch_s)
        extra = {
            k: v for k, v in best.seconds.items() if k in ("halo", "transfer", "steps")
        }
        moved = sum(extra.values())
        text.append(
            f"The best gang plan, {best.candidate.label}, is predicted at "
            f"{best.epoch_s:.3f} s ({best.epoch_s / chosen.epoch_s:.2f}x): on "
            f"{cal.cores} cores its workers split the same cores, and it adds "
            f"{moved * 1000:.1f} ms of halo exchange and transfers per step and "
            f"{(best.peak_bytes - chosen.peak_bytes) / _MB:,.0f} MB for the worker "
            "processes."
        )
    sampled = [p for p in predictions if p.candidate.kind is PlanKind.SAMPLED]
    if sampled and kind is JobKind.FULL_GRAPH and c.kind.full_graph:
        s = min(sampled, key=lambda p: p.epoch_s)
        text.append(
            f"Sampled training ({s.candidate.label}) would take {s.epoch_s:.3f} s "
            "per epoch but estimates the gradient from mini-batches, so it is "
            "chosen only when no full-graph plan fits."
        )
    elif c.kind is PlanKind.SAMPLED and kind is JobKind.FULL_GRAPH:
        text.append("No full-graph plan fits the budget, so sampled training it is.")
    return " ".join(text)
