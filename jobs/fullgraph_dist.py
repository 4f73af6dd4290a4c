"""Full-graph GNN training on a gang of workers: exact, HongTu or Emma.

Any graph spec (``planetoid:cora``, ``rmat:scale=16,features=128``,
``sbm:n=200000,blocks=64``, a dataset directory) is trained on ``workers``
processes (CPU processes stand in for GPUs here)::

    load (graph spec) -> task (labels, features, masks) -> train -> summary
                                                        -> facts  -> summary

    strata run jobs/fullgraph_dist.py --set workers=2
    strata run jobs/fullgraph_dist.py --set graph=rmat:scale=16,features=64 \\
        --set mode=hongtu --set device_budget=64MiB --set workers=2
    strata run jobs/fullgraph_dist.py --set dist.mode=emma --set dist.mode.splits=4
    strata run jobs/fullgraph_dist.py --help     # every parameter, type and default

The parameters are one config (:class:`FullGraphDistConfig`): the model and
optimiser at ``train`` (a :class:`~strata.operators.trainers.TrainConfig`), the
gang at ``dist`` (a
:class:`~strata.operators.trainers.distributed.DistributedConfig`), what a
generated graph lacks at ``task``. ``dist.mode`` is a tagged union: ``--set
dist.mode=hongtu`` picks the mode, ``--set dist.mode.chunks=4`` sets its fields;
the flat names of earlier versions (``mode``, ``chunks``, ``workers``, ...) are
:data:`ALIASES`. ``train.restore_best`` is off: the accuracies are the last
epoch's (with ``train.patience`` > 0, set it on to measure the best epoch's).

``dist.mode`` picks the trainer:

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

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from strata.engine import Pipeline
from strata.operators.io.datasets import load_dataset
from strata.operators.io.task import TaskConfig, task_facts, with_task
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer
from strata.operators.trainers.distributed.config import GangConfig
from strata.operators.trainers.gang_records import HEADLINE, dist_outputs
from strata.operators.trainers.presets import describe_training

__all__ = ["ALIASES", "HEADLINE", "FullGraphDistConfig", "build", "render"]


@dataclass(frozen=True, slots=True)
class FullGraphDistConfig:
    """The job's parameters.

    Attributes:
        graph: a graph spec (``planetoid:cora``, ``rmat:scale=16``, a directory).
        data_dir: where dataset files are (None: the shared datasets folder).
        normalize_features: row-normalise the features.
        task: what a graph without labels, features or a split gets.
        train: model, optimiser, epochs (``device`` stays cpu: ``dist`` places
            workers).
        dist: the gang, the level-1 partition and the mode with its settings.
    """

    graph: str = "planetoid:cora"
    data_dir: Path | None = None
    normalize_features: bool = False
    task: TaskConfig = field(default_factory=TaskConfig)
    train: TrainConfig = field(
        default_factory=lambda: TrainConfig(
            ModelConfig("gcn"), epochs=50, restore_best=False, device="cpu"
        )
    )
    dist: DistributedConfig = field(
        default_factory=lambda: DistributedConfig(gang=GangConfig(workers=2))
    )


_MODE = ("chunks", "device_budget", "max_chunks", "chunk_method", "dedup")

#: The flat names of earlier versions.
ALIASES = {
    "model": "train.model.name",
    "model.kind": "train.model.name",
    "hidden": "train.model.hidden",
    "layers": "train.model.num_layers",
    "dropout": "train.model.dropout",
    **{k: f"train.{k}" for k in ("lr", "weight_decay", "epochs", "patience", "seed")},
    "workers": "dist.gang.workers",
    "device": "dist.gang.device",
    "threads": "dist.gang.threads_per_worker",
    "timeout_s": "dist.gang.timeout_s",
    "mode": "dist.mode",
    **{k: f"dist.mode.{k}" for k in (*_MODE, "cache_policy", "splits")},
    **{k: f"task.{k}" for k in ("classes", "features", "train_fraction")},
}


def build(config: FullGraphDistConfig) -> Pipeline:
    """Load the graph, give it a task, train on the gang, summarise (module docs)."""
    p = Pipeline(f"fullgraph-{config.dist.mode.name}")
    p.step(
        "load",
        load_dataset,
        spec=config.graph,
        data_dir=None if config.data_dir is None else str(config.data_dir),
        normalize_features=config.normalize_features,
    )
    p.step("task", with_task, "load", **asdict(config.task), seed=config.train.seed)
    p.step("train", DistributedTrainer(config.train, config.dist), "task")
    p.step("facts", task_facts, "task")
    extra = {
        "graph": config.graph,
        "mode": config.dist.mode.name,
        "workers": config.dist.workers,
        "settings": describe_training(config.train),
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
