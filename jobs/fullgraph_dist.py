"""Full-graph GNN training on a gang of workers: exact, HongTu or Emma.

Any graph spec (``planetoid:cora``, ``rmat:scale=16,features=128``,
``sbm:n=200000,blocks=64``, a dataset directory) is trained on ``workers``
processes (CPU processes stand in for GPUs here)::

    load (graph spec) -> task (labels, features, masks) -> train -> summary
                                                        -> facts  -> summary

    strata run jobs/fullgraph_dist.py --set workers=2
    strata run jobs/fullgraph_dist.py --set graph=rmat:scale=16,features=64 \\
        --set mode=hongtu --set device_budget=64MiB --set workers=2
    strata run jobs/fullgraph_dist.py --set mode=emma --set splits=4

``mode`` picks the trainer:

* ``exact``: partition-parallel training
  (:class:`~strata.operators.trainers.distributed.DistributedTrainer`): each worker owns
  one part of a METIS-style partition and exchanges halo rows every layer.
* ``hongtu``: chunked training with host offload and deduplicated loading; with
  ``device_budget`` (bytes, or ``64MiB``, ``1.5GiB``) the trainer picks the
  number of chunks per worker from its memory model (``chunks`` forces it).
* ``emma``: the Emma option
  (:class:`~strata.operators.trainers.distributed.emma.EmmaTrainer`): source chunking
  into ``splits`` parts with moving aggregation, exact evaluation.

Exact and HongTu results equal single-device training for any worker count.

``task`` fills in what a generated graph lacks (and says so in the outputs):
labels uniform in ``[0, classes)`` (RMAT has none: the accuracy then measures
nothing, the run measures the system), Gaussian features of width ``features``
and a random split (``train_fraction``, 10% validation, the rest test). Labels,
features and masks a dataset has are kept.

Outputs: the accuracies and loss curve (as every training job), the plan (HongTu:
chunks, alpha, modelled peaks; Emma: its headline figures) and the counters, per
worker and per epoch: bytes host->device, device->host and device<->device, halo
rows exchanged, and peak per-worker memory: ``tensor_peak_bytes`` (HongTu: the
device arena's high-water mark; exact and Emma modes: resident tensors, Emma's
moving buffers included, plus what autograd saved for the backward pass) and
every worker's peak RSS (which includes the interpreter and the mapped host
store). The train step's counters in the run report hold the same totals.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from strata.engine import Operator, Pipeline, at_least, between
from strata.operators.errors import OperatorError
from strata.operators.io.datasets import load_dataset
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer
from strata.operators.trainers.records import training_outputs

MODES = ("exact", "hongtu", "emma")
_WHERE = "fullgraph_dist"
_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def parse_bytes(value: int | str | None) -> int | None:
    """A byte count from an int or a string such as ``64MiB``.

    Examples:
        >>> parse_bytes("1.5KiB"), parse_bytes(4096), parse_bytes(None)
        (1536, 4096, None)
    """
    if value is None or isinstance(value, int):
        return value
    match = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise OperatorError.build(
            "device_budget",
            _WHERE,
            "bytes as an integer or with a unit (KiB, MiB, GiB)",
            repr(value),
        )
    return int(float(match.group(1)) * _UNITS[unit])


def with_task(
    payload: dict[str, Any],
    *,
    classes: int,
    features: int,
    train_fraction: float,
    seed: int,
) -> dict[str, Any]:
    """Batch step: the dataset with labels, features and split masks.

    What the dataset lacks is drawn from ``numpy.random.default_rng(seed)``:
    labels uniform in ``[0, classes)``, standard-normal float32 features of width
    ``features``, and a split of ``train_fraction`` training, 10% validation and
    the rest test nodes. ``meta["synthesized"]`` lists what was drawn.

    Examples:
        >>> from strata.operators.io.datasets import load_dataset
        >>> payload = load_dataset("rmat:scale=6,edge_factor=4")
        >>> out = with_task(payload, classes=3, features=5, train_fraction=0.5,
        ...                 seed=0)
        >>> out["node"]["x"].shape, out["meta"]["synthesized"]
        ((64, 5), ['y', 'x', 'masks'])
    """
    n = int(payload["num_nodes"])
    node = dict(payload["node"])
    meta = dict(payload["meta"])
    rng = np.random.default_rng(seed)
    drawn = []
    if "y" not in node:
        node["y"] = rng.integers(0, classes, n, dtype=np.int64)
        meta["num_classes"] = classes
        drawn.append("y")
    if "x" not in node:
        node["x"] = rng.standard_normal((n, features), dtype=np.float32)
        drawn.append("x")
    if "train_mask" not in node:
        u = rng.random(n)
        node["train_mask"] = u < train_fraction
        node["val_mask"] = (u >= train_fraction) & (u < train_fraction + 0.1)
        node["test_mask"] = u >= train_fraction + 0.1
        drawn.append("masks")
    meta["synthesized"] = drawn
    return {**payload, "node": node, "meta": meta}


def task_facts(payload: dict[str, Any]) -> dict[str, Any]:
    """Batch step: what the summary reports about the data (not the arrays).

    Examples:
        >>> task_facts({"name": "g", "num_nodes": 3, "meta": {"synthesized": []}})
        {'dataset': 'g', 'num_nodes': 3, 'synthesized': []}
    """
    return {
        "dataset": payload["name"],
        "num_nodes": int(payload["num_nodes"]),
        "synthesized": list(payload["meta"].get("synthesized", [])),
    }


def trainer_for(
    config: TrainConfig, dist: DistributedConfig, mode: str, splits: int
) -> Operator[Any, Any]:
    """The training step of ``mode`` (emma: ``dist`` in exact mode plus S)."""
    if mode == "emma":
        from strata.operators.trainers.distributed.emma import EmmaConfig, EmmaTrainer

        return EmmaTrainer(config, dist, EmmaConfig(splits=splits))
    return DistributedTrainer(config, dist)


#: Counters summed into each worker's per-epoch headline figures.
HEADLINE = {
    "h2d_bytes": ("h2d_bytes", "grad_h2d_bytes", "cache_h2d_bytes", "topo_h2d_bytes"),
    "d2h_bytes": ("d2h_bytes", "cache_d2h_bytes"),
    "d2d_bytes": ("peer_send_bytes", "halo_send_bytes"),
    "halo_rows": ("halo_send_rows", "peer_send_rows"),
    "allreduce_bytes": ("allreduce_bytes",),
}


def headline(epoch: dict[str, int]) -> dict[str, int]:
    """One worker's epoch counters (``"<phase>.<name>"``) as the headline sums.

    The training and evaluation phases count (forward, backward, evaluation);
    the one-off ``setup`` phase (features to the device, topology), which the
    trainer books into the first epoch, does not: :func:`setup_counters` has it.
    ``d2d_bytes`` and ``halo_rows`` count what the worker *sent* to peers (halo
    exchange in exact and Emma mode, peer copies in HongTu), so the gang's sum
    counts each transfer once.

    Examples:
        >>> headline({"fwd.halo_send_rows": 3, "bwd.halo_send_rows": 3,
        ...           "setup.halo_send_rows": 9, "fwd.h2d_bytes": 8})["halo_rows"]
        6
    """
    return _sums({k: v for k, v in epoch.items() if not k.startswith("setup.")})


def setup_counters(epochs: list[dict[str, int]]) -> dict[str, int]:
    """The one-off ``setup`` phase's headline sums (see :func:`headline`)."""
    first = epochs[0] if epochs else {}
    return _sums({k: v for k, v in first.items() if k.startswith("setup.")})


def _sums(counters: dict[str, int]) -> dict[str, int]:
    return {
        key: sum(v for k, v in counters.items() if k.split(".", 1)[1] in names)
        for key, names in HEADLINE.items()
    }


def dist_outputs(
    results: list[dict[str, Any]],
    epochs: list[dict[str, Any]],
    reports: list[dict[str, Any]],
    facts: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Batch step: accuracies, the plan and the per-worker per-epoch counters."""
    extra = {**(extra or {}), **facts}
    outputs = training_outputs(results, epochs, extra)
    (report,) = reports
    if "emma" in report:
        from strata.operators.trainers.distributed.emma import emma_outputs

        outputs = emma_outputs(results, epochs, reports, extra)
    workers = report["per_worker"]
    outputs["partition"] = report["partition"]
    if "plan" in report:
        plan = report["plan"]
        outputs["plan"] = {k: v for k, v in plan.items() if k != "candidates"}
        outputs["plan"]["candidates"] = plan["candidates"]
    outputs["counters"] = [
        {
            "rank": w["rank"],
            "epochs": [headline(e) for e in w["epochs"]],
            "setup": setup_counters(w["epochs"]),
            "peak_rss_bytes": w["peak_rss_bytes"],
            "tensor_peak_bytes": _tensor_peak(w),
            **(
                {"arena_peak_bytes": w["arena_peak_bytes"]}
                if "arena_peak_bytes" in w
                else {}
            ),
        }
        for w in workers
    ]
    per_epoch = [
        {key: sum(w["epochs"][i][key] for w in outputs["counters"]) for key in HEADLINE}
        for i in range(len(workers[0]["epochs"]))
    ]
    outputs["counters_per_epoch"] = per_epoch
    outputs["peak_rss_bytes"] = max(w["peak_rss_bytes"] for w in workers)
    tensor_peaks = [c["tensor_peak_bytes"] for c in outputs["counters"]]
    if all(p is not None for p in tensor_peaks):
        outputs["tensor_peak_bytes"] = max(tensor_peaks)
    peaks = [w["arena_peak_bytes"] for w in workers if "arena_peak_bytes" in w]
    if peaks:
        outputs["arena_peak_bytes"] = max(peaks)
    outputs["gang_startup_s"] = report["startup_s"]
    return outputs


def _tensor_peak(worker: dict[str, Any]) -> int | None:
    """Peak per-worker tensor bytes: HongTu's arena, else the exact engine's meter.

    HongTu accounts every tensor it brings to the device in its arena (modelled
    bounds for torch's temporaries included); the exact and Emma engines measure
    their resident tensors plus what autograd saved for backward
    (:class:`~strata.operators.trainers.distributed.partition_parallel.SavedTensorMeter`).
    None where neither was measured.
    """
    if "arena_peak_bytes" in worker:
        return int(worker["arena_peak_bytes"])
    peak = worker.get("tensor_peak_bytes")
    return None if peak is None else int(peak)


def build(
    graph: str = "planetoid:cora",
    workers: int = 2,
    mode: str = "exact",
    model: str = "gcn",
    hidden: int = 16,
    layers: int = 2,
    dropout: float = 0.5,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    epochs: int = 50,
    patience: int = 0,
    seed: int = 0,
    device_budget: int | str | None = None,
    chunks: int | None = None,
    max_chunks: int = 64,
    chunk_method: str = "recursive",
    dedup: str = "both",
    cache_policy: str = "auto",
    splits: int = 10,
    classes: int = 16,
    features: int = 64,
    train_fraction: float = 0.1,
    normalize_features: bool = False,
    device: str = "cpu",
    threads: int | None = None,
    timeout_s: float | None = None,
    data_dir: str | None = None,
) -> Pipeline:
    if mode not in MODES:
        raise OperatorError.build("mode", _WHERE, f"one of {list(MODES)}", repr(mode))
    at_least(_WHERE, 1, splits=splits, classes=classes, features=features)
    between(_WHERE, 0, 1, train_fraction=train_fraction)
    config = TrainConfig(
        ModelConfig(model, hidden=hidden, num_layers=layers, dropout=dropout),
        lr=lr,
        weight_decay=weight_decay,
        epochs=epochs,
        patience=patience,
        restore_best=patience > 0,
        seed=seed,
        device="cpu",
    )
    dist = DistributedConfig(
        workers=workers,
        mode="hongtu" if mode == "hongtu" else "exact",
        device_budget=parse_bytes(device_budget),
        chunks=chunks,
        max_chunks=max_chunks,
        chunk_method=chunk_method,
        dedup=dedup,
        cache_policy=cache_policy,
        device=device,
        timeout_s=timeout_s,
        threads_per_worker=threads,
    )
    p = Pipeline(f"fullgraph-{mode}")
    p.step(
        "load",
        load_dataset,
        spec=graph,
        data_dir=data_dir,
        normalize_features=normalize_features,
    )
    p.step(
        "task",
        with_task,
        "load",
        classes=classes,
        features=features,
        train_fraction=train_fraction,
        seed=seed,
    )
    p.step("train", trainer_for(config, dist, mode, splits), "task")
    p.step("facts", task_facts, "task")
    extra = {
        "graph": graph,
        "mode": mode,
        "workers": workers,
        "settings": (
            f"{model}: {layers} layers, {hidden} hidden, dropout {dropout}, lr {lr}, "
            f"epochs {epochs}, seed {seed}"
        ),
    }
    p.step(
        "summary",
        dist_outputs,
        "train.result",
        "train.epochs",
        "train.report",
        "facts",
        extra=extra,
    )
    p.record("summary")
    return p


def render(outputs: dict[str, Any]) -> str:
    """What ``strata run`` prints: settings, accuracies, the counters' totals."""
    epochs = outputs["counters_per_epoch"]
    last = epochs[-1] if epochs else {}
    lines = [
        f"{outputs['graph']} / {outputs['mode']} on {outputs['workers']} workers / "
        f"{outputs['settings']}",
        f"  epochs run {outputs['epochs_run']}, {outputs['epoch_s'] * 1000:.1f} "
        f"ms/epoch, final training loss {outputs['final_loss']:.4f}",
        f"  accuracy: train {outputs['train_accuracy']:.4f}   "
        f"val {outputs['val_accuracy']:.4f}   test {outputs['test_accuracy']:.4f}",
        "  last epoch, all workers: "
        + ", ".join(f"{k} {v:,}" for k, v in last.items()),
    ]
    if "plan" in outputs:
        plan = outputs["plan"]
        lines.append(
            f"  plan: {plan['chunks']} chunks per worker, alpha {plan['alpha']:.2f}, "
            f"host rows {plan['host_rows']:,} of {plan['naive_host_rows']:,} naive"
        )
    peak = outputs.get("tensor_peak_bytes")
    tensors = f"tensors {peak / 2**20:.1f} MiB, " if peak else ""
    lines.append(
        f"  per-worker peak: {tensors}RSS {outputs['peak_rss_bytes'] / 2**20:.0f} MiB"
    )
    return "\n".join(lines)
