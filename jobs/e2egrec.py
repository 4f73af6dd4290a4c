"""E2E-GRec: a GNN trained end to end inside a two-tower recommender.

The steps of ``e2egrec.md`` §4.7: interactions (the synthetic user-item data of
§4.1, or a user's own table), the global temporal split, the typed train graph
and the train-only features, one training step per variant (and model seed), a
full-catalogue evaluation, and the report::

    generate | load -> split -> graph, features
      -> train-B0, train-B1, train-A1, train-A2, train-E2E [, F1, F2, R]
      -> evaluate -> report

    strata run jobs/e2egrec.py                                   # smoke size
    strata run jobs/e2egrec.py --set extra=true --set seeds=0,1,2
    strata run jobs/e2egrec.py --set interactions=events.parquet \\
        --set output_dir=recs
    strata run jobs/e2egrec.py --set data.num_users=20000 \\
        --set data.num_items=10000 --set epochs=20              # the full size

The default is the smoke configuration: 2,000 users and 1,000 items, the model
of §4.2 and the loop of §4.5 (fan-outs 15, 10; batches of 1,024; Adam 1e-3) for
3 epochs, which runs end to end in under a minute on two CPU cores (G5); §4.5's
schedule is ``--set epochs=20`` (early stopping, patience 3).

``interactions`` reads a Parquet or CSV table with columns ``user, item, timestamp[,
label][, domain]`` and ids of any type instead of generating data. ``workers`` > 1
trains every variant data-parallel on a gang; ``checkpoint_dir`` checkpoints every
training step (``resume=true`` continues from there). ``output_dir`` receives
``recommendations_<variant>.parquet`` (``user_id, rank, item_id, score``, the
table's own ids).

The report's outputs: per variant the test Recall@K and NDCG@K (mean and standard
deviation over ``seeds``) and long-view AUC; ``sampled``, the same Recall@K and
NDCG@K from sampled neighbourhoods at the training fan-outs and their gaps to
full inference (``<metric>_gap``, sampled - full: §4.5's train/eval mismatch);
``timing`` with each variant's
training seconds, samples per second, phase shares (GradNorm's is its overhead)
and B1's refresh cost (stage-1 training plus one full inference); how many users
were skipped for having no train interaction; and ``recsys``, the table
``strata plot`` draws (Recall@20 and NDCG@20 per variant with seed error bars, and
GradNorm's task weights).

References:
    Rui Xue, Shichao Zhu, Liang Qin, Guangmou Pan, Yang Song, Tianfu Wu.
    *E2E-GRec: An End-to-End Joint Training Framework for Graph Neural Networks
    and Recommender Systems*. arXiv:2511.20564, 2025. (Model, losses, fusion,
    sampling and targets here are Strata's own design, ``e2egrec.md`` §4.)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from strata.engine import Pipeline
from strata.operators.errors import OperatorError, check
from strata.operators.recsys.job_report import evaluate, report
from strata.operators.recsys.job_steps import features, generate, graph, load, split
from strata.operators.recsys.lightgcn import LightGCNConfig
from strata.operators.recsys.step import LightGCNStep, RecTrainStep
from strata.operators.recsys.synth import SynthConfig
from strata.operators.recsys.train import RecConfig
from strata.operators.recsys.variants import Variant, variant_spec

#: The variants every run trains (§4.7), then the optional ones.
VARIANTS = ("B0", "B1", "A1", "A2", "E2E")
EXTRA = ("F1", "F2", "R")


def _smoke_train() -> RecConfig:
    """§4.5's loop (widths, fan-outs, batches of 1,024, Adam 1e-3), 3 epochs."""
    return RecConfig(epochs=3, patience=3)


@dataclass(frozen=True, slots=True)
class E2EGRecConfig:
    """The job's parameters.

    Attributes:
        interactions: a user's interaction table (Parquet or CSV; columns
            user, item, timestamp[, label][, domain]) instead of generated data.
        data: the synthetic generator (the smoke size by default).
        data_seed: the generator's seed.
        fractions: train, validation and test shares of the temporal split.
        variants: the variants to train (B0 B1 A1 A2 E2E F1 F2; R = LightGCN).
        extra: also train F1, F2 and R.
        seeds: model seeds; every variant trains once per seed.
        train: the training loop's settings (its variant and seed are set per
            step).
        workers: data-parallel workers per training step (1: in the process).
        device: the gangs' device (cpu, cuda, auto).
        threads: torch threads of an in-process training step (0: as set).
        checkpoint_dir: checkpoint every training step there (None: never).
        checkpoint_every: epochs between checkpoints.
        resume: continue every training step from its checkpoint.
        ks: the cut-offs K of Recall@K and NDCG@K.
        output_dir: where recommendations_<variant>.parquet go (None: none).
        top_k: recommendations per user in those files.
    """

    interactions: str | None = None
    data: SynthConfig = field(default_factory=SynthConfig.smoke)
    data_seed: int = 0
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    variants: tuple[str, ...] = VARIANTS
    extra: bool = False
    seeds: tuple[int, ...] = (0,)
    train: RecConfig = field(default_factory=_smoke_train)
    workers: int = 1
    device: str = "cpu"
    threads: int = 1
    checkpoint_dir: str | None = None
    checkpoint_every: int = 1
    resume: bool = False
    ks: tuple[int, ...] = (20, 50)
    output_dir: str | None = None
    top_k: int = 50

    def __post_init__(self) -> None:
        where = "E2EGRecConfig"
        for name in self.variants:
            if name != "R":
                variant_spec(name)  # names the variants on a typo
        check(len(self.seeds) >= 1, "seeds", where, "at least one seed", self.seeds)
        check(
            len(set(self.seeds)) == len(self.seeds),
            "seeds",
            where,
            "distinct seeds",
            self.seeds,
        )
        check(self.workers >= 1, "workers", where, ">= 1", self.workers)
        check(len(self.ks) >= 1, "ks", where, "at least one K", self.ks)
        check(self.top_k >= 1, "top_k", where, ">= 1", self.top_k)
        if self.resume and self.checkpoint_dir is None:
            raise OperatorError.build(
                "resume",
                where,
                "a checkpoint_dir to resume from",
                "resume=true and checkpoint_dir=None",
                "set checkpoint_dir to the earlier run's directory",
            )

    @property
    def trained(self) -> tuple[str, ...]:
        """The variants this run trains, in table order."""
        names = list(self.variants)
        if self.extra:
            names += [v for v in EXTRA if v not in names]
        return tuple(names)


#: Short names.
ALIASES = {
    "epochs": "train.epochs",
    "batch_size": "train.batch_size",
    "lr": "train.lr",
    "fanouts": "train.fanouts",
    "hidden": "train.dims.hidden",
    "users": "data.num_users",
    "items": "data.num_items",
}


def _step_id(variant: str, seed: int, first: int) -> str:
    return f"train-{variant}" if seed == first else f"train-{variant}-s{seed}"


def build(config: E2EGRecConfig) -> Pipeline:
    """Data, split, graph, features, one training per variant and seed, report."""
    p = Pipeline("e2egrec")
    if config.interactions is not None:
        p.step("load", load, path=config.interactions)
        source = "load"
    else:
        settings = dataclasses.asdict(config.data)
        p.step("generate", generate, seed=config.data_seed, **settings)
        source = "generate"
    p.step("split", split, source, fractions=config.fractions)
    p.step("graph", graph, "split")
    p.step("features", features, "split")
    inputs = ("graph", "features", "split")
    trained: list[str] = []
    first = config.seeds[0]
    for variant in config.trained:
        for seed in config.seeds:
            step_id = _step_id(variant, seed, first)
            trained.append(step_id)
            p.step(step_id, _trainer(config, variant, seed, step_id), *inputs)
    p.step(
        "evaluate",
        evaluate,
        *inputs,
        *trained,
        train=config.train,
        ks=config.ks,
        output_dir=config.output_dir,
        top_k=config.top_k,
    )
    balanced = [v for v in config.trained if v != "R" and variant_spec(v).gradnorm]
    p.step("report", report, "evaluate", variants=config.trained, gradnorm=balanced)
    p.record("report")
    return p


def _trainer(config: E2EGRecConfig, variant: str, seed: int, step_id: str) -> Any:
    """The training step of one variant and seed."""
    train = config.train
    if variant == "R":
        lightgcn = LightGCNConfig(
            epochs=train.epochs, patience=train.patience, seed=seed
        )
        return LightGCNStep(
            lightgcn,
            threads=config.threads,
            name=step_id,
            checkpoint_dir=config.checkpoint_dir,
            checkpoint_every=config.checkpoint_every,
            resume=config.resume,
        )
    return RecTrainStep(
        dataclasses.replace(train, variant=Variant(variant), seed=seed),
        name=step_id,
        workers=config.workers,
        device=config.device,
        threads=config.threads,
        checkpoint_dir=config.checkpoint_dir,
        checkpoint_every=config.checkpoint_every,
        resume=config.resume,
    )


def render(outputs: dict[str, Any]) -> str:
    """What ``strata run`` prints: the per-variant table, then the timings."""
    split_report = outputs["split"]
    lines = [
        f"split: {split_report['num_train']} train, {split_report['num_val']} val, "
        f"{split_report['num_test']} test; {split_report['eval_users']} eval users; "
        f"{outputs['skipped_users']} users skipped (no train interaction)",
    ]
    rows = outputs["variants"]
    metrics = [k for k in rows[0] if "@" in k and not k.endswith("_std")]
    head = ["variant", *metrics, "AUC", "train s", "samples/s", "GradNorm"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for row in rows:
        timing = outputs["timing"][row["variant"]]
        cells = [row["variant"]]
        for key in metrics:
            cells.append(f"{row[key]:.4f} ± {row.get(f'{key}_std', 0.0):.4f}")
        auc = row.get("long_view_auc")
        cells.append("-" if auc is None else f"{auc:.4f}")
        cells.append(f"{timing['train_s']:.1f}")
        cells.append(f"{timing.get('samples_per_s', 0.0):,.0f}")
        share = timing.get("gradnorm_share")
        cells.append("-" if share is None else f"{share:.1%}")
        lines.append("| " + " | ".join(cells) + " |")
    for row in rows:
        sampled = row.get("sampled")
        if sampled is None:  # LightGCN R: no sampled inference
            continue
        cells = [
            f"{key} {sampled[key]:.4f} ({sampled[f'{key}_gap']:+.4f})"
            for key in metrics
        ]
        lines.append(
            f"sampled inference {row['variant']} (gap to full): " + ", ".join(cells)
        )
    b1 = outputs["timing"].get("B1", {})
    if "refresh_s" in b1:
        lines.append(
            f"B1 refresh cost: {b1['refresh_s']:.1f} s (stage 1 "
            f"{b1['stage_one_s']:.1f} s + full inference {b1['inference_s']:.2f} s)"
        )
    for variant, path in outputs["recommendations"].items():
        lines.append(f"recommendations {variant}: {path}")
    return "\n".join(lines)
