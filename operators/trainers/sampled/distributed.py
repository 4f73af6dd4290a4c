"""Sampled training on a gang, as a pipeline step: :class:`SampledGangTrainer`.

One run, in the step's process:

1. split the graph into one part per trainer (``SampledGangConfig.partitioner``)
   and the training vertices evenly over the trainers
   (:func:`~strata.operators.samplers.schedule.balanced_train_ids`);
2. start one feature server process per part
   (:class:`~strata.storage.features.server.FeatureServerGroup`: the part's
   features and labels in shared memory, served over pyzmq on loopback, with
   the network model of ``network``);
3. run the gang: ``workers`` trainer ranks (colocated: each samples its own
   seeds; :func:`~strata.operators.trainers.sampled.gang.colocated_worker`), or
   ``samplers`` sampler ranks beside them (Armada;
   :mod:`strata.operators.trainers.sampled.armada`). A one-process run on the
   CPU needs no gang and no server: it runs in this process (on a GPU it is a
   one-rank NCCL gang);
4. evaluate the final weights on every split by layer-wise full-neighbour
   inference in this process (exact; the same evaluation as the one-process
   :class:`~strata.operators.trainers.SampledTrainer`), and emit one record
   per epoch, the result, the run report and the model.

Per-epoch records carry the training loss (the mean over every training seed,
all-reduced) and the training accuracy of the training-mode predictions of the
epoch's steps; the gang does not evaluate the validation split every epoch, so
early stopping is not available on it (``patience`` must be 0) and the
records' validation fields are NaN.

The run report (port ``report``) holds the partition, the training split
(``rehomed_train``, ``train_balance``), per trainer and epoch the traffic (rows,
bytes, requests of misses and fills), cache counters (hits, coverage, hit rate,
``cache_bytes``), times and waits, the servers' own counters and whether they
agree with the clients' (``traffic_agrees``), and Armada's sampler counters.

Example (starts processes, so not a doctest)::

    from strata.storage import load_planetoid
    from strata.operators.trainers import ModelConfig, TrainConfig
    from strata.operators.trainers.sampled import SampledGangConfig, SampledGangTrainer

    config = TrainConfig(ModelConfig("sage", hidden=64), epochs=5)
    gang = SampledGangConfig(workers=2, cache=0.5)
    run = SampledGangTrainer(config, gang=gang).fit(load_planetoid("cora"))
    run.result.test_accuracy, run.report["totals"]["miss_rows"]
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from strata.engine.gang import (
    GangContext,
    GangSpec,
    SharedTensors,
    local_gang,
    run_gang_report,
)
from strata.operators.errors import OperatorError, check
from strata.operators.samplers.schedule import TrainSplit, balanced_train_ids
from strata.operators.trainers.base import torch_threads
from strata.operators.trainers.config import TrainConfig, build_model
from strata.operators.trainers.data import (
    FEATURES,
    SPLITS,
    TrainingData,
    as_training_data,
)
from strata.operators.trainers.gang_step import GangRunStep, check_gang_trainable
from strata.operators.trainers.inference import layerwise_inference
from strata.operators.trainers.records import EpochRecord, TrainResult
from strata.operators.trainers.sampled.config import SampledGangConfig
from strata.operators.trainers.sampled.gang import colocated_worker
from strata.operators.trainers.sampled.inputs import RankInputs, RankResult
from strata.operators.trainers.sampled.trainer import SamplingConfig
from strata.partition import resolve
from strata.storage.features.server_group import FeatureServerGroup
from strata.storage.features.traffic import Traffic

__all__ = ["SampledGangResult", "SampledGangTrainer"]

Worker = Callable[[GangContext, RankInputs], Any]


@dataclass(frozen=True, slots=True)
class SampledGangResult:
    """A finished sampled gang run.

    Attributes:
        result: as the one-process trainer reports it.
        history: one record per epoch.
        step_losses: per epoch, the mean loss of every global batch.
        state: the final weights.
        report: partition, split, per-trainer counters, servers (JSON-able).
    """

    result: TrainResult
    history: list[EpochRecord]
    step_losses: list[list[float]]
    state: dict[str, torch.Tensor] = field(repr=False)
    report: dict[str, Any] = field(repr=False)


class SampledGangTrainer(GangRunStep):
    """Sampled GNN training over several workers (see the module docstring).

    Args:
        config: model, optimiser, epochs and seed (``patience`` must be 0;
            ``device`` and ``threads`` are the gang's: see ``gang``).
        sampling: fan-outs, batch size (the global batch), prefetch depth.
        gang: workers, samplers, partitioner, cache, network, timeouts.
    """

    def __init__(
        self,
        config: TrainConfig,
        sampling: SamplingConfig | None = None,
        gang: SampledGangConfig | None = None,
    ) -> None:
        where = type(self).__name__
        check_gang_trainable(
            config, where, "train a user's module with SampledTrainer (one process)"
        )
        check(
            config.patience == 0,
            "patience",
            where,
            "0 (the gang does not validate every epoch)",
            str(config.patience),
            "train with patience=0, or on one worker for early stopping",
        )
        check(
            config.checkpoint_dir is None and not config.resume,
            "checkpoint_dir",
            where,
            "checkpoint_dir=None and resume=False",
            repr(config.checkpoint_dir),
            "checkpoints of a sampled gang are not implemented; use one worker",
        )
        self.config = config
        self.sampling = sampling or SamplingConfig()
        self.gang = gang or SampledGangConfig()

    # ------------------------------------------------------------------ the run
    def fit(self, data: Any) -> SampledGangResult:
        """Train outside (or inside) a pipeline; return records, result, weights."""
        data = as_training_data(data, self.where)
        self._check(data)
        name = self._ctx.step_id if self._ctx else "sampled-gang"
        start = time.perf_counter()
        with self._inputs(data, name) as (inputs, split, servers, partition):
            setup_s = time.perf_counter() - start
            results, gang = self._run(inputs, name)
            served = _served(servers)
        return self._assemble(data, results, gang, split, served, partition, setup_s)

    def _check(self, data: TrainingData) -> None:
        n, k = data.num_nodes, self.gang.workers
        if k > n:
            raise OperatorError.build(
                "workers",
                self.where,
                f"workers <= num_nodes ({n}) of graph {data.name!r}",
                f"workers={k}",
                "every trainer owns at least one vertex",
            )
        train = int(data.masks["train"].sum())
        if train == 0:
            raise OperatorError.build(
                "train_mask", self.where, "at least one training vertex", "none"
            )
        spec = self._spec(self.where)
        if self.gang.samplers and spec.local_workers() != spec.workers:
            # Armada's sampler -> trainer channels bind loopback ports.
            raise OperatorError.build(
                "samplers",
                self.where,
                "samplers=0 (colocated) on a gang across nodes",
                f"samplers={self.gang.samplers}",
                "Armada's channels stay on one machine: train colocated across "
                "nodes, or Armada on one node",
            )

    def _worker(self) -> Worker:
        if self.gang.colocated:
            return colocated_worker
        from strata.operators.trainers.sampled.armada import armada_worker

        return armada_worker

    def _partition(self, data: TrainingData) -> tuple[np.ndarray, dict[str, Any]]:
        k = self.gang.workers
        n = data.num_nodes
        if k == 1:
            return np.zeros(n, dtype=np.int32), {"method": "none", "edge_cut": 0.0}
        method = self.gang.partition_method
        partitioner, backend = resolve(method, k=k, seed=self.config.seed)
        part = partitioner.partition(data.graph)
        owner = np.asarray(part.assignment, dtype=np.int32)
        sizes = np.bincount(owner, minlength=k)
        return owner, {
            "method": method,
            "backend": backend,
            "edge_cut": float(part.report.edge_cut),
            "part_sizes": sizes.tolist(),
        }

    @contextlib.contextmanager
    def _inputs(
        self, data: TrainingData, name: str
    ) -> Iterator[
        tuple[RankInputs, TrainSplit, FeatureServerGroup | None, dict[str, Any]]
    ]:
        gang = self.gang
        graph = data.graph
        n = data.num_nodes
        x = data.features.get(FEATURES).reshape(n, -1).to(torch.float32).numpy()
        y = data.y.to(torch.int64).numpy()
        train_ids = np.flatnonzero(data.masks["train"].numpy()).astype(np.int64)
        owner, partition = self._partition(data)
        split = balanced_train_ids(owner, train_ids, gang.workers)
        arrays: dict[str, np.ndarray] = {
            "owner": owner,
            "rank_of": split.rank_of,
            "train_ids": train_ids,
            "degree": graph.out_degree(),
            "graph.indptr": graph.indptr,
            "graph.indices": graph.indices,
        }
        servers: FeatureServerGroup | None = None
        if gang.workers == 1:
            arrays.update({"x.0": x, "y.0": y})
        shared = SharedTensors.from_arrays(
            {
                k: torch.from_numpy(np.require(v, requirements=["C", "W"]))
                for k, v in arrays.items()
            }
        )
        try:
            if gang.workers > 1:
                servers = FeatureServerGroup(
                    {"x": x, "y": y},
                    owner,
                    network=gang.network.model(),
                    name=f"{name}-features",
                    num_parts=gang.workers,
                    host=_server_host(self._spec(name)),
                )
            inputs = RankInputs(
                shared=shared,
                config=self.config,
                sampling=self.sampling,
                gang=gang,
                num_nodes=n,
                num_features=int(x.shape[1]),
                num_classes=data.num_classes,
                endpoints=dict(servers.endpoints) if servers else {},
                server_names=dict(servers.names) if servers else {},
                layouts=(
                    {p: servers.layout(p) for p in range(gang.workers)}
                    if servers
                    else {}
                ),
                structure_on_trainers=gang.colocated,
            )
            yield inputs, split, servers, partition
        finally:
            if servers is not None:
                servers.close()
            shared.close()

    def _spec(self, name: str) -> GangSpec:
        gang = self.gang
        threads = gang.threads_per_worker or (self.config.threads or None)
        return GangSpec(
            workers=gang.processes,
            device=gang.device,
            # Sampler ranks share the trainers' GPUs but never reduce on them:
            # the gang's group is gloo, the trainers' own subgroup NCCL.
            backend="gloo" if gang.samplers else None,
            timeout_s=gang.timeout_s,
            collective_timeout_s=gang.collective_timeout_s,
            threads_per_worker=threads,
            seed=self.config.seed,
            name=name,
        )

    def _run(
        self, inputs: RankInputs, name: str
    ) -> tuple[list[RankResult], dict[str, Any]]:
        worker = self._worker()
        spec = self._spec(name)
        if self.gang.processes == 1 and spec.placement().device == "cpu":
            start = time.perf_counter()
            with (
                torch_threads(self.config.threads),
                local_gang(self.config.seed, name=name) as ctx,
            ):
                result = worker(ctx, inputs)
            wall = time.perf_counter() - start
            return [result], {"startup_s": 0.0, "wall_s": wall, "backend": "local"}
        report = run_gang_report(worker, spec, inputs)
        results = [r for r in report.results if isinstance(r, RankResult)]
        extra = [r for r in report.results if not isinstance(r, RankResult)]
        return results, {
            "startup_s": report.startup_s,
            "wall_s": report.wall_s,
            "backend": report.backend,
            "samplers": extra,
        }

    # --------------------------------------------------------------- results
    def _assemble(
        self,
        data: TrainingData,
        results: list[RankResult],
        gang: dict[str, Any],
        split: TrainSplit,
        served: dict[int, Traffic],
        partition: dict[str, Any],
        setup_s: float,
    ) -> SampledGangResult:
        results = sorted(results, key=lambda r: r.rank)
        main = results[0]
        assert main.state is not None, "trainer rank 0 returns the weights"
        epochs = len(main.epoch_losses)
        train_count = int(split.num_train)
        history = []
        for e in range(epochs):
            train_s = max(r.epochs[e]["train_s"] for r in results)
            history.append(
                EpochRecord(
                    epoch=e,
                    loss=main.epoch_losses[e],
                    train_accuracy=main.train_correct[e] / train_count,
                    val_loss=math.nan,
                    val_accuracy=math.nan,
                    improved=False,
                    seconds=train_s,
                    seeds=train_count,
                    batches=int(main.setup["steps"]),
                    sample_s=sum(r.epochs[e]["sample_s"] for r in results),
                    gather_s=sum(r.epochs[e]["gather_s"] for r in results),
                    stall_s=max(r.epochs[e]["trainer_stall_s"] for r in results),
                )
            )
        final = self._evaluate(data, main.state)
        result = TrainResult.from_history(
            history, final, best_epoch=epochs - 1, stopped_early=False
        )
        report = self._report(results, gang, split, served, partition, setup_s)
        self._count(history, report)
        return SampledGangResult(result, history, main.step_losses, main.state, report)

    def _evaluate(
        self, data: TrainingData, state: dict[str, torch.Tensor]
    ) -> dict[str, Any]:
        """Every split's metrics of ``state``: exact layer-wise inference here."""
        task = self.config.task.setup(data, seed=self.config.seed, where=self.where)
        model = build_model(self.config, data.num_features, data.num_classes)
        model.load_state_dict(state)
        model.eval()
        with torch.no_grad():
            out = layerwise_inference(
                model,
                data.graph,
                data.features,
                FEATURES,
                batch_size=self.sampling.eval_batch_size,
                device=torch.device("cpu"),
            )
        return {split: task.metrics(out, split) for split in SPLITS}

    def _report(
        self,
        results: list[RankResult],
        gang: dict[str, Any],
        split: TrainSplit,
        served: dict[int, Traffic],
        partition: dict[str, Any],
        setup_s: float,
    ) -> dict[str, Any]:
        totals: dict[str, float] = {}
        for r in results:
            for epoch in r.epochs:
                for key, value in epoch.items():
                    if isinstance(value, (int, float)) and key != "epoch":
                        totals[key] = totals.get(key, 0) + value
        # The cache fills before epoch 0 (setup) count as fill traffic too.
        for r in results:
            for unit in ("rows", "bytes", "requests"):
                extra = r.setup.get(f"setup_fill_{unit}", 0)
                for key in (f"fill_{unit}", f"remote_{unit}"):
                    totals[key] = totals.get(key, 0) + extra
        # The servers served this machine's ranks: on a gang across nodes, each
        # node runs its own servers for its share of the ranks.
        here = self._spec(self.where).local_ranks()
        client = Traffic()
        for r in results:
            if self.gang.samplers + r.rank in here:
                client = client + Traffic(**r.setup["client"])
        server = Traffic()
        for traffic in served.values():
            server = server + traffic
        report: dict[str, Any] = {
            "mode": "colocated" if self.gang.colocated else "armada",
            "workers": self.gang.workers,
            "samplers": self.gang.samplers,
            "partition": partition,
            "rehomed_train": int(split.rehomed),
            "train_balance": float(split.balance),
            "cache_policy": self.gang.cache_policy,
            "cache": self.gang.cache,
            "lookahead": "epoch",
            "network": {
                "latency_s": self.gang.network.latency_s,
                "bandwidth_Bps": self.gang.network.bandwidth_Bps,
            },
            "totals": totals,  # every epoch of every trainer, setup fills included
            "client_traffic": client.as_dict("client"),
            "server_traffic": {
                str(p): t.as_dict("served") for p, t in sorted(served.items())
            },
            "traffic_agrees": (not served) or client == server,
            "per_trainer": [
                {"rank": r.rank, "setup": r.setup, "epochs": r.epochs} for r in results
            ],
            "setup_s": setup_s,
            "startup_s": gang["startup_s"],
            "wall_s": gang["wall_s"],
            "backend": gang["backend"],
        }
        if gang.get("samplers"):
            report["per_sampler"] = gang["samplers"]
        return report

    def _count(self, history: list[EpochRecord], report: dict[str, Any]) -> None:
        if self._ctx is None:
            return
        metrics = self._ctx.metrics
        metrics.counter("epochs").inc(len(history))
        metrics.counter("seeds").inc(sum(r.seeds for r in history))
        metrics.counter("train_s").inc(sum(r.seconds for r in history))
        for key in ("miss_rows", "fill_rows", "remote_rows", "cache_hits"):
            metrics.counter(key).inc(int(report["totals"].get(key, 0)))

    def __repr__(self) -> str:
        gang = self.gang
        return (
            f"SampledGangTrainer({self.config.model.name}, workers={gang.workers}, "
            f"samplers={gang.samplers}, cache={gang.cache} {gang.cache_policy})"
        )


def _server_host(spec: GangSpec) -> str:
    """Loopback for local ranks; this node's address for Ray actors anywhere."""
    if spec.resolved_launcher() == "ray":
        from strata.engine.gang.ray_gang import node_address

        return node_address()
    return "127.0.0.1"


def _served(servers: FeatureServerGroup | None) -> dict[int, Traffic]:
    """Every server's own counters (asked before the servers stop)."""
    if servers is None:
        return {}
    return {p: servers.served(p) for p in range(servers.num_parts)}


def gang_outputs(
    results: list[dict[str, Any]],
    epochs: list[dict[str, Any]],
    reports: list[dict[str, Any]],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Batch step: a sampled gang's result, records and the report's headline counters.

    :func:`~strata.operators.trainers.records.training_outputs`, plus ``mode``,
    ``workers``, ``samplers``, the traffic and cache totals over every trainer
    and epoch (``remote_rows``, ``miss_requests``, ``fill_bytes``,
    ``cache_hits``, ...), the mean hit rate, the waits (``trainer_stall_s``,
    Armada's ``recv_wait_s`` and ``send_blocked_s``), ``rehomed_train``,
    ``train_balance`` and ``traffic_agrees``; the whole report stays on the
    trainer step's ``report`` port.
    """
    from strata.operators.trainers.records import training_outputs

    (report,) = reports
    outputs = training_outputs(results, epochs, extra)
    totals = report["totals"]
    keep = (
        "local_rows",
        "remote_accesses",
        "cache_hits",
        "cache_misses",
        "miss_rows",
        "miss_bytes",
        "miss_requests",
        "fill_rows",
        "fill_bytes",
        "fill_requests",
        "remote_rows",
        "remote_bytes",
        "remote_requests",
        "trainer_stall_s",
        "recv_wait_s",
        "compute_s",
        "schedule_s",
    )
    accesses = totals.get("remote_accesses", 0)
    outputs.update(
        {
            "mode": report["mode"],
            "workers": report["workers"],
            "samplers": report["samplers"],
            "partition": report["partition"].get("method"),
            "rehomed_train": report["rehomed_train"],
            "train_balance": report["train_balance"],
            "traffic_agrees": report["traffic_agrees"],
            "hit_rate": totals.get("cache_hits", 0) / accesses if accesses else 0.0,
            **{k: totals[k] for k in keep if k in totals},
        }
    )
    samplers = [s for s in report.get("per_sampler") or [] if isinstance(s, dict)]
    if samplers:
        outputs["send_blocked_s"] = float(sum(s["send_blocked_s"] for s in samplers))
        outputs["ship_bytes"] = int(sum(s["ship_bytes"] for s in samplers))
        # Graph structure each sampler holds, against a full replica's.
        outputs["structure_bytes"] = [int(s["structure_bytes"]) for s in samplers]
        outputs["full_structure_bytes"] = int(samplers[0]["full_structure_bytes"])
    return outputs
