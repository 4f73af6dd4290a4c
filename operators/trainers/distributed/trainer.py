"""The distributed full-graph trainer as a pipeline step: :class:`DistributedTrainer`.

One run, in the step's process:

1. validate the data and the settings against it (workers <= nodes, a model the
   distributed layers run, no checkpoint settings);
2. partition the graph into one part per worker (level 1) and build the
   partition book; compute the propagation graph with global coefficients; for
   HongTu, split the parts into chunks, choose M from the memory model, plan the
   deduplicated loads and allocate the host store
   (:func:`~strata.operators.trainers.distributed.chunked.plan.build_chunk_plan`);
3. place every array in one shared-memory segment *before* the gang starts;
4. run the gang (:func:`strata.engine.gang.gang_step`): every rank runs
   :func:`train_worker`, the mode's engine inside the common epoch loop;
5. emit the epoch records (port ``epochs``), the result (``result``) and the run
   report (``report``: the plan, per-worker per-epoch counters, peaks), and add
   the counters to the step's metrics.

The segment is unlinked when the run ends, also when the gang fails; a failed
gang raises :class:`~strata.engine.gang.GangError` naming the rank.

Like :class:`~strata.operators.trainers.FullGraphTrainer` it emits one record per epoch
and one result, so a job swaps one for the other (``jobs/cora_gcn.py
--set workers=2``). :meth:`DistributedTrainer.fit` runs it outside a pipeline and
also returns the final weights.

Example (starts a gang, so not a doctest)::

    from strata.storage import load_planetoid from strata.operators.trainers import
    ModelConfig, TrainConfig from strata.operators.trainers.distributed import
    DistributedConfig, DistributedTrainer

    config = TrainConfig(ModelConfig("gcn", hidden=16), epochs=20)
    run = DistributedTrainer(config, DistributedConfig(workers=2)).fit(
        load_planetoid("cora"))
    run.result.test_accuracy, run.report["totals"]["fwd.halo_send_bytes"]

Examples:
    >>> from strata.operators.trainers import ModelConfig, TrainConfig
    >>> trainer = DistributedTrainer(TrainConfig(ModelConfig("gcn")),
    ...                              DistributedConfig(workers=2, mode="hongtu"))
    >>> trainer
    DistributedTrainer(gcn, workers=2, mode=hongtu, epochs=200)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch

from strata.engine import Emit, Operator, StepContext
from strata.engine.gang import GangContext, GangSpec, SharedTensors, gang_step
from strata.operators.errors import OperatorError
from strata.operators.trainers.config import TrainConfig
from strata.operators.trainers.data import (
    FEATURES,
    SPLITS,
    TrainingData,
    as_training_data,
)
from strata.operators.trainers.distributed.config import DistributedConfig, Level1, Mode
from strata.operators.trainers.distributed.inputs import WorkerInputs, prefixed
from strata.operators.trainers.distributed.local_graph import PropagationGraph
from strata.operators.trainers.distributed.loop import (
    WorkerEngine,
    build_model,
    run_worker,
)
from strata.operators.trainers.distributed.partition_parallel import (
    PartitionParallelEngine,
)
from strata.operators.trainers.distributed.programs import program_for
from strata.operators.trainers.records import EpochRecord, TrainResult
from strata.partition import (
    MultilevelPartitioner,
    Partition,
    RandomPartitioner,
    build_book,
)
from strata.storage import CSRGraph

EngineFactory = Callable[[GangContext, WorkerInputs], WorkerEngine]


#: The engine of each mode (a new mode registers its engine here).
ENGINES: dict[Mode, EngineFactory] = {Mode.EXACT: PartitionParallelEngine}


def engine_for(mode: Mode) -> EngineFactory:
    """The worker engine of ``mode``."""
    if mode is Mode.HONGTU and mode not in ENGINES:
        from strata.operators.trainers.distributed.chunked.trainer import ChunkedEngine

        ENGINES[mode] = ChunkedEngine
    return ENGINES[mode]


def train_worker(ctx: GangContext, inputs: WorkerInputs) -> dict[str, Any]:
    """The gang's worker function: the mode's engine inside the epoch loop."""
    # DistributedConfig.__post_init__ normalised mode (and level1) to the enum.
    engine = engine_for(cast(Mode, inputs.dist.mode))(ctx, inputs)
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


class DistributedTrainer(Operator[Any, Any]):
    """Full-graph training on a gang of workers (see the module docstring).

    Args:
        config: model, optimiser, epochs, early stopping, seed (``device``,
            ``threads`` and checkpoints are not used: ``dist`` places workers).
        dist: workers, mode and the mode's settings.
    """

    ports = ("epochs", "result", "report")

    def __init__(self, config: TrainConfig, dist: DistributedConfig) -> None:
        self.config = config
        self.dist = dist
        self._ctx: StepContext | None = None

    def open(self, ctx: StepContext) -> None:
        """Remember the step (its id names the gang; metrics go to it)."""
        self._ctx = ctx

    @property
    def where(self) -> str:
        """The trainer's name in error messages."""
        name = type(self).__name__
        return f"{name} (step '{self._ctx.step_id}')" if self._ctx else name

    def process(self, item: Any) -> Iterator[Emit[dict[str, Any]]]:
        """Train on ``item``: emit each epoch's record, the result, the report."""
        run = self.fit(item)
        for record in run.history:
            yield Emit("epochs", record.to_dict())
        yield Emit("result", run.result.to_dict())
        yield Emit("report", run.report)

    def fit(self, data: Any) -> DistributedResult:
        """Train outside (or inside) a pipeline; return records, result, weights."""
        data = as_training_data(data, self.where)
        self._check(data)
        with self._inputs(data) as inputs:
            name = self._ctx.step_id if self._ctx else "distributed-train"
            step = gang_step(train_worker, self._spec(), name=name)
            gang = step(inputs)
        return self._assemble(gang, inputs)

    # ---------------------------------------------------------------- the run
    def _check(self, data: TrainingData) -> None:
        n, k = data.num_nodes, self.dist.workers
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
        program_for(build_model(self.config, data.num_features, data.num_classes))

    def _spec(self) -> GangSpec:
        dist = self.dist
        threads = dist.threads_per_worker or (self.config.threads or None)
        return GangSpec(
            workers=dist.workers,
            device=dist.device,  # type: ignore[arg-type]
            backend=dist.backend,
            timeout_s=dist.timeout_s,
            collective_timeout_s=dist.collective_timeout_s,
            heartbeat_timeout_s=dist.heartbeat_timeout_s,
            threads_per_worker=threads,
            seed=self.config.seed,
        )

    @contextlib.contextmanager
    def _inputs(self, data: TrainingData) -> Iterator[WorkerInputs]:
        graph = data.graph
        dist = self.dist
        level1 = cast(Level1, dist.level1)  # normalised by DistributedConfig
        part = level1_partition(graph, dist.workers, level1, dist.partition_seed)
        model = build_model(self.config, data.num_features, data.num_classes)
        program = program_for(model)
        x = data.features.get(FEATURES).reshape(data.num_nodes, -1)
        arrays: dict[str, np.ndarray] = {
            "x": x.to(torch.float32).numpy(),
            "y": data.y.to(torch.int64).numpy(),
        }
        for split in SPLITS:
            arrays[f"mask.{split}"] = data.masks[split].numpy()
        prop = PropagationGraph.build(graph, program.kind)
        arrays.update(prop.to_arrays("prop."))
        extra: dict[str, Any] = {
            "partition": {
                "edge_cut": float(part.report.edge_cut),
                "part_sizes": [int(s) for s in part.part_sizes()],
            }
        }
        book_chunks = None
        host_layout: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
        if dist.mode is Mode.HONGTU:
            from strata.operators.trainers.distributed.chunked.plan import (
                build_chunk_plan,
            )

            chunked = build_chunk_plan(graph, part, prop, model, program, dist)
            book_chunks = chunked.schedule
            arrays.update(chunked.arrays)
            host_layout = chunked.host_layout
            extra["plan"] = chunked.summary
        book = build_book(graph, part, chunks=book_chunks)
        arrays.update(prefixed("book.", book.to_arrays()))
        extra["partition"]["halo_sizes"] = [
            int(book.halo(p).size) for p in range(book.k)
        ]
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
                extra=extra,
            )
        finally:
            shared.close()

    def _assemble(
        self, gang: dict[str, Any], inputs: WorkerInputs
    ) -> DistributedResult:
        results = gang["results"]
        main = results[0]
        history = [EpochRecord.from_dict(r) for r in main["history"]]
        totals: dict[str, int] = {}
        for r in results:
            for epoch in r["counters"]["epochs"]:
                for key, value in epoch.items():
                    totals[key] = totals.get(key, 0) + value
        report = {
            "mode": cast(Mode, self.dist.mode).value,
            "workers": self.dist.workers,
            **inputs.extra,
            "totals": totals,
            "per_worker": [
                {
                    "rank": r["rank"],
                    "epochs": r["counters"]["epochs"],
                    "layers": r["counters"]["layers"],
                    **r["report"],
                    "wall_s": w["wall_s"],
                    "peak_rss_bytes": w["peak_rss_bytes"],
                }
                for r, w in zip(results, gang["workers"], strict=True)
            ],
            "startup_s": gang["startup_s"],
            "wall_s": gang["wall_s"],
            "backend": gang["backend"],
        }
        self._count(history, totals, results)
        return DistributedResult(
            TrainResult(**main["result"]), history, main["state"], report
        )

    def _count(
        self,
        history: list[EpochRecord],
        totals: dict[str, int],
        results: list[dict[str, Any]],
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
        peaks = [r["report"].get("arena_peak_bytes", 0) for r in results]
        if any(peaks):
            metrics.counter("arena_peak_bytes").inc(max(peaks))

    def __repr__(self) -> str:
        model, dist = self.config.model.name, self.dist
        return (
            f"DistributedTrainer({model}, workers={dist.workers}, "
            f"mode={cast(Mode, dist.mode).value}, epochs={self.config.epochs})"
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
