"""One node's share of a 2-worker full-graph GCN on Cora (a multi-node test's node).

``python multinode_fit.py OUT`` trains with the node group of the environment
(``STRATA_*``) and saves the per-epoch losses and the final weights to ``OUT``;
the test trains the same model on node 0 in its own process.
"""

from __future__ import annotations

import sys

import torch

from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.data import TrainingData
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer
from strata.storage import load_planetoid

EPOCHS = 10


def train_config() -> TrainConfig:
    """The model of the test: GCN, dropout on, seeded."""
    return TrainConfig(
        ModelConfig("gcn", hidden=16, dropout=0.5),
        epochs=EPOCHS,
        patience=0,
        restore_best=False,
        device="cpu",
        threads=1,
        seed=7,
    )


def fit() -> dict[str, object]:
    """Train on a 2-worker gang (this node's share of it); losses and weights."""
    data = TrainingData.from_dataset(load_planetoid("cora"))
    dist = DistributedConfig(workers=2, timeout_s=120)
    run = DistributedTrainer(train_config(), dist).fit(data)
    return {"losses": [r.loss for r in run.history], "state": run.state}


if __name__ == "__main__":
    torch.save(fit(), sys.argv[1])
