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
from pathlib import Path
from typing import Any

from strata.engine import Pipeline, at_least, between
from strata.operators.errors import OperatorError
from strata.operators.io.datasets import community_dataset, save_dataset_dir
from strata.operators.trainers import (
    EvalMode,
    ModelConfig,
    SampledTrainer,
    SamplingConfig,
    TrainConfig,
)
from strata.operators.trainers.records import training_outputs

STORES = ("memory", "arrow")


def build(
    num_nodes: int = 50_000,
    num_classes: int = 8,
    avg_degree: float = 10.0,
    intra_fraction: float = 0.7,
    num_features: int = 32,
    noise: float = 1.0,
    train_fraction: float = 0.5,
    hidden: int = 64,
    layers: int = 2,
    fanouts: tuple[int, ...] = (10, 5),
    batch_size: int = 1024,
    dropout: float = 0.2,
    lr: float = 0.01,
    weight_decay: float = 0.0,
    epochs: int = 5,
    patience: int = 0,
    seed: int = 0,
    store: str = "memory",
    data_dir: str | None = None,
    eval_mode: str = "layerwise",
    prefetch: int = 4,
    device: str = "auto",
    threads: int = 1,
    checkpoint_dir: str | None = None,
    resume: bool = False,
) -> Pipeline:
    if store not in STORES:
        raise OperatorError.build(
            "store", "sampled_sage", f"one of {list(STORES)}", repr(store)
        )
    where = f"{__name__}.build"
    at_least(
        where,
        1,
        num_nodes=num_nodes,
        num_classes=num_classes,
        num_features=num_features,
    )
    at_least(where, 0, avg_degree=avg_degree, noise=noise)
    between(where, 0, 1, intra_fraction=intra_fraction, train_fraction=train_fraction)
    config = TrainConfig(
        ModelConfig("sage", hidden=hidden, num_layers=layers, dropout=dropout),
        lr=lr,
        weight_decay=weight_decay,
        epochs=epochs,
        patience=patience,
        seed=seed,
        device=device,
        threads=threads,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
    )
    sampling = SamplingConfig(
        fanouts=fanouts,
        batch_size=batch_size,
        prefetch=prefetch,
        eval_mode=EvalMode(eval_mode),
    )
    graph: dict[str, Any] = {
        "num_nodes": num_nodes,
        "num_classes": num_classes,
        "avg_degree": avg_degree,
        "intra_fraction": intra_fraction,
        "num_features": num_features,
        "noise": noise,
        "train_fraction": train_fraction,
        "seed": seed,
    }
    p = Pipeline("sampled-sage")
    p.step("generate", community_dataset, **graph)
    source = "generate"
    if store == "arrow":
        directory = data_dir or _default_dir(graph)
        p.step("save", save_dataset_dir, "generate", directory=directory)
        source = "save"
    p.step("train", SampledTrainer(config, sampling), source)
    extra = {
        "graph": (
            f"sbm n={num_nodes} classes={num_classes} degree={avg_degree} "
            f"intra={intra_fraction} features={num_features} noise={noise}"
        ),
        "store": store,
        "settings": (
            f"sage: {layers} layers, {hidden} hidden, fanouts {list(fanouts)}, "
            f"batch {batch_size}, lr {lr}, dropout {dropout}, epochs {epochs}, "
            f"eval {eval_mode}, seed {seed}"
        ),
        "chance": 1.0 / num_classes,
    }
    p.step("summary", training_outputs, "train.result", "train.epochs", extra=extra)
    p.record("summary")
    return p


def _default_dir(graph: dict[str, Any]) -> str:
    """A per-graph dataset directory under the system's temporary directory."""
    name = "-".join(f"{k}{v}" for k, v in graph.items())
    return str(Path(tempfile.gettempdir()) / "strata-datasets" / f"sbm-{name}")


def render(outputs: dict[str, Any]) -> str:
    """What ``strata run`` prints: the graph, the settings, accuracy, throughput."""
    return "\n".join(
        [
            f"{outputs['graph']} ({outputs['store']} feature store)",
            f"  {outputs['settings']}",
            f"  epochs run {outputs['epochs_run']} (best {outputs['best_epoch']}), "
            f"{outputs['epoch_s']:.2f} s/epoch, "
            f"final training loss {outputs['final_loss']:.4f}",
            f"  accuracy: train {outputs['train_accuracy']:.4f}   "
            f"val {outputs['val_accuracy']:.4f}   "
            f"test {outputs['test_accuracy']:.4f}   (chance {outputs['chance']:.4f})",
            f"  throughput {outputs['seeds_per_s']:,.0f} seeds/s; prefetch thread: "
            f"sample {outputs.get('sample_s', 0.0):.2f} s, "
            f"gather {outputs.get('gather_s', 0.0):.2f} s; "
            f"training waited {outputs.get('stall_s', 0.0):.2f} s",
        ]
    )
