"""The Emma mode's report section and job outputs; :func:`EmmaTrainer` (a shim).

Emma runs in the one distributed trainer
(:class:`~strata.operators.trainers.distributed.trainer.DistributedTrainer`) with
``mode=Emma(...)``: the same partition, shared inputs, gang and epoch loop,
where every epoch is one Emma iteration run by
:class:`~strata.operators.trainers.distributed.emma.engine.EmmaEngine`. The
report gains an ``emma`` section (:func:`emma_summary`): the settings, halo bytes
per iteration and their ratio to the exact exchange of the same run, rows per
cycle against one exact exchange, edges, buffer memory and the refresh and
evaluation bytes. :func:`emma_outputs` turns it into a job's outputs.

Example (starts a gang, so not a doctest)::

    from strata.storage import load_planetoid
    from strata.operators.trainers import ModelConfig, TrainConfig
    from strata.operators.trainers.distributed import (
        DistributedConfig, DistributedTrainer, Emma, GangConfig)

    config = TrainConfig(ModelConfig("sage", hidden=16), epochs=200)
    dist = DistributedConfig(gang=GangConfig(workers=2), mode=Emma(splits=10))
    run = DistributedTrainer(config, dist).fit(load_planetoid("cora"))
    run.result.test_accuracy, run.report["emma"]["fwd_bytes_ratio"]

Examples:
    >>> from strata.operators.trainers import ModelConfig, TrainConfig
    >>> from strata.operators.trainers.distributed import (
    ...     DistributedConfig, DistributedTrainer, Emma, GangConfig)
    >>> from strata.storage import load_graph
    >>> config = TrainConfig(ModelConfig("sage", hidden=8), epochs=4, device="cpu")
    >>> dist = DistributedConfig(gang=GangConfig(workers=1), mode=Emma(2))
    >>> run = DistributedTrainer(config, dist).fit_local(
    ...     load_graph("sbm:n=200,blocks=4,features=8"))
    >>> run.report["emma"]["cycle_rows_equal_exact"], run.result.epochs_run
    (True, 4)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from strata.operators.errors import OperatorError
from strata.operators.trainers.config import TrainConfig
from strata.operators.trainers.distributed.config import DistributedConfig
from strata.operators.trainers.distributed.modes import Emma, Exact

if TYPE_CHECKING:
    from strata.operators.trainers.distributed.trainer import DistributedTrainer


def EmmaTrainer(
    config: TrainConfig, dist: DistributedConfig, emma: Emma
) -> DistributedTrainer:
    """Compatibility shim: ``DistributedTrainer(config, dist.with_mode(emma))``.

    The Emma option used to be a trainer subclass taking an exact-mode
    ``dist`` and the Emma settings apart; it is now the mode value itself.

    Raises:
        OperatorError: ``dist`` is not in exact mode (naming both settings).
    """
    from strata.operators.trainers.distributed.trainer import DistributedTrainer

    if not isinstance(dist.mode, Exact):
        raise OperatorError.build(
            "mode",
            "EmmaTrainer",
            "mode='exact' with emma (Emma builds on partition-parallel training)",
            f"mode={dist.mode.name!r} with emma=EmmaConfig(splits={emma.splits})",
            "Emma's chunks are source sets and HongTu's destination sets; run one "
            "of them",
        )
    return DistributedTrainer(config, dist.with_mode(emma))


def _epoch_sum(per_worker: list[dict[str, Any]], key: str) -> np.ndarray:
    """Per iteration, ``key`` summed over the workers."""
    rows = [[e.get(key, 0) for e in w["epochs"]] for w in per_worker]
    return np.asarray(rows, dtype=np.float64).sum(axis=0)


def emma_summary(per_worker: list[dict[str, Any]], emma: Emma) -> dict[str, Any]:
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
    """Batch step: a job's ``outputs`` from an Emma-mode trainer's three ports.

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
