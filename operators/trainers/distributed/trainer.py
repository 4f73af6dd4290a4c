"""The distributed full-graph trainer as a pipeline step: :class:`DistributedTrainer`.

One run, in the step's process:

1. validate the data and the settings against it (workers <= nodes, a model the
   distributed layers run, no checkpoint settings);
2. partition the graph into one part per worker (level 1) and build the
   partition book; compute the propagation graph with global coefficients; for
   HongTu, split the parts into chunks, choose M from the memory model, plan the
   deduplicated loads and allocate the host store
   (:func:`~strata.operators.trainers.distributed.chunked.plan.build_chunk_plan`);
   for Emma, check the model (:func:`~.emma.config.check_emma`);
3. place every array in one shared-memory segment *before* the gang starts;
4. run the gang (:func:`strata.engine.gang.gang_step`): every rank runs
   :func:`train_worker`, the mode's engine (:func:`engine_for`, chosen by the
   mode's type) inside the common epoch loop;
5. emit the epoch records (port ``epochs``), the result (``result``) and the run
   report (``report``: the plan, per-worker per-epoch counters, peaks; Emma's
   ``emma`` section), and add the counters to the step's metrics.

The segment is unlinked when the run ends, also when the gang fails; a failed
gang raises :class:`~strata.engine.gang.GangError` naming the rank.

Like :class:`~strata.operators.trainers.FullGraphTrainer` it emits one record per epoch
and one result, so a job swaps one for the other (``jobs/cora_gcn.py
--set workers=2``). :meth:`DistributedTrainer.fit` runs it outside a pipeline and
also returns the final weights; :meth:`DistributedTrainer.fit_local` runs one
rank in this process, without a gang.

Example (starts a gang, so not a doctest)::

    from strata.storage import load_planetoid
    from strata.operators.trainers import ModelConfig, TrainConfig
    from strata.operators.trainers.distributed import (
        DistributedConfig, DistributedTrainer, GangConfig, HongTu)

    config = TrainConfig(ModelConfig("gcn", hidden=16), epochs=20)
    dist = DistributedConfig(gang=GangConfig(workers=2), mode=HongTu(chunks=4))
    run = DistributedTrainer(config, dist).fit(load_planetoid("cora"))
    run.result.test_accuracy, run.report["totals"]["fwd.halo_send_bytes"]

Examples:
    >>> from strata.operators.trainers import ModelConfig, TrainConfig
    >>> from strata.operators.trainers.distributed import GangConfig, HongTu
    >>> dist = DistributedConfig(gang=GangConfig(workers=2), mode=HongTu())
    >>> DistributedTrainer(TrainConfig(ModelConfig("gcn")), dist)
    DistributedTrainer(gcn, workers=2, mode=hongtu, epochs=200)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, assert_never

import numpy as np
import torch

from strata.engine.gang import (
    GangContext,
    GangSpec,
    SharedTensors,
    gang_step,
    local_gang,
)
from strata.operators.errors import OperatorError
from strata.operators.layers import BasicGNN
from strata.operators.trainers.config import TrainConfig, build_model
from strata.operators.trainers.data import (
    FEATURES,
    SPLITS,
    TrainingData,
    as_training_data,
)
from strata.operators.trainers.distributed.chunked.plan import build_chunk_plan
from strata.operators.trainers.distributed.chunked.trainer import ChunkedEngine
from strata.operators.trainers.distributed.config import DistributedConfig, Level1
from strata.operators.trainers.distributed.emma.config import check_emma
from strata.operators.trainers.distributed.emma.engine import EmmaEngine
from strata.operators.trainers.distributed.emma.trainer import emma_summary
from strata.operators.trainers.distributed.inputs import (
    ChunkPlanSummary,
    PartitionSummary,
    WorkerInputs,
    WorkerResult,
    prefixed,
)
from strata.operators.trainers.distributed.local_graph import PropagationGraph
from strata.operators.trainers.distributed.loop import WorkerEngine, run_worker
from strata.operators.trainers.distributed.modes import (
    DistributedMode,
    Emma,
    Exact,
    HongTu,
)
from strata.operators.trainers.distributed.partition_parallel import (
    PartitionParallelEngine,
)
from strata.operators.trainers.distributed.programs import program_for
from strata.operators.trainers.gang_step import GangRunStep, check_gang_trainable
from strata.operators.trainers.records import EpochRecord, TrainResult
from strata.partition import (
    MultilevelPartitioner,
    Partition,
    RandomPartitioner,
    build_book,
)
from strata.storage import CSRGraph

EngineFactory = Callable[[GangContext, WorkerInputs], WorkerEngine]


def engine_for(mode: DistributedMode) -> EngineFactory:
    """The worker engine of ``mode``, chosen by the mode's type.

    This is the one place a mode meets its engine; a new mode adds a type to
    :data:`~strata.operators.trainers.distributed.modes.DistributedMode` and a
    case here (mypy's exhaustiveness check points at this function).
    """
    match mode:
        case Exact():
            return PartitionParallelEngine
        case HongTu():
            return ChunkedEngine
        case Emma():
            return EmmaEngine
        case _:
            assert_never(mode)


def train_worker(ctx: GangContext, inputs: WorkerInputs) -> WorkerResult:
    """The gang's worker function: the mode's engine inside the epoch loop."""
    engine = engine_for(inputs.dist.mode)(ctx, inputs)
    model = build_model(inputs.config, inputs.num_features, inputs.num_classes)
    return run_worker(ctx, engine, model, inputs.config, inputs.dist)


@dataclass(frozen=True, slots=True)
class DistributedResult:
    """A finished distributed run.

    Attributes:
        result: as a single-device trainer reports it.
        history: one record per epoch.
        state: rank 0's final weights (the best epoch's with ``restore_best``).
        report: the plan, per-worker per-epoch counters and peaks (JSON-able).
    """

    result: TrainResult
    history: list[EpochRecord]
    state: dict[str, torch.Tensor] = field(repr=False)
    report: dict[str, Any] = field(repr=False)


def level1_partition(
    graph: CSRGraph, workers: int, method: Level1, seed: int
) -> Partition:
    """One part per worker; vertex weight ``1 + in_degree`` (work and memory)."""
    weights = (1 + graph.in_degree()).astype(np.float64)
    if method is Level1.RANDOM:
        return RandomPartitioner(k=workers, seed=seed).partition(graph)
    return MultilevelPartitioner(k=workers, seed=seed).partition(
        graph, node_weights=weights
    )


class DistributedTrainer(GangRunStep):
    """Full-graph training on a gang of workers (see the module docstring).

    Args:
        config: model, optimiser, epochs, early stopping, seed (``device``,
            ``threads`` and checkpoints are not used: ``dist`` places workers).
        dist: the gang, the level-1 partition and the mode with its settings.
    """

    def __init__(self, config: TrainConfig, dist: DistributedConfig) -> None:
        where = type(self).__name__
        check_gang_trainable(
            config,
            where,
            "train a user's module with FullGraphTrainer or SampledTrainer",
        )
        self.config = config
        self.dist = dist

    def fit(self, data: Any) -> DistributedResult:
        """Train outside (or inside) a pipeline; return records, result, weights."""
        data = as_training_data(data, self.where)
        self._check(data)
        with self._inputs(data) as inputs:
            name = self._ctx.step_id if self._ctx else "distributed-train"
            step = gang_step(train_worker, self._spec(), name=name)
            gang = step(inputs)
        return self._assemble(gang, inputs)

    def fit_local(self, data: Any) -> DistributedResult:
        """Train with one rank in this process (``workers`` must be 1).

        The "one process" of the K-invariance tests, and a cheap way to run a
        mode where starting a gang is not worth it.
        """
        self._need_one_worker("fit_local")
        data = as_training_data(data, self.where)
        self._check(data)
        with self._inputs(data) as inputs, _one_rank(self.config.seed) as ctx:
            start = time.perf_counter()
            result = train_worker(ctx, inputs)
            wall = time.perf_counter() - start
        gang = {
            "results": [result],
            "workers": [{"wall_s": wall, "peak_rss_bytes": 0}],
            "startup_s": 0.0,
            "wall_s": wall,
            "backend": "gloo",
        }
        return self._assemble(gang, inputs)

    @contextlib.contextmanager
    def open_local(self, data: Any) -> Iterator[tuple[WorkerEngine, BasicGNN]]:
        """One rank's engine and model, set up in this process (``workers=1``).

        For inspection and tests: drive the engine's ``train_epoch`` and
        ``evaluate`` (Emma's ``refresh``) by hand.
        """
        self._need_one_worker("open_local")
        data = as_training_data(data, self.where)
        self._check(data)
        with self._inputs(data) as inputs, _one_rank(self.config.seed) as ctx:
            engine = engine_for(self.dist.mode)(ctx, inputs)
            model = build_model(self.config, inputs.num_features, inputs.num_classes)
            engine.setup(model)
            yield engine, model

    # ---------------------------------------------------------------- the run
    def _need_one_worker(self, method: str) -> None:
        if self.dist.gang.workers != 1:
            raise OperatorError.build(
                "workers",
                f"{self.where}.{method}",
                "workers=1 (one rank in this process)",
                f"workers={self.dist.gang.workers}",
                "use fit() for a gang",
            )

    def _check(self, data: TrainingData) -> None:
        n, k = data.num_nodes, self.dist.gang.workers
        if k > n:
            raise OperatorError.build(
                "workers",
                self.where,
                f"workers <= num_nodes ({n}) of graph {data.name!r}",
                f"workers={k}",
                "every worker owns at least one vertex",
            )
        if self.config.checkpoint_dir is not None or self.config.resume:
            raise OperatorError.build(
                "checkpoint_dir",
                self.where,
                "checkpoint_dir=None and resume=False",
                f"checkpoint_dir={self.config.checkpoint_dir!r}",
                "distributed checkpoints are not implemented; train on one device "
                "to checkpoint, or drop the setting",
            )
        model = build_model(self.config, data.num_features, data.num_classes)
        program = program_for(model)
        mode = self.dist.mode
        spec = self._spec()
        if isinstance(mode, HongTu) and spec.local_workers() != spec.workers:
            # The ranks trade rows through the host store, one machine's shared
            # memory: ranks on another node would never see their peers' rows.
            raise OperatorError.build(
                "mode",
                self.where,
                "exact or emma on a gang across nodes",
                f"hongtu with {spec.local_workers()} of {k} workers on this node",
                "HongTu's host store is shared memory of one machine: train it "
                "on one node, or use mode=exact across nodes",
            )
        if isinstance(mode, Emma):
            check_emma(
                mode,
                mode=Exact.name,
                aggregation=program.kind,
                model=model,
                where=self.where,
            )

    def _spec(self) -> GangSpec:
        gang = self.dist.gang
        threads = gang.threads_per_worker or (self.config.threads or None)
        return GangSpec(
            workers=gang.workers,
            device=gang.device,
            backend=gang.backend,
            timeout_s=gang.timeout_s,
            collective_timeout_s=gang.collective_timeout_s,
            heartbeat_timeout_s=gang.heartbeat_timeout_s,
            threads_per_worker=threads,
            seed=self.config.seed,
        )

    @contextlib.contextmanager
    def _inputs(self, data: TrainingData) -> Iterator[WorkerInputs]:
        graph = data.graph
        dist = self.dist
        k = dist.gang.workers
        part = level1_partition(graph, k, dist.partition.method, dist.partition.seed)
        model = build_model(self.config, data.num_features, data.num_classes)
        program = program_for(model)
        x = data.features.get(FEATURES).reshape(data.num_nodes, -1)
        arrays: dict[str, np.ndarray] = {
            "x": x.to(torch.float32).numpy(),
            "y": data.y.to(torch.int64).numpy(),
        }
        for split in SPLITS:
            arrays[f"mask.{split}"] = data.masks[split].numpy()
        prop = PropagationGraph.build(graph, program.aggregation)
        arrays.update(prop.to_arrays("prop."))
        book_chunks = None
        plan: ChunkPlanSummary | None = None
        host_layout: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
        if isinstance(dist.mode, HongTu):
            chunked = build_chunk_plan(graph, part, prop, model, program, dist)
            book_chunks = chunked.schedule
            arrays.update(chunked.arrays)
            host_layout = chunked.host_layout
            plan = chunked.summary
        book = build_book(graph, part, chunks=book_chunks)
        arrays.update(prefixed("book.", book.to_arrays()))
        summary = PartitionSummary(
            edge_cut=float(part.report.edge_cut),
            part_sizes=tuple(int(s) for s in part.part_sizes()),
            halo_sizes=tuple(int(book.halo(p).size) for p in range(book.k)),
        )
        shared = _share(arrays, host_layout)
        try:
            yield WorkerInputs(
                shared=shared,
                config=self.config,
                dist=dist,
                num_nodes=data.num_nodes,
                num_features=data.num_features,
                num_classes=data.num_classes,
                split_nodes={s: int(data.masks[s].sum()) for s in SPLITS},
                partition=summary,
                plan=plan,
            )
        finally:
            shared.close()

    def _assemble(
        self, gang: dict[str, Any], inputs: WorkerInputs
    ) -> DistributedResult:
        results: list[WorkerResult] = gang["results"]
        main = results[0]
        assert main.result is not None, "rank 0 returns the result"
        assert main.state is not None, "rank 0 returns the weights"
        history = list(main.history)
        totals: dict[str, int] = {}
        for r in results:
            for epoch in r.counters["epochs"]:
                for key, value in epoch.items():
                    totals[key] = totals.get(key, 0) + value
        mode = self.dist.mode
        report: dict[str, Any] = {
            "mode": mode.name,
            "workers": self.dist.gang.workers,
            "partition": inputs.partition.to_dict(),
        }
        if inputs.plan is not None:
            report["plan"] = inputs.plan.to_dict()
        report.update(
            {
                "totals": totals,
                "per_worker": [
                    {
                        "rank": r.rank,
                        "epochs": r.counters["epochs"],
                        "layers": r.counters["layers"],
                        **r.report,
                        "wall_s": w["wall_s"],
                        "peak_rss_bytes": w["peak_rss_bytes"],
                    }
                    for r, w in zip(results, gang["workers"], strict=True)
                ],
                "startup_s": gang["startup_s"],
                "wall_s": gang["wall_s"],
                "backend": gang["backend"],
            }
        )
        if isinstance(mode, Emma):
            report["emma"] = emma_summary(report["per_worker"], mode)
        self._count(history, totals, results)
        return DistributedResult(main.result, history, main.state, report)

    def _count(
        self,
        history: list[EpochRecord],
        totals: dict[str, int],
        results: list[WorkerResult],
    ) -> None:
        if self._ctx is None:
            return
        metrics = self._ctx.metrics
        metrics.counter("epochs").inc(len(history))
        metrics.counter("seeds").inc(sum(r.seeds for r in history))
        metrics.counter("train_s").inc(sum(r.seconds - r.eval_s for r in history))
        metrics.counter("eval_s").inc(sum(r.eval_s for r in history))
        for key, value in totals.items():
            metrics.counter(key).inc(value)
        peaks = [r.report.get("arena_peak_bytes", 0) for r in results]
        if any(peaks):
            metrics.counter("arena_peak_bytes").inc(max(peaks))

    def __repr__(self) -> str:
        model, dist = self.config.model.name, self.dist
        return (
            f"DistributedTrainer({model}, workers={dist.gang.workers}, "
            f"mode={dist.mode.name}, epochs={self.config.epochs})"
        )


def _share(
    arrays: dict[str, np.ndarray],
    host_layout: dict[str, tuple[tuple[int, ...], torch.dtype]],
) -> SharedTensors:
    """One segment with ``arrays`` copied in and ``host_layout`` zero-filled."""
    layout: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
    tensors = {}
    for name, array in arrays.items():
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        tensors[name] = tensor
        layout[name] = (tuple(tensor.shape), tensor.dtype)
    layout.update(host_layout)
    shared = SharedTensors.zeros(layout)
    for name, tensor in tensors.items():
        shared[name].copy_(tensor)
    return shared


def _one_rank(seed: int) -> contextlib.AbstractContextManager[GangContext]:
    """A one-rank gloo group in this process, and its context."""
    return local_gang(seed, name="DistributedTrainer.fit_local")
