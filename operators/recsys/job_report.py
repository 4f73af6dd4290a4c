"""The job's last two steps: :func:`evaluate` the trained variants, :func:`report`.

:func:`evaluate` rebuilds every trained variant from its step's wire form
(:func:`~strata.operators.recsys.step.trained_from_payload`; LightGCN R from its
embeddings) and measures, over the full item catalogue with train and validation
items excluded (``e2egrec.md`` §5), test Recall@K and NDCG@K and the long-view
AUC. It measures Recall@K and NDCG@K a second time with ``z`` from *sampled*
neighbourhoods at the training fan-outs (``sampled``, with ``<metric>_gap`` =
sampled - full): §4.5 / pitfall 6 report it to expose a train/eval mismatch. A
variant without a joint encoder has nothing sampled (its sampled numbers are the
full ones; LightGCN R has none: None). With an ``output_dir`` it also writes each
variant's top-K recommendations (first seed) to
``<output_dir>/recommendations_<variant>.parquet``
(:func:`~strata.operators.recsys.topk_io.write_topk`, original ids): one list per
user with at least one train interaction, ranked over the items the user never
interacted with (train, validation or test). Users without a train interaction
get none: they are skipped and counted (``skipped_users``).

:func:`report` folds the seeds: per variant the mean and standard deviation of
each metric, the training time, samples per second and the share of each phase
(sampling, forward, GradNorm, backward; GradNorm's share is G3's overhead), the
sampled-inference metrics and their gaps (``sampled``, folded the same way), B1's
refresh cost (stage-1 training plus one full inference), and the recsys table
that ``strata plot`` draws (:mod:`strata.operators.cli.plot_recsys`). Everything
measured in seconds sits under ``timing``, apart from the metrics, so two runs
(or two executors) compare on the rest.

Examples:
    >>> folded = fold_seeds([{"recall@20": 0.2}, {"recall@20": 0.4}], ["recall@20"])
    >>> folded["recall@20"], round(folded["recall@20_std"], 4)
    (0.30000000000000004, 0.1414)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from strata.operators.recsys.job_payloads import (
    Payload,
    features_from_payload,
    graph_from_payload,
    split_from_payload,
)
from strata.operators.recsys.metrics import topk_metrics
from strata.operators.recsys.split import Split, items_by_user, ranking_task
from strata.operators.recsys.step import trained_from_payload
from strata.operators.recsys.topk_io import write_topk
from strata.operators.recsys.train import RecConfig, RecMetrics, evaluate_topk

__all__ = ["PHASES", "evaluate", "fold_seeds", "recommend", "report"]

#: The training loop's phases, in order (``PhaseTimes``; forward = encoder +
#: towers, reported apart too).
PHASES = ("sampling", "forward", "gradnorm", "backward")
_PARTS = ("encoder", "towers")


def _metric_keys(ks: Sequence[int]) -> list[str]:
    return [f"{m}@{k}" for m in ("recall", "ndcg") for k in ks]


def _sampled_keys(ks: Sequence[int]) -> list[str]:
    """A run's ``sampled`` keys: each metric, then its gap to full inference."""
    keys = _metric_keys(ks)
    return [*keys, *(f"{k}_gap" for k in keys)]


def _sampled(
    full: Payload, recall: dict[int, float], ndcg: dict[int, float]
) -> Payload:
    """Sampled-inference metrics and their gaps (sampled - full) to ``full``."""
    out: Payload = {
        **{f"recall@{k}": float(v) for k, v in recall.items()},
        **{f"ndcg@{k}": float(v) for k, v in ndcg.items()},
    }
    for key in list(out):
        out[f"{key}_gap"] = out[key] - float(full[key])
    return out


@torch.no_grad()
def recommend(
    user_vecs: torch.Tensor, item_vecs: torch.Tensor, split: Split, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-``k`` unseen items of every user with a train interaction.

    Returns:
        ``(users, top_items, top_scores)``; an item id of -1 marks a slot the
        user had no unseen item for.
    """
    inter = split.inter
    trained = np.unique(inter.user[split.train])
    seen_indptr, seen_items = items_by_user(inter.user, inter.item, inter.num_users)
    k = min(k, inter.num_items)
    tops, scores = [], []
    for start in range(0, trained.shape[0], 1024):
        users = trained[start : start + 1024]
        block = (user_vecs[torch.from_numpy(users)] @ item_vecs.T).float()
        lengths = seen_indptr[users + 1] - seen_indptr[users]
        rows = np.repeat(np.arange(users.shape[0]), lengths)
        cols = np.concatenate(
            [seen_items[seen_indptr[u] : seen_indptr[u + 1]] for u in users]
        )
        block[torch.from_numpy(rows), torch.from_numpy(cols)] = float("-inf")
        values, top = torch.topk(block, k, dim=1)
        top[torch.isinf(values)] = -1
        tops.append(top.numpy().astype(np.int64))
        scores.append(values.numpy())
    empty = np.zeros((0, k))
    return (
        trained,
        np.concatenate(tops) if tops else empty.astype(np.int64),
        np.concatenate(scores) if scores else empty.astype(np.float32),
    )


def evaluate(
    graph: Payload,
    features: Payload,
    split: Payload,
    *trained: Payload,
    train: RecConfig,
    ks: tuple[int, ...] = (20, 50),
    output_dir: str | None = None,
    top_k: int = 50,
) -> Payload:
    """Batch step: test metrics of every trained run; top-K files (module docs).

    Args:
        graph: the typed train graph (wire form).
        features: the node features (wire form).
        split: the temporal split (wire form).
        *trained: the training steps' results (:class:`RecTrainStep`,
            :class:`LightGCNStep`), any variants and seeds.
        train: the job's training settings (each run's variant and seed are
            taken from its result).
        ks: the cut-offs K.
        output_dir: where the top-K Parquet files go (None: not written).
        top_k: recommendations per user in those files.
    """
    typed = graph_from_payload(graph)
    feats = features_from_payload(features)
    parts = split_from_payload(split)
    x = feats.tensors()
    task = ranking_task(parts, "test")
    runs: list[Payload] = []
    written: dict[str, str] = {}
    for result in trained:
        variant = str(result["variant"])
        if variant == "R":
            user_vecs, item_vecs = result["user"], result["item"]
            m = topk_metrics(
                user_vecs, item_vecs, task.users, task.seen, task.relevant, ks
            )
            recall, ndcg, auc_value = m.recall, m.ndcg, math.nan
            sampled: RecMetrics | None = None
        else:
            cfg = dataclasses.replace(train, variant=variant, seed=int(result["seed"]))
            model = trained_from_payload(cfg, result, typed, feats)
            metrics = evaluate_topk(model, typed, feats, parts, ks)
            recall, ndcg, auc_value = (
                metrics.recall,
                metrics.ndcg,
                metrics.long_view_auc,
            )
            sampled = metrics
            if model.model.encoder is not None:  # else nothing is sampled
                sampled = evaluate_topk(model, typed, feats, parts, ks, sampled=True)
            model.model.eval()
            user_vecs, item_vecs = model.model.score_vectors(typed, x)
        run: Payload = {
            "variant": variant,
            "seed": int(result["seed"]),
            **{f"recall@{k}": float(recall[k]) for k in ks},
            **{f"ndcg@{k}": float(ndcg[k]) for k in ks},
            "long_view_auc": None if math.isnan(auc_value) else float(auc_value),
            "best_epoch": int(result["best_epoch"]),
            "epochs_run": int(result["epochs_run"]),
            "val_ndcg@20": [float(v) for v in result["val_history"]],
            "tasks": list(result.get("tasks", [])),
            "weight_log": result.get("weight_log", []),
            "workers": int(result["workers"]),
            "timing": dict(result["timing"]),
        }
        run["sampled"] = (
            None if sampled is None else _sampled(run, sampled.recall, sampled.ndcg)
        )
        runs.append(run)
        if output_dir is not None and variant not in written:
            users, top_items, top_scores = recommend(user_vecs, item_vecs, parts, top_k)
            path = Path(output_dir) / f"recommendations_{variant}.parquet"
            write_topk(
                path,
                users=users,
                top_items=top_items,
                top_scores=top_scores,
                user_ids=parts.inter.user_ids,
                item_ids=parts.inter.item_ids,
            )
            written[variant] = str(path)
    return {
        "runs": runs,
        "ks": list(ks),
        "split": dataclasses.asdict(parts.report),
        "skipped_users": parts.report.users_without_train,
        "recommendations": written,
    }


def fold_seeds(runs: Sequence[Payload], keys: Sequence[str]) -> dict[str, float | None]:
    """Mean and sample standard deviation (``<key>_std``) of ``keys`` over runs.

    A key no run has a value for is None (mean and deviation).
    """
    folded: dict[str, float | None] = {}
    for key in keys:
        values = [float(r[key]) for r in runs if r.get(key) is not None]
        if not values:  # e.g. LightGCN's long-view AUC: it has no such head
            folded[key] = folded[f"{key}_std"] = None
            continue
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)
        folded[key] = mean
        folded[f"{key}_std"] = math.sqrt(var)
    return folded


def _timing(runs: Sequence[Payload]) -> dict[str, float]:
    """Training time, throughput and phase shares, averaged over the seeds."""
    seconds = [float(r["timing"]["train_s"]) for r in runs]
    out: dict[str, float] = {"train_s": sum(seconds) / len(seconds)}
    loops = [r["timing"] for r in runs if "samples" in r["timing"]]
    if loops:
        busy = sum(sum(float(t[p]) for p in PHASES) for t in loops)
        samples = sum(float(t["samples"]) for t in loops)
        out["samples_per_s"] = samples / busy if busy > 0 else 0.0
        for phase in (*PHASES, *_PARTS):
            spent = sum(float(t.get(phase, 0.0)) for t in loops)
            out[f"{phase}_share"] = spent / busy if busy > 0 else 0.0
        refresh = [float(t["stage_one_s"]) + float(t["inference_s"]) for t in loops]
        if any(refresh):
            out["refresh_s"] = sum(refresh) / len(refresh)
            out["stage_one_s"] = sum(float(t["stage_one_s"]) for t in loops) / len(
                loops
            )
            out["inference_s"] = sum(float(t["inference_s"]) for t in loops) / len(
                loops
            )
    return out


def _fold_sampled(runs: Sequence[Payload], ks: Sequence[int]) -> Payload | None:
    """The seeds' sampled-inference metrics and gaps, folded (None: none sampled)."""
    sampled = [r["sampled"] for r in runs if r.get("sampled") is not None]
    return fold_seeds(sampled, _sampled_keys(ks)) if sampled else None


def _weights(run: Payload) -> dict[str, Any]:
    """A run's GradNorm weights over its steps, per task (the plot's series)."""
    rows = run["weight_log"]
    tasks = run["tasks"]
    return {
        "step": [int(r[0]) for r in rows],
        "a": [float(r[1]) for r in rows],
        "weights": {t: [float(r[2 + j]) for r in rows] for j, t in enumerate(tasks)},
    }


def report(
    evaluated: Payload, variants: Sequence[str], gradnorm: Sequence[str]
) -> Payload:
    """Batch step: the run report's outputs (module docs).

    Args:
        evaluated: :func:`evaluate`'s result.
        variants: the variants in table order.
        gradnorm: the variants whose weights GradNorm balances (plotted).
    """
    ks = [int(k) for k in evaluated["ks"]]
    keys = [*_metric_keys(ks), "long_view_auc"]
    rows: list[Payload] = []
    timing: dict[str, Any] = {}
    table: dict[str, Any] = {"seeds": [], "variants": {}, "gradnorm": {}}
    for variant in variants:
        runs = sorted(
            (r for r in evaluated["runs"] if r["variant"] == variant),
            key=lambda r: int(r["seed"]),
        )
        if not runs:
            continue
        row: Payload = {
            "variant": variant,
            "seeds": len(runs),
            **fold_seeds(runs, keys),
            "epochs_run": [int(r["epochs_run"]) for r in runs],
            "best_epoch": [int(r["best_epoch"]) for r in runs],
            "sampled": _fold_sampled(runs, ks),
        }
        rows.append(row)
        timing[variant] = _timing(runs)
        table["seeds"] = [int(r["seed"]) for r in runs]
        table["variants"][variant] = {k: [r[k] for r in runs] for k in keys}
        if variant in gradnorm and runs[0]["weight_log"]:
            table["gradnorm"][variant] = _weights(runs[0])
    return {
        "variants": rows,
        "skipped_users": int(evaluated["skipped_users"]),
        "split": evaluated["split"],
        "recommendations": evaluated["recommendations"],
        "recsys": table,
        "timing": timing,
    }
