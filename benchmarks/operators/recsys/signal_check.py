"""Quick single-seed check that the synthetic data carries graph signal.

Helper RB's development check of ``e2egrec.md`` G1 (B1 Recall@20 >= 1.05 x B0) and
"LightGCN (R) beats B0", run before the 3-seed acceptance harness
(``e2egrec_acceptance.py``); it trains each variant once on one data seed and
prints one line per variant (validation history, test Recall/NDCG@20, long-view
AUC, B1's refresh cost)::

    .venv/bin/python benchmarks/operators/recsys/signal_check.py \\
        --users 5000 --items 2500 --epochs 10 --variants B0,B1,E2E,R
"""

from __future__ import annotations

import argparse
import json
import time

import numba
import torch

from strata.operators.recsys.features import build_features
from strata.operators.recsys.graph import build_typed_graph
from strata.operators.recsys.lightgcn import LightGCNConfig, train_lightgcn
from strata.operators.recsys.metrics import topk_metrics
from strata.operators.recsys.split import ranking_task, temporal_split
from strata.operators.recsys.step import train_variant
from strata.operators.recsys.synth import SynthConfig, synth_interactions
from strata.operators.recsys.train import RecConfig, evaluate_topk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=5000)
    parser.add_argument("--items", type=int, default=2500)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--variants", default="B0,B1,E2E,R")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    inter = synth_interactions(SynthConfig(args.users, args.items), seed=0)
    split = temporal_split(inter)
    graph, feats = build_typed_graph(split), build_features(split)
    rows = {}
    for variant in args.variants.split(","):
        start = time.perf_counter()
        if variant == "R":
            cfg = LightGCNConfig(epochs=args.epochs, batch_size=4096, seed=args.seed)
            result = train_lightgcn(split, cfg)
            task = ranking_task(split, "test")
            m = topk_metrics(
                result.user, result.item, task.users, task.seen, task.relevant
            )
            row = {"val_ndcg20": result.val_ndcg, "recall20": m.recall[20]}
            row["ndcg20"] = m.ndcg[20]
        else:
            rec = RecConfig(variant=variant, epochs=args.epochs, seed=args.seed)
            trained = train_variant(rec, graph, feats, split)
            metrics = evaluate_topk(trained, graph, feats, split)
            row = {
                "val_ndcg20": trained.val_history,
                "recall20": metrics.recall[20],
                "ndcg20": metrics.ndcg[20],
                "long_view_auc": metrics.long_view_auc,
                "refresh_s": trained.stage_one_seconds + trained.inference_seconds,
            }
        row["seconds"] = time.perf_counter() - start
        rows[variant] = row
        print(variant, json.dumps(row), flush=True)
    if "B0" in rows:
        for other in ("B1", "R", "E2E"):
            if other in rows:
                ratio = rows[other]["recall20"] / rows["B0"]["recall20"]
                print(f"{other} / B0 Recall@20 = {ratio:.3f}")


if __name__ == "__main__":
    main()
