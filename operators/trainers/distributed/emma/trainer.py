"""The Emma option as a pipeline step: :class:`EmmaTrainer`.

The exact partition-parallel trainer
(:class:`~strata.operators.trainers.distributed.trainer.DistributedTrainer`) with Emma's
worker engine (:class:`~strata.operators.trainers.distributed.emma.engine.EmmaEngine`):
the same partition, shared inputs, gang and epoch loop, where every epoch is one
Emma iteration. The report gains an ``emma`` section (:func:`emma_summary`): the
settings, halo bytes per iteration and their ratio to the exact exchange of the
same run, rows per cycle against one exact exchange, edges, buffer memory and
the refresh and evaluation bytes.

:meth:`EmmaTrainer.fit_local` runs one rank in this process (``workers=1``,
a one-process gloo group), the "one process" of the K-invariance test and a
cheap way to run Emma where starting a gang is not worth it.

Example (starts a gang, so not a doctest)::

    from strata.storage import load_planetoid
    from strata.operators.trainers import ModelConfig, TrainConfig
    from strata.operators.trainers.distributed import DistributedConfig
    from strata.operators.trainers.distributed.emma import EmmaConfig, EmmaTrainer

    config = TrainConfig(ModelConfig("sage", hidden=16), epochs=200)
    run = EmmaTrainer(config, DistributedConfig(workers=2), EmmaConfig(splits=10)).fit(
        load_planetoid("cora"))
    run.result.test_accuracy, run.report["emma"]["fwd_bytes_ratio"]

Examples:
    >>> from strata.operators.trainers import ModelConfig, TrainConfig
    >>> from strata.operators.trainers.distributed.config import DistributedConfig
    >>> from strata.storage import load_graph
    >>> config = TrainConfig(ModelConfig("sage", hidden=8), epochs=4, device="cpu")
    >>> trainer = EmmaTrainer(config, DistributedConfig(workers=1), EmmaConfig(2))
    >>> run = trainer.fit_local(load_graph("sbm:n=200,blocks=4,features=8"))
    >>> run.report["emma"]["cycle_rows_equal_exact"], run.result.epochs_run
    (True, 4)
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from strata.engine.gang import GangContext, gang_step
from strata.operators.errors import OperatorError
from strata.operators.layers import BasicGNN
from strata.operators.trainers.config import TrainConfig
from strata.operators.trainers.data import as_training_data
from strata.operators.trainers.distributed.config import DistributedConfig
from strata.operators.trainers.distributed.emma.config import EmmaConfig, check_emma
from strata.operators.trainers.distributed.emma.engine import (
    EXTRA_KEY,
    EmmaEngine,
    emma_worker,
)
from strata.operators.trainers.distributed.loop import build_model
from strata.operators.trainers.distributed.programs import program_for
from strata.operators.trainers.distributed.trainer import (
    DistributedResult,
    DistributedTrainer,
)


class EmmaTrainer(DistributedTrainer):
    """Partition-parallel training with Emma's source chunking (``emma.md``).

    Args:
        config: model, optimiser, iterations (``epochs``), seed.
        dist: workers and partitioning; ``mode`` must be ``exact``.
        emma: the Emma settings.

    Raises:
        OperatorError: for a rejected combination (HongTu mode; max aggregation
            and BatchNorm are checked when the model is known, in :meth:`fit`).
    """

    def __init__(
        self, config: TrainConfig, dist: DistributedConfig, emma: EmmaConfig
    ) -> None:
        super().__init__(config, dist)
        self.emma = emma
        check_emma(
            emma, mode=_mode_name(dist.mode), aggregation="sum", where=self.where
        )

    def fit(self, data: Any) -> DistributedResult:
        """Train on a gang; return records, result, weights and the report."""
        data = self._prepare(data)
        with self._emma_inputs(data) as inputs:
            name = self._ctx.step_id if self._ctx else "emma-train"
            gang = gang_step(emma_worker, self._spec(), name=name)(inputs)
        return self._finish(gang, inputs)

    def fit_local(self, data: Any) -> DistributedResult:
        """Train with one rank in this process (``dist.workers`` must be 1)."""
        self._need_one_worker("fit_local")
        data = self._prepare(data)
        with self._emma_inputs(data) as inputs, _one_rank(self.config.seed) as ctx:
            start = time.perf_counter()
            result = emma_worker(ctx, inputs)
            wall = time.perf_counter() - start
        gang = {
            "results": [result],
            "workers": [{"wall_s": wall, "peak_rss_bytes": 0}],
            "startup_s": 0.0,
            "wall_s": wall,
            "backend": "gloo",
        }
        return self._finish(gang, inputs)

    @contextlib.contextmanager
    def open_local(self, data: Any) -> Iterator[tuple[EmmaEngine, BasicGNN]]:
        """One rank's engine and model, set up in this process (``workers=1``).

        For inspection and tests: drive :meth:`EmmaEngine.train_epoch`,
        :meth:`EmmaEngine.refresh` and :meth:`EmmaEngine.evaluate` by hand.
        """
        self._need_one_worker("open_local")
        data = self._prepare(data)
        with self._emma_inputs(data) as inputs, _one_rank(self.config.seed) as ctx:
            engine = EmmaEngine(ctx, inputs)
            model = build_model(self.config, inputs.num_features, inputs.num_classes)
            engine.setup(model)
            yield engine, model

    # ---------------------------------------------------------------- the run
    def _need_one_worker(self, method: str) -> None:
        if self.dist.workers != 1:
            raise OperatorError.build(
                "workers",
                f"{self.where}.{method}",
                "workers=1 (one rank in this process)",
                f"workers={self.dist.workers}",
                "use fit() for a gang",
            )

    def _prepare(self, data: Any) -> Any:
        data = as_training_data(data, self.where)
        self._check(data)
        model = build_model(self.config, data.num_features, data.num_classes)
        check_emma(
            self.emma,
            mode=_mode_name(self.dist.mode),
            aggregation=program_for(model).kind,
            model=model,
            where=self.where,
        )
        return data

    @contextlib.contextmanager
    def _emma_inputs(self, data: Any) -> Iterator[Any]:
        with self._inputs(data) as inputs:
            yield dataclasses.replace(
                inputs, extra={**inputs.extra, EXTRA_KEY: self.emma}
            )

    def _finish(self, gang: dict[str, Any], inputs: Any) -> DistributedResult:
        run = self._assemble(gang, inputs)
        run.report["mode"] = "emma"
        run.report.pop(EXTRA_KEY, None)
        run.report["emma"] = emma_summary(run.report["per_worker"], self.emma)
        return run

    def __repr__(self) -> str:
        return (
            f"EmmaTrainer({self.config.model.name}, workers={self.dist.workers}, "
            f"splits={self.emma.splits}, epochs={self.config.epochs})"
        )


def _mode_name(mode: Any) -> str:
    """``exact`` / ``hongtu`` from a Mode (or its value)."""
    return str(getattr(mode, "value", mode))


def _epoch_sum(per_worker: list[dict[str, Any]], key: str) -> np.ndarray:
    """Per iteration, ``key`` summed over the workers."""
    rows = [[e.get(key, 0) for e in w["epochs"]] for w in per_worker]
    return np.asarray(rows, dtype=np.float64).sum(axis=0)


def emma_summary(per_worker: list[dict[str, Any]], emma: EmmaConfig) -> dict[str, Any]:
    """The run report's ``emma`` section from the per-worker counters.

    Ratios divide this run's Emma bytes by the bytes one exact exchange sends in
    the same run (``emma.exact_exchange_bytes``, from the full plan), per
    iteration; ``cycle_rows_equal_exact`` checks that, over every complete
    cycle, the halo rows sent equal one exact exchange exactly (for every worker).
    """
    exact = _epoch_sum(per_worker, "emma.exact_exchange_bytes")
    fwd = _epoch_sum(per_worker, "fwd.halo_send_bytes")
    bwd = _epoch_sum(per_worker, "bwd.halo_send_bytes")
    exact_bwd = _epoch_sum(per_worker, "emma.exact_bwd_bytes")
    edges = _epoch_sum(per_worker, "emma.edges_aggregated")
    all_edges = _epoch_sum(per_worker, "emma.exact_edges")
    safe = np.where(exact > 0, exact, 1.0)
    s = emma.splits
    cycles = fwd.shape[0] // s if emma.redraw_every == s else 0
    equal = True
    for w in per_worker:
        rows = np.asarray([e.get("fwd.halo_send_rows", 0) for e in w["epochs"]])
        want = np.asarray([e.get("emma.exact_exchange_rows", 0) for e in w["epochs"]])
        for c in range(cycles):
            equal &= int(rows[c * s : (c + 1) * s].sum()) == int(want[c * s])
    return {
        "splits": s,
        "redraw_every": emma.redraw_every,
        "refresh_every": emma.refresh_every,
        "warm_start": emma.warm_start,
        "seed": emma.seed,
        "iterations": int(fwd.shape[0]),
        "exact_exchange_bytes": float(exact[0]) if exact.size else 0.0,
        "fwd_bytes_per_iteration": fwd.tolist(),
        "bwd_bytes_per_iteration": bwd.tolist(),
        "fwd_bytes_ratio": float(fwd.sum() / safe.sum()) if exact.size else 0.0,
        "bwd_bytes_ratio": float(bwd.sum() / max(exact_bwd.sum(), 1.0)),
        "fwd_ratio_per_iteration": (fwd / safe).tolist(),
        "edges_ratio": float(edges.sum() / max(all_edges.sum(), 1.0)),
        "cycles": cycles,
        "cycle_rows_equal_exact": bool(equal),
        "refresh_bytes": float(_epoch_sum(per_worker, "refresh.refresh_bytes").sum()),
        "eval_bytes": float(_epoch_sum(per_worker, "eval.eval_bytes").sum()),
        "allreduce_bytes": float(_epoch_sum(per_worker, "bwd.allreduce_bytes").sum()),
        "control_bytes": float(_epoch_sum(per_worker, "emma.control_bytes").sum()),
        "buffer_bytes": [w["emma"]["buffer_bytes"] for w in per_worker],
        "halo_history_bytes": [w["emma"]["halo_history_bytes"] for w in per_worker],
        "refreshes": per_worker[0]["emma"]["refreshes"] if per_worker else [],
    }


def emma_outputs(
    results: list[dict[str, Any]],
    epochs: list[dict[str, Any]],
    reports: list[dict[str, Any]],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Batch step: a job's ``outputs`` from an :class:`EmmaTrainer`'s three ports.

    :func:`~strata.operators.trainers.records.training_outputs` (accuracies, loss curve,
    seconds per iteration) plus Emma's headline figures from the report: S,
    the forward and backward halo bytes over the same run's exact exchange, the
    edges ratio, whether every cycle moved exactly one exact exchange of rows,
    the refresh iterations and the refresh, evaluation and buffer bytes.

    Examples:
        >>> report = {"emma": {"splits": 4, "fwd_bytes_ratio": 0.25,
        ...                    "bwd_bytes_ratio": 0.25, "edges_ratio": 0.25,
        ...                    "cycle_rows_equal_exact": True, "refreshes": [],
        ...                    "exact_exchange_bytes": 64.0, "refresh_bytes": 0.0,
        ...                    "eval_bytes": 128.0, "buffer_bytes": [32]}}
        >>> out = emma_outputs([{"test_accuracy": 0.8}], [], [report])
        >>> out["test_accuracy"], out["emma_fwd_bytes_ratio"], out["emma_splits"]
        (0.8, 0.25, 4)
    """
    from strata.operators.trainers.records import training_outputs

    outputs = training_outputs(results, epochs, extra)
    (report,) = reports
    summary = report["emma"]
    for key in (
        "splits",
        "fwd_bytes_ratio",
        "bwd_bytes_ratio",
        "edges_ratio",
        "cycle_rows_equal_exact",
        "exact_exchange_bytes",
        "refreshes",
        "refresh_bytes",
        "eval_bytes",
    ):
        outputs[f"emma_{key}"] = summary[key]
    outputs["emma_buffer_bytes"] = max(summary["buffer_bytes"], default=0)
    return outputs


@contextlib.contextmanager
def _one_rank(seed: int) -> Iterator[GangContext]:
    """A one-rank gloo group in this process, and its context."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        raise OperatorError.build(
            "torch.distributed",
            "EmmaTrainer.fit_local",
            "no process group in this process",
            "one already initialised",
            "run fit_local outside a gang worker",
        )
    store = dist.HashStore()  # type: ignore[attr-defined]
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield GangContext(
            rank=0,
            world_size=1,
            device=torch.device("cpu"),
            backend="gloo",
            base_seed=seed,
            name="emma-local",
        )
    finally:
        dist.destroy_process_group()
