"""Planning a chunked run, in the parent: chunk count, load plans, policies, store.

:func:`build_chunk_plan` is HongTu's ``build_schedule`` (``hongtu.md`` §3.3):

1. for M in the candidates (:class:`HongTu` ``chunks`` if set; else 1, 2, 4, ... up to
   ``max_chunks`` when a ``device_budget`` is set; else 1): split every part into
   M chunks (:func:`strata.partition.split_chunks`, ordered by overlap), plan the
   deduplicated loads forward and in reverse (:func:`strata.partition.plan_loads`),
   pick each layer's recompute-or-cache policy (:func:`choose_policies`) and
   model every worker's peak (:mod:`.memory_model`); keep the first M whose
   largest peak fits the budget. If none does, fail naming the budget and the
   smallest peak reached.
2. turn the plans into per-worker index arrays (:mod:`.steps`) and lay out the
   host store (:mod:`.host_store`).

The summary it returns is the "plan report": M, alpha, each worker's modelled
peak, the policies, the plan's row counts beside the naive ones, and every
candidate tried.

The recompute-or-cache rule (§3.5): caching the aggregate is valid for linear
aggregations (GCN, mean, sum); among the valid policies whose host memory fits
``host_budget``, the one with the smaller *modelled* backward time wins:
``t_cache = (write + read of z, + root rows) / B_h2d`` against
``t_refetch = reverse-plan host bytes / B_h2d + peer bytes / B_peer +
aggregation flops / F``, with PCIe 25 GB/s, NVLink 300 GB/s and 2 TFLOP/s
(modelled constants, not measurements).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from strata.operators.errors import OperatorError
from strata.operators.layers import BasicGNN
from strata.operators.trainers.distributed.chunked.host_store import host_layout
from strata.operators.trainers.distributed.chunked.memory_model import (
    StepSizes,
    model_state_bytes,
    worker_peak,
)
from strata.operators.trainers.distributed.chunked.steps import (
    holds_previous,
    pack_steps,
    step_indices,
)
from strata.operators.trainers.distributed.config import DistributedConfig
from strata.operators.trainers.distributed.inputs import (
    ChunkCandidate,
    ChunkPlanSummary,
)
from strata.operators.trainers.distributed.local_graph import PropagationGraph
from strata.operators.trainers.distributed.modes import CachePolicy, HongTu
from strata.operators.trainers.distributed.programs import LayerProgram, layer_widths
from strata.partition import (
    ChunkConfig,
    ChunkSchedule,
    LoadPlan,
    Partition,
    plan_loads,
    split_chunks,
)
from strata.storage import CSRGraph

#: Modelled bandwidths (bytes/s) and aggregation throughput (flop/s).
B_H2D, B_PEER, FLOPS = 25e9, 300e9, 2e12


@dataclass(frozen=True, slots=True, eq=False)
class ChunkPlanBuild:
    """What the parent hands the workers for a chunked run.

    Attributes:
        schedule: the level-2 split (into the partition book).
        arrays: per-worker step index arrays (``plan.fwd.g<g>.*``,
            ``plan.rev.g<g>.*``).
        host_layout: the host store's buffers, allocated zero-filled.
        summary: the plan report (workers read M and the policies).
    """

    schedule: ChunkSchedule
    arrays: dict[str, np.ndarray]
    host_layout: dict[str, tuple[tuple[int, ...], torch.dtype]]
    summary: ChunkPlanSummary


@dataclass(frozen=True, slots=True, eq=False)
class _Candidate:
    schedule: ChunkSchedule
    sources: list[list[np.ndarray]]
    fwd: LoadPlan
    rev: LoadPlan
    policies: list[CachePolicy]
    peaks: list[int]


def candidate_chunks(hongtu: HongTu) -> list[int]:
    """The chunk counts tried, smallest first."""
    if hongtu.chunks is not None:
        return [hongtu.chunks]
    if hongtu.device_budget is None:
        return [1]
    out, m = [], 1
    while m < hongtu.max_chunks:
        out.append(m)
        m *= 2
    return [*out, hongtu.max_chunks]


def build_chunk_plan(
    graph: CSRGraph,
    part: Partition,
    prop: PropagationGraph,
    model: BasicGNN,
    program: LayerProgram,
    dist: DistributedConfig,
) -> ChunkPlanBuild:
    """Choose M and plan the run (see the module docstring).

    ``dist.mode`` must be :class:`HongTu`; its settings drive the plan.

    Raises:
        OperatorError: no candidate M fits ``device_budget`` (naming the budget
            and the smallest modelled peak), or a forced policy is invalid.
    """
    hongtu = dist.mode
    assert isinstance(hongtu, HongTu), "a HongTu plan needs mode=HongTu(...)"
    widths = layer_widths(model)
    state = model_state_bytes(model, dist)
    tried: list[ChunkCandidate] = []
    chosen: _Candidate | None = None
    budget = hongtu.device_budget
    for m in candidate_chunks(hongtu):
        cand = _candidate(graph, part, prop, program, widths, state, dist, m)
        tried.append(ChunkCandidate(m, cand.schedule.alpha, max(cand.peaks)))
        if budget is None or max(cand.peaks) <= budget:
            chosen = cand
            break
    if chosen is None:
        smallest = min(tried, key=lambda t: t.peak_bytes)
        raise OperatorError.build(
            "device_budget",
            "DistributedTrainer (mode=HongTu)",
            f"a budget of at least {smallest.peak_bytes} bytes (the smallest "
            f"modelled per-worker peak, at chunks={smallest.chunks})",
            f"device_budget={budget} with max_chunks={hongtu.max_chunks}",
            "raise device_budget, or max_chunks (chunks shrink until the halo "
            "dominates), or use more workers",
        )
    return _build(chosen, graph, widths, hongtu, tried)


def _candidate(
    graph: CSRGraph,
    part: Partition,
    prop: PropagationGraph,
    program: LayerProgram,
    widths: list[tuple[int, int]],
    state: int,
    dist: DistributedConfig,
    m: int,
) -> _Candidate:
    k = part.k
    hongtu = dist.mode
    assert isinstance(hongtu, HongTu)
    config = ChunkConfig(m, method=hongtu.chunk_method, seed=dist.partition.seed)
    schedule = split_chunks(graph, part.assignment, k, config)
    sources = [
        [schedule.src_of(int(schedule.order[g, s])) for s in range(m)] for g in range(k)
    ]
    owner = part.assignment
    fwd = plan_loads(sources, owner, hongtu.dedup)
    rev = plan_loads([list(reversed(s)) for s in sources], owner, hongtu.dedup)
    degree = prop.in_degree()
    edges = [
        [
            int(degree[schedule.dst_of(int(schedule.order[g, s]))].sum())
            for s in range(m)
        ]
        for g in range(k)
    ]
    policies = choose_policies(program, widths, rev, graph.num_nodes, edges, hongtu)
    hold = holds_previous(fwd.mode)
    peaks = []
    for g in range(k):
        f = _sizes(fwd, sources, edges, g, schedule, reverse=False)
        r = _sizes(rev, sources, edges, g, schedule, reverse=True)
        peaks.append(
            worker_peak(
                f,
                r,
                widths=widths,
                policies=policies,
                program=program,
                state_bytes=state,
                hold=hold,
                values=prop.values is not None,
                row_scale=prop.row_scale is not None,
            ).bytes
        )
    return _Candidate(schedule, sources, fwd, rev, policies, peaks)


def _sizes(
    plan: LoadPlan,
    sources: list[list[np.ndarray]],
    edges: list[list[int]],
    g: int,
    schedule: ChunkSchedule,
    *,
    reverse: bool,
) -> list[StepSizes]:
    m = len(sources[g])
    out = []
    for t, step in enumerate(plan.steps):
        s = m - 1 - t if reverse else t
        chunk = int(schedule.order[g, s])
        out.append(
            StepSizes(
                src=int(sources[g][s].shape[0]),
                dst=int(schedule.dst_of(chunk).shape[0]),
                edges=edges[g][s],
                host=int(step.host[g].shape[0]),
                sent=sum(int(r.shape[0]) for a, _, r in step.peer if a == g),
                received=sum(int(r.shape[0]) for _, b, r in step.peer if b == g),
            )
        )
    return out


def choose_policies(
    program: LayerProgram,
    widths: list[tuple[int, int]],
    rev: LoadPlan,
    num_nodes: int,
    edges: list[list[int]],
    hongtu: HongTu,
) -> list[CachePolicy]:
    """The recompute-or-cache policy of every layer (module docstring).

    Raises:
        OperatorError: ``cache_policy='cache_aggregate'`` with max aggregation.
    """
    pinned = hongtu.cache_policy
    if pinned is CachePolicy.CACHE and not program.linear:
        raise OperatorError.build(
            "cache_policy",
            "HongTu",
            "'refetch' or 'auto' with a max aggregation",
            f"cache_policy='cache_aggregate' with aggr={program.kind!r}",
            "a max has no transpose to backpropagate a cached aggregate",
        )
    if pinned is not CachePolicy.AUTO:
        return [pinned] * len(widths)
    total_edges = sum(sum(e) for e in edges)
    host_left = hongtu.host_budget
    out = []
    for d_in, _ in widths:
        row = d_in * 4
        cached = num_nodes * row * (2 if program.needs_root else 1)
        t_cache = (cached + num_nodes * row) / B_H2D  # write z; read z (+ root)
        t_refetch = (
            rev.host_rows * row / B_H2D
            + rev.peer_rows * row / B_PEER
            + 2 * total_edges * d_in / FLOPS
        )
        fits = host_left is None or num_nodes * row <= host_left
        if program.linear and fits and t_cache <= t_refetch:
            out.append(CachePolicy.CACHE)
            if host_left is not None:
                host_left -= num_nodes * row
        else:
            out.append(CachePolicy.REFETCH)
    return out


def _build(
    cand: _Candidate,
    graph: CSRGraph,
    widths: list[tuple[int, int]],
    hongtu: HongTu,
    tried: list[ChunkCandidate],
) -> ChunkPlanBuild:
    k = len(cand.sources)
    m = len(cand.sources[0])
    arrays: dict[str, np.ndarray] = {}
    for g in range(k):
        reverse_sources = [list(reversed(s)) for s in cand.sources]
        for name, plan, srcs in (
            ("fwd", cand.fwd, cand.sources),
            ("rev", cand.rev, reverse_sources),
        ):
            data, offsets = pack_steps(step_indices(plan, srcs, g))
            arrays[f"plan.{name}.g{g}.data"] = data
            arrays[f"plan.{name}.g{g}.offsets"] = offsets
    cached = [i + 1 for i, p in enumerate(cand.policies) if p is CachePolicy.CACHE]
    naive = sum(int(s.shape[0]) for per in cand.sources for s in per)
    summary = ChunkPlanSummary(
        chunks=m,
        alpha=cand.schedule.alpha,
        device_budget=hongtu.device_budget,
        modelled_peak_bytes=tuple(cand.peaks),
        policies=tuple(cand.policies),
        dedup=cand.fwd.mode,
        host_rows=cand.fwd.host_rows,
        peer_rows=cand.fwd.peer_rows,
        keep_rows=cand.fwd.keep_rows,
        naive_host_rows=naive,
        host_load=tuple(int(x) for x in cand.fwd.host_load),
        candidates=tuple(tried),
    )
    layout = host_layout(graph.num_nodes, widths, cached)
    return ChunkPlanBuild(cand.schedule, arrays, layout, summary)
