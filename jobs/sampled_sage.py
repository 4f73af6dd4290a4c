"""Sampled GraphSAGE on a generated planted-community graph.

A stochastic-block-model graph whose communities are the labels: an edge stays
inside its community with probability ``intra_fraction``, and node features are
noisy class centres (``noise`` near 1 makes features alone a weak classifier), so
the accuracy measures what neighbourhood aggregation adds. Half the nodes train
(``train_fraction``), 10% validate, 20% test. A 2-layer mean-aggregator GraphSAGE
trains on mini-batches of sampled blocks (fan-outs 10, 5; batch 1024), prepared by a
background thread that samples and gathers features from a feature store: in memory
(``store=memory``), or an Arrow dataset directory, memory-mapped
(``store=arrow``; written to ``data_dir``, default a directory under the system's
temporary directory). Evaluation is layer-wise full-neighbour inference::

    generate -> [save (store=arrow)] -> train (SampledTrainer) -> summary (outputs)

    strata run jobs/sampled_sage.py
    strata run jobs/sampled_sage.py --set num_nodes=200000 --set store=arrow

``dataset`` trains on other data instead: a Planetoid name (``cora``,
``citeseer``, ``pubmed``; files in ``data_dir``, default the shared datasets
folder), or any graph spec or path of :mod:`strata.storage.spec` with labels
(``sbm:n=100000,blocks=8,features=64``, a dataset directory, a graph folder)::

    strata run jobs/sampled_sage.py --set dataset=cora

``workers`` > 1 trains data-parallel on a gang
(:class:`~strata.operators.trainers.sampled.SampledGangTrainer`): one trainer
per part of the graph, each part's features and labels served by a feature
server over pyzmq, a cache of remote rows (``cache``: a fraction of the remote
rows or a row count; ``cache_policy``: frequency, degree, belady or none) and a
prefetcher (``prefetch`` batches, ``prefetch_bytes``). ``samplers`` > 0 runs
that many sampler workers apart from the trainers (Armada). ``latency`` and
``bandwidth`` make the feature servers behave like a cluster's network::

    strata run jobs/sampled_sage.py --set workers=2 --set cache=0.5
    strata run jobs/sampled_sage.py --set workers=1 --set samplers=1
    strata run jobs/sampled_sage.py --set workers=2 --set latency=0.002 \\
        --set bandwidth=1e9

``threads`` defaults to 1: on the shared 2-core machine one torch thread trained
1.7x more seeds per second than torch's default (12,963 vs 7,428 seeds/s, 5 epochs
of the default graph); ``--set threads=0`` keeps torch's default.

Outputs: accuracies (with ``chance`` = 1 / classes for scale), training throughput
``seeds_per_s`` (training nodes per second of training, evaluation excluded), and
the time the prefetch thread spent sampling and gathering and the time training
waited for it (``stall_s``).

References:
    William L. Hamilton, Rex Ying, Jure Leskovec. *Inductive Representation Learning
    on Large Graphs*. NeurIPS 2017, arXiv:1706.02216.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from strata.engine import Operator, Pipeline, at_least, between
from strata.operators.io.datasets import (
    community_dataset,
    load_dataset,
    save_dataset_dir,
)
from strata.operators.trainers import (
    ModelConfig,
    SampledTrainer,
    SamplingConfig,
    TrainConfig,
)
from strata.operators.trainers.records import training_outputs
from strata.operators.trainers.sampled import (
    SampledGangConfig,
    SampledGangTrainer,
    gang_outputs,
)

#: Dataset names that mean the shipped Planetoid data.
PLANETOID = ("cora", "citeseer", "pubmed")


@dataclass(frozen=True, slots=True)
class CommunityGraphConfig:
    """The generated planted-community graph (its seed is the training seed).

    Attributes:
        num_nodes: vertices.
        num_classes: communities (the labels).
        avg_degree: mean in-degree.
        intra_fraction: share of edges inside a community.
        num_features: feature width.
        noise: feature noise around the class centres (1: features alone are weak).
        train_fraction: share of the nodes that train (10% validate, 20% test).
    """

    num_nodes: int = 50_000
    num_classes: int = 8
    avg_degree: float = 10.0
    intra_fraction: float = 0.7
    num_features: int = 32
    noise: float = 1.0
    train_fraction: float = 0.5

    def __post_init__(self) -> None:
        where = "CommunityGraphConfig"
        at_least(
            where,
            1,
            num_nodes=self.num_nodes,
            num_classes=self.num_classes,
            num_features=self.num_features,
        )
        at_least(where, 0, avg_degree=self.avg_degree, noise=self.noise)
        between(
            where,
            0,
            1,
            intra_fraction=self.intra_fraction,
            train_fraction=self.train_fraction,
        )

    def describe(self) -> str:
        """One line for the summary."""
        return (
            f"sbm n={self.num_nodes} classes={self.num_classes} "
            f"degree={self.avg_degree} intra={self.intra_fraction} "
            f"features={self.num_features} noise={self.noise}"
        )


def _train_default() -> TrainConfig:
    return TrainConfig(
        ModelConfig("sage", hidden=64, num_layers=2, dropout=0.2),
        lr=0.01,
        weight_decay=0.0,
        epochs=5,
        patience=0,
        seed=0,
        device="auto",
        threads=1,
    )


@dataclass(frozen=True, slots=True)
class SampledSageConfig:
    """The job's parameters.

    Attributes:
        dataset: None trains on the generated graph (``graph``); a Planetoid
            name, or a graph spec or path with labels, trains on that instead.
        graph: the generated graph.
        train: model, optimiser, epochs, seed, device, checkpoints.
        sampling: fan-outs, batch size, prefetch depth, evaluation mode.
        gang: workers, sampler workers, cache, network model (``workers=1``
            and ``samplers=0`` train in this process).
        store: where the trainer reads the generated graph's features: in
            memory, or a memory-mapped Arrow dataset directory.
        data_dir: the Arrow dataset's directory (None: one under the system's
            temporary directory, named by the graph's settings); with
            ``dataset``, where its files are (None: the shared datasets folder).
    """

    dataset: str | None = None
    graph: CommunityGraphConfig = field(default_factory=CommunityGraphConfig)
    train: TrainConfig = field(default_factory=_train_default)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    gang: SampledGangConfig = field(default_factory=SampledGangConfig)
    store: Literal["memory", "arrow"] = "memory"
    data_dir: Path | None = None


#: The flat names of earlier versions.
ALIASES = {
    **{
        name: f"graph.{name}"
        for name in (
            "num_nodes",
            "num_classes",
            "avg_degree",
            "intra_fraction",
            "num_features",
            "noise",
            "train_fraction",
        )
    },
    "hidden": "train.model.hidden",
    "layers": "train.model.num_layers",
    "dropout": "train.model.dropout",
    **{
        name: f"train.{name}"
        for name in ("lr", "weight_decay", "epochs", "patience", "seed", "device")
    },
    **{name: f"train.{name}" for name in ("threads", "checkpoint_dir", "resume")},
    **{
        name: f"sampling.{name}"
        for name in ("fanouts", "batch_size", "eval_mode", "prefetch")
    },
    **{
        name: f"gang.{name}"
        for name in (
            "workers",
            "samplers",
            "cache",
            "cache_policy",
            "prefetch_bytes",
            "partitioner",
        )
    },
    "latency": "gang.network.latency_s",
    "bandwidth": "gang.network.bandwidth_Bps",
}


def build(config: SampledSageConfig) -> Pipeline:
    """Load or generate the graph, train sampled GraphSAGE, summarise (module docs)."""
    p = Pipeline("sampled-sage")
    source, described = _data_steps(p, config)
    gang = config.gang
    one_process = gang.workers == 1 and gang.samplers == 0
    trainer: Operator[Any, Any] = (
        SampledTrainer(config.train, config.sampling)
        if one_process
        else SampledGangTrainer(config.train, config.sampling, gang)
    )
    p.step("train", trainer, source)
    model, sampling = config.train.model, config.sampling
    extra = {
        "graph": described,
        "store": config.store if config.dataset is None else "memory",
        "settings": (
            f"sage: {model.num_layers} layers, {model.hidden} hidden, fanouts "
            f"{list(sampling.fanouts)}, batch {sampling.batch_size}, lr "
            f"{config.train.lr}, dropout {model.dropout}, epochs "
            f"{config.train.epochs}, eval {sampling.eval_mode.value}, seed "
            f"{config.train.seed}"
        ),
        "chance": 1.0 / config.graph.num_classes if config.dataset is None else None,
    }
    if one_process:
        p.step("summary", training_outputs, "train.result", "train.epochs", extra=extra)
    else:
        extra["gang"] = repr(trainer)
        p.step(
            "summary",
            gang_outputs,
            "train.result",
            "train.epochs",
            "train.report",
            extra=extra,
        )
    p.record("summary")
    return p


def _data_steps(p: Pipeline, config: SampledSageConfig) -> tuple[str, str]:
    """Add the steps that produce the training data; return the last and a label."""
    if config.dataset is not None:
        name = config.dataset
        spec = f"planetoid:{name}" if name in PLANETOID else name
        data_dir = None if config.data_dir is None else str(config.data_dir)
        p.step("load", load_dataset, spec=spec, data_dir=data_dir)
        return "load", spec
    graph = {**asdict(config.graph), "seed": config.train.seed}
    p.step("generate", community_dataset, **graph)
    if config.store == "arrow":
        directory = str(config.data_dir) if config.data_dir else _default_dir(graph)
        p.step("save", save_dataset_dir, "generate", directory=directory)
        return "save", config.graph.describe()
    return "generate", config.graph.describe()


def _default_dir(graph: dict[str, Any]) -> str:
    """A per-graph dataset directory under the system's temporary directory."""
    name = "-".join(f"{k}{v}" for k, v in graph.items())
    return str(Path(tempfile.gettempdir()) / "strata-datasets" / f"sbm-{name}")


def render(outputs: dict[str, Any]) -> str:
    """What ``strata run`` prints: the graph, the settings, accuracy, throughput."""
    chance = outputs.get("chance")
    lines = [
        f"{outputs['graph']} ({outputs['store']} feature store)",
        f"  {outputs['settings']}",
        f"  epochs run {outputs['epochs_run']} (best {outputs['best_epoch']}), "
        f"{outputs['epoch_s']:.2f} s/epoch, "
        f"final training loss {outputs['final_loss']:.4f}",
        f"  accuracy: train {outputs['train_accuracy']:.4f}   "
        f"val {outputs['val_accuracy']:.4f}   "
        f"test {outputs['test_accuracy']:.4f}"
        + (f"   (chance {chance:.4f})" if chance else ""),
        f"  throughput {outputs['seeds_per_s']:,.0f} seeds/s; prefetch thread: "
        f"sample {outputs.get('sample_s', 0.0):.2f} s, "
        f"gather {outputs.get('gather_s', 0.0):.2f} s; "
        f"training waited {outputs.get('stall_s', 0.0):.2f} s",
    ]
    if "mode" in outputs:
        lines.append(
            f"  {outputs['gang']}: {outputs['mode']}, partition "
            f"{outputs['partition']}, {outputs['rehomed_train']} training vertices "
            f"re-homed (balance {outputs['train_balance']:.3f})"
        )
        lines.append(
            f"  remote rows {outputs.get('remote_rows', 0):,} "
            f"(misses {outputs.get('miss_rows', 0):,}, cache fill "
            f"{outputs.get('fill_rows', 0):,}) in "
            f"{outputs.get('remote_requests', 0):,} requests, "
            f"{outputs.get('remote_bytes', 0) / 2**20:,.1f} MiB; cache hit rate "
            f"{outputs['hit_rate']:.3f}; servers agree: {outputs['traffic_agrees']}"
        )
        if outputs["samplers"]:
            lines.append(
                "  trainers waited on samplers "
                f"{outputs.get('recv_wait_s', 0.0):.2f} s; samplers waited on "
                f"trainers {outputs.get('send_blocked_s', 0.0):.2f} s"
            )
            full = outputs["full_structure_bytes"]
            held = ", ".join(f"{b / full:.2f}" for b in outputs["structure_bytes"])
            lines.append(
                f"  graph structure per sampler: {held} of a full replica "
                f"({full / 2**20:.1f} MiB)"
            )
    return "\n".join(lines)
