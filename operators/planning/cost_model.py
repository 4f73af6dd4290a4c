"""Predicted epoch seconds and peak memory of a plan: :func:`predict`.

Time is operation counts (:mod:`strata.operators.planning.workload`) times this
machine's measured rates (:mod:`strata.operators.planning.calibration`):

* per layer, the forward SpMM at the width the layer aggregates at, the
  transposed SpMM in backward where a gradient needs it, every dense product
  forward and its one or two backward products, dropout's masks (drawn again
  in backward where the input needs a gradient), bias and activation passes,
  the fresh pages of every tensor over the allocator's heap limit; plus the
  epoch's fixed cost (loss, optimiser, Python);
* an epoch is one training step and one evaluation pass (forward only, no
  dropout), as the trainers' epoch records time it;
* SpMM and dropout run on numba's threads (every core), dense products and
  elementwise passes on torch's (the job's ``threads``);
* a gang worker runs its part's share (its owned rows, its in-edges, its halo
  rows as extra sources; always aggregate-first, as the layer programs do) on
  ``cores / K`` threads, slowed by ``K / cores`` when oversubscribed; it adds
  the halo rows' bytes (forward and backward) at the measured all-to-all
  bandwidth and a gang epoch's measured fixed cost;
* HongTu adds the bytes its own load plan moves (rows loaded and copied, the
  cached aggregates written and read) at the rate measured for that on a gang
  of two;
* sampled training repeats a batch's step (blocks sized from the fan-outs and
  the in-degree distribution) and overlaps sampling and gathering in the
  prefetch thread when a core is free.

Peak memory is the resident memory of the training processes at their peak:
the process as it stands with the data loaded (measured by the caller), plus
the trainer's graph caches (GCN's self-loop graph and the transpose backward
uses), model and optimiser state, what autograd keeps for backward, and the
largest transient of the backward pass; a gang adds every worker's measured
base (a forked interpreter with torch, kernels and collectives loaded), the
shared-memory segment it maps and its tensors, and the parent's setup (the
arrays it builds and copies into the segment); HongTu's workers use the
trainer's own modelled arena peak, plus its host store.

Examples:
    >>> from strata.operators.planning.calibration import Calibration, KernelRates
    >>> from strata.operators.planning.candidates import Candidate, PlanKind
    >>> from strata.operators.trainers import ModelConfig
    >>> spmm = {8: 2e-9, 128: 1.4e-8}
    >>> rates = KernelRates(spmm, spmm, spmm, spmm, {"16x8": 1e-10},
    ...     {"16x8": 1e-10}, 1e-9, 1e-9, 1e-10, 1e-8)
    >>> cal = Calibration("k", 2, {1: rates, 2: rates}, {1: 1e-3, 2: 1e-3},
    ...     {1: 5e-4, 2: 5e-4}, 300 << 20)
    >>> stats = GraphStats("g", 1000, 10000, 0, 16, 8, 500, 88008, 64000,
    ...     {-1: 10.0}, 30)
    >>> inputs = CostInputs(stats, ModelConfig("gcn", hidden=16), cal, threads=1,
    ...     rss_bytes=400 << 20)
    >>> p = predict(Candidate(PlanKind.FULL), inputs)
    >>> 0 < p.epoch_s < 0.1, p.peak_bytes > 400 << 20
    (True, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from strata.operators.planning.calibration import (
    HEAP_LIMIT,
    Calibration,
    GangRates,
    KernelRates,
)
from strata.operators.planning.candidates import Candidate, PlanKind
from strata.operators.planning.shapes import ModelShape, model_shape
from strata.operators.planning.workload import (
    GraphStats,
    LayerCounts,
    LayerSizes,
    epoch_counts,
    layer_counts,
    widths,
)
from strata.operators.trainers.config import ModelConfig

__all__ = ["CostInputs", "PartShape", "Prediction", "gang_refusal", "predict"]

_B = 4  # float32


@dataclass(frozen=True, slots=True)
class PartShape:
    """One gang worker's share of the graph (from the level-1 partition).

    Attributes:
        nodes: rows it owns.
        edges: in-edges of its rows.
        halo: rows it reads from other workers (sources it does not own).
    """

    nodes: int
    edges: int
    halo: int


@dataclass(frozen=True, slots=True)
class HongTuShape:
    """What the trainer's own chunk plan says about a HongTu candidate.

    Attributes:
        alpha: expansion, sum of chunk sources over N.
        host_rows: rows loaded from the host per layer (all workers).
        peer_rows: rows copied between workers per layer.
        arena_peak_bytes: the largest modelled per-worker device peak.
        host_store_bytes: the host store's bytes (activations, caches).
    """

    alpha: float
    host_rows: int
    peer_rows: int
    arena_peak_bytes: int
    host_store_bytes: int


@dataclass(frozen=True, slots=True)
class CostInputs:
    """Everything :func:`predict` reads besides the candidate.

    Attributes:
        stats: the graph.
        model: the model config.
        calibration: this machine's rates.
        threads: torch threads of a single-process trainer (0: every core).
        rss_bytes: resident bytes of the training process once its data is
            loaded (what the peak builds on).
        parts: per gang size, the workers' shares (None: estimated).
        hongtu: per ``(K, M)``, the trainer's chunk-plan figures.
        eval_every_epoch: an epoch includes one evaluation pass.
    """

    stats: GraphStats
    model: ModelConfig
    calibration: Calibration
    threads: int
    rss_bytes: int
    parts: dict[int, list[PartShape]] = field(default_factory=dict)
    hongtu: dict[tuple[int, int], HongTuShape] = field(default_factory=dict)
    eval_every_epoch: bool = True


@dataclass(frozen=True, slots=True)
class Prediction:
    """A candidate's predicted cost.

    Attributes:
        candidate: the plan.
        train_s: seconds of the training step(s) of one epoch.
        eval_s: seconds of the epoch's evaluation pass.
        peak_bytes: peak resident bytes of all its processes together.
        seconds: the training step's seconds by kind of work.
        memory: the peak's bytes by part.
        feasible: whether the plan can run (model support); the memory budget
            is the planner's check.
        reason: why it cannot run.
    """

    candidate: Candidate
    train_s: float
    eval_s: float
    peak_bytes: int
    seconds: dict[str, float]
    memory: dict[str, int]
    feasible: bool = True
    reason: str = ""

    @property
    def epoch_s(self) -> float:
        """Training step plus evaluation: what an epoch record's ``seconds`` says."""
        return self.train_s + self.eval_s

    def to_dict(self) -> dict[str, object]:
        """JSON-able form."""
        return {
            "plan": self.candidate.to_dict(),
            "epoch_s": self.epoch_s,
            "train_s": self.train_s,
            "eval_s": self.eval_s,
            "peak_bytes": self.peak_bytes,
            "seconds": self.seconds,
            "memory": self.memory,
            "feasible": self.feasible,
            "reason": self.reason,
        }


# --------------------------------------------------------------------- passes
def pass_seconds(
    counts: Sequence[LayerCounts],
    sparse: KernelRates,
    dense: KernelRates,
    *,
    training: bool,
) -> dict[str, float]:
    """Seconds of one pass by kind of work (``spmm``, ``dense``, ``dropout``, ...).

    Args:
        counts: the pass's per-layer counts.
        sparse: rates of numba's kernels (SpMM, dropout) at their threads.
        dense: rates of torch's kernels at torch's threads.
        training: forward and backward (else forward only).
    """
    out = {"spmm": 0.0, "dense": 0.0, "dropout": 0.0, "elementwise": 0.0}
    out["fresh_pages"] = 0.0
    for c in counts:
        big = sum(o for o in c.outputs if o * _B > HEAP_LIMIT) * _B
        out["fresh_pages"] += (2 if training else 1) * big * dense.fresh
        rows = c.src_rows
        out["spmm"] += sparse.spmm(c.spmm_edges, c.spmm_width, nodes=rows)
        if training and c.spmm_backward:
            out["spmm"] += sparse.spmm(
                c.spmm_edges, c.spmm_width, nodes=rows, backward=True
            )
        for (rows, i, o), k in zip(c.linear, c.linear_backward, strict=True):
            out["dense"] += rows * i * o * dense.linear(i, o)
            if training:
                out["dense"] += k * rows * i * o * dense.linear(i, o, backward=True)
        out["dropout"] += c.dropout_elements * sparse.dropout
        passes = 2 if training else 1
        ew = c.elementwise + c.edge_elements
        out["elementwise"] += passes * ew * dense.elementwise
        if training and c.input_grad:  # backward draws the mask again
            out["dropout"] += c.dropout_elements * sparse.dropout
    return out


def _full_sizes(stats: GraphStats, layers: int) -> list[LayerSizes]:
    n = stats.num_nodes
    return [LayerSizes(n, n, stats.num_edges, stats.self_loops)] * layers


def _shape(model: ModelConfig, stats: GraphStats) -> ModelShape:
    return model_shape(model, stats.num_features, stats.num_classes)


def _state_bytes(model: ModelConfig, stats: GraphStats) -> int:
    """Parameters, their gradients, Adam's two moments, the best-epoch copy."""
    return _shape(model, stats).parameters * _B * 5


def _graph_cache_bytes(
    model: ModelConfig, stats: GraphStats, edges: int, nodes: int
) -> int:
    """The trainer's cached propagation graph and its transpose."""
    if _shape(model, stats).self_loops:
        edges = edges + nodes  # one self-loop per node
    # indices (int64) and values (float32) in CSR and transposed order, the
    # transpose's permutation (int64), and three int64 index pointers
    return edges * (8 + 4) * 2 + edges * 8 + 3 * (nodes + 1) * 8


def _transient_bytes(counts: Sequence[LayerCounts], rows: int) -> int:
    """The largest short-lived set: a layer's output gradient and input gradient."""
    return max(rows * (c.in_width + 2 * c.out_width) * _B for c in counts)


# ------------------------------------------------------------------ candidates
def predict(candidate: Candidate, inputs: CostInputs) -> Prediction:
    """The predicted epoch time and peak memory of ``candidate``."""
    kind = candidate.kind
    if kind in (PlanKind.EXACT, PlanKind.HONGTU):
        reason = gang_refusal(inputs.model, inputs.stats)
        if reason is not None:
            return _refused(candidate, reason)
    if kind is PlanKind.FULL:
        return _full(candidate, inputs)
    if kind is PlanKind.SAMPLED:
        return _sampled(candidate, inputs)
    return _gang(candidate, inputs)


def gang_refusal(model: ModelConfig, stats: GraphStats) -> str | None:
    """Why the partition-parallel trainers cannot run ``model`` (None: they can).

    They take layer stacks only, and refuse attention (an edge softmax needs
    every in-edge's score at once), as
    :func:`~strata.operators.layers.message_passing.message_passing_layer` does.
    """
    if model.module is not None:
        return "a user's module needs the single-device trainers"
    if _shape(model, stats).attention:
        return "attention layers need the single-device trainers"
    return None


def _refused(candidate: Candidate, reason: str) -> Prediction:
    return Prediction(candidate, math.inf, 0.0, 0, {}, {}, False, reason)


def _single_rates(inputs: CostInputs) -> tuple[KernelRates, KernelRates, int]:
    cal = inputs.calibration
    threads = inputs.threads or cal.cores
    return cal.at(cal.cores), cal.at(threads), threads


def _full(candidate: Candidate, inputs: CostInputs) -> Prediction:
    stats, model = inputs.stats, inputs.model
    sparse, dense, threads = _single_rates(inputs)
    sizes = _full_sizes(stats, model.num_layers)
    train, evals = epoch_counts(
        model,
        stats.num_features,
        stats.num_classes,
        sizes,
        evaluate=inputs.eval_every_epoch,
    )
    fixed_train, fixed_eval = inputs.calibration.fixed(threads)
    seconds = pass_seconds(train, sparse, dense, training=True)
    seconds["fixed"] = fixed_train
    eval_s = sum(pass_seconds(evals, sparse, dense, training=False).values())
    eval_s += fixed_eval
    n = stats.num_nodes
    memory = {
        "process": inputs.rss_bytes,
        "graph_cache": _graph_cache_bytes(model, stats, stats.num_edges, n),
        "state": _state_bytes(model, stats),
        "kept": sum(c.kept_elements for c in train) * _B,
        "transient": _transient_bytes(train, n),
    }
    return Prediction(
        candidate,
        sum(seconds.values()),
        eval_s if inputs.eval_every_epoch else 0.0,
        sum(memory.values()),
        seconds,
        memory,
    )


def _estimated_parts(stats: GraphStats, k: int) -> list[PartShape]:
    """Equal shares with the halo of a random partition (no partition at hand)."""
    n, e = stats.num_nodes, stats.num_edges
    cut = e / k * (1 - 1 / k)
    halo = int(min(n - n / k, n * (1 - math.exp(-cut / max(n, 1)))))
    return [PartShape(n // k, e // k, halo)] * k


def _gang_rates(inputs: CostInputs, k: int) -> tuple[KernelRates, int, float]:
    cal = inputs.calibration
    per_worker = max(1, cal.cores // k)
    oversubscribed = max(1.0, k * per_worker / cal.cores)
    return cal.at(per_worker), per_worker, oversubscribed


def _segment_bytes(stats: GraphStats) -> int:
    """What the parent puts in shared memory: features, propagation graph, book."""
    edges = stats.num_edges + stats.num_nodes
    return stats.feature_bytes + edges * (8 + 4) + stats.num_nodes * 8 * 4


def _gang(candidate: Candidate, inputs: CostInputs) -> Prediction:
    stats, model, cal = inputs.stats, inputs.model, inputs.calibration
    k = candidate.workers
    parts = inputs.parts.get(k) or _estimated_parts(stats, k)
    rates, _, slow = _gang_rates(inputs, k)
    gang = cal.gang or GangRates(1e-3, 4 * rates.gather)
    dims = widths(model, stats.num_features, stats.num_classes)
    worst_train = worst_eval = 0.0
    parts_seconds: dict[str, float] = {}
    worst_memory = 0
    segment = _segment_bytes(stats)
    for part in parts:
        sizes = [LayerSizes(part.nodes + part.halo, part.nodes, part.edges)]
        sizes = sizes * model.num_layers
        args = (model, stats.num_features, stats.num_classes, sizes)
        train = layer_counts(*args, aggregate_first_only=True)
        evals = layer_counts(*args, training=False, aggregate_first_only=True)
        seconds = {
            key: value * slow
            for key, value in pass_seconds(train, rates, rates, training=True).items()
        }
        halo_bytes = sum(part.halo * d * _B for d in dims[:-1])
        seconds["halo"] = 2 * halo_bytes * gang.per_byte_s
        seconds["fixed"] = gang.epoch_fixed_s
        eval_s = sum(pass_seconds(evals, rates, rates, training=False).values())
        eval_s = eval_s * slow + halo_bytes * gang.per_byte_s + gang.eval_fixed_s
        if candidate.kind is PlanKind.HONGTU:
            seconds, eval_s = _hongtu_time(candidate, inputs, part, seconds, eval_s)
        if sum(seconds.values()) > worst_train:
            worst_train, parts_seconds = sum(seconds.values()), seconds
        worst_eval = max(worst_eval, eval_s)
        rows = part.nodes + part.halo
        tensors = (
            _graph_cache_bytes(model, stats, part.edges, rows)
            + _state_bytes(model, stats)
            + sum(c.kept_elements for c in train) * _B
            + _transient_bytes(train, rows)
        )
        if candidate.kind is PlanKind.HONGTU:
            tensors = _hongtu_tensors(candidate, inputs, tensors)
        # a worker maps the whole segment and touches most of its pages
        worker = gang.worker_rss_bytes + segment + tensors
        worst_memory = max(worst_memory, worker)
    # the parent builds every array in numpy before copying it into the segment
    # (features twice: float32 and the copy), and partitions the graph
    parent = 2 * segment + stats.feature_bytes + 2 * stats.num_edges * 8
    memory = {
        "process": inputs.rss_bytes,
        "parent_setup": parent,
        "workers": worst_memory * k,
    }
    shape = inputs.hongtu.get((k, candidate.chunks))
    if candidate.kind is PlanKind.HONGTU and shape is not None:
        memory["host_store"] = shape.host_store_bytes
    return Prediction(
        candidate,
        worst_train,
        worst_eval if inputs.eval_every_epoch else 0.0,
        sum(memory.values()),
        parts_seconds,
        memory,
    )


def _hongtu_time(
    candidate: Candidate,
    inputs: CostInputs,
    part: PartShape,
    seconds: dict[str, float],
    eval_s: float,
) -> tuple[dict[str, float], float]:
    """Add HongTu's moved bytes (its own load plan) at the measured rate."""
    stats, model, cal = inputs.stats, inputs.model, inputs.calibration
    k, m = candidate.workers, candidate.chunks
    shape = inputs.hongtu.get((k, m))
    dims = widths(model, stats.num_features, stats.num_classes)
    if shape is not None:
        rows = (shape.host_rows + shape.peer_rows) / k
    else:
        rows = (part.nodes + part.halo) * (1 + 0.25 * math.log2(max(m, 1)))
    moved = sum(rows * d * _B for d in dims[:-1])
    cached = sum(part.nodes * d * _B for d in dims[:-1])  # cache_aggregate
    gang = cal.gang or GangRates(1e-3, 1e-9, moved_s=1e-9, moved_eval_s=1e-9)
    out = dict(seconds)
    out["halo"] = 0.0
    out["transfer"] = (2 * moved + 2 * cached) * gang.moved_s
    eval_s += moved * gang.moved_eval_s
    return out, eval_s


def _hongtu_tensors(candidate: Candidate, inputs: CostInputs, exact: int) -> int:
    """A HongTu worker's tensors: the trainer's modelled arena peak."""
    shape = inputs.hongtu.get((candidate.workers, candidate.chunks))
    if shape is not None:
        return shape.arena_peak_bytes
    return exact // candidate.chunks


def block_sizes(
    stats: GraphStats, batch: int, fanouts: Sequence[int]
) -> list[LayerSizes]:
    """Expected block sizes of one batch, first layer first.

    From the seeds outward, layer ``l`` samples ``E[min(in_degree, f_l)]`` edges
    per destination; its sources are the destinations plus the distinct new
    nodes among the sampled ones (drawn uniformly: ``N (1 - exp(-e / N))``).
    """
    n = stats.num_nodes
    dst = float(min(batch, n))
    sizes: list[LayerSizes] = []
    for f in reversed(fanouts):
        per = stats.fanout_edges.get(f, stats.fanout_edges[-1])
        edges = dst * per
        fresh = n * (1 - math.exp(-edges / max(n, 1))) * (1 - dst / n)
        src = min(float(n), dst + fresh)
        sizes.append(LayerSizes(int(src), int(dst), int(edges)))
        dst = src
    return sizes[::-1]


def _sampled(candidate: Candidate, inputs: CostInputs) -> Prediction:
    stats, model, cal = inputs.stats, inputs.model, inputs.calibration
    if len(candidate.fanouts) != model.num_layers:
        return _refused(candidate, "one fan-out per layer needed")
    sparse, dense, threads = _single_rates(inputs)
    train_nodes = max(stats.train_nodes, 1)
    batches = math.ceil(train_nodes / candidate.batch_size)
    last = train_nodes - (batches - 1) * candidate.batch_size
    total: dict[str, float] = {}
    prepare = 0.0
    kept_peak = transient = block_bytes = 0
    fixed_train, fixed_eval = cal.fixed(threads)
    for size, count in ((candidate.batch_size, batches - 1), (last, 1)):
        if count <= 0:
            continue
        sizes = block_sizes(stats, size, candidate.fanouts)
        # every batch samples new blocks: no aggregate is reused across batches
        counts = layer_counts(
            model, stats.num_features, stats.num_classes, sizes, steady=False
        )
        step = pass_seconds(counts, sparse, dense, training=True)
        for key, value in step.items():
            total[key] = total.get(key, 0.0) + count * value
        sampled = sum(s.num_edges for s in sizes)
        gather = sizes[0].num_src * stats.num_features * _B
        prepare += count * (sampled * sparse.sample + gather * sparse.gather)
        kept_peak = max(kept_peak, sum(c.kept_elements for c in counts) * _B)
        transient = max(transient, _transient_bytes(counts, sizes[0].num_src))
        block_bytes = max(block_bytes, gather + sampled * 16)
    total["fixed"] = batches * fixed_train
    compute = sum(total.values())
    # the prefetch thread samples and gathers while training runs, if a core
    # is free for it; otherwise the two share the cores
    overlap = threads < cal.cores
    total["prepare_exposed"] = max(0.0, prepare - compute) if overlap else prepare
    full = _full_sizes(stats, model.num_layers)
    evals = layer_counts(
        model, stats.num_features, stats.num_classes, full, training=False
    )
    eval_s = sum(pass_seconds(evals, sparse, dense, training=False).values())
    eval_s += fixed_eval
    memory = {
        "process": inputs.rss_bytes,
        "sampler": stats.num_edges * 8 + stats.num_nodes * 12,  # CSC + scratch
        "state": _state_bytes(model, stats),
        "kept": kept_peak,
        "transient": transient,
        "prefetch": 4 * block_bytes,
        "eval": 2 * stats.num_nodes * max(widths(model, 1, 1)[1:]) * _B,
    }
    return Prediction(
        candidate,
        sum(total.values()),
        eval_s if inputs.eval_every_epoch else 0.0,
        sum(memory.values()),
        total,
        memory,
    )
