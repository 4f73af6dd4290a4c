"""LightGCN, the collaborative-filtering reference R (He et al., SIGIR 2020).

Users and items have free embeddings ``E0``; each layer propagates them over the
symmetric-normalised user-item train graph ``A_hat = D^-1/2 A D^-1/2`` (no
weights, no non-linearity), and the final embedding is the mean of the layer
outputs ``(E0 + E1 + ... + EK) / (K + 1)``. Training is BPR with one uniform
negative per train positive; the score is ``<e_u, e_i>``.

References:
    Xiangnan He, Kuan Deng, Xiang Wang, Yan Li, Yongdong Zhang, Meng Wang.
    *LightGCN: Simplifying and Powering Graph Convolution Network for
    Recommendation*. SIGIR 2020 (arXiv 2002.02126).

Examples:
    >>> import numpy as np
    >>> adj = normalised_adjacency(np.array([0, 1]), np.array([0, 0]), 2, 1)
    >>> [round(v, 4) for v in adj.to_dense()[2].tolist()]  # the item row
    [0.7071, 0.7071, 0.0]
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from strata.operators.errors import check
from strata.operators.recsys.losses import bpr_loss
from strata.operators.recsys.metrics import topk_metrics
from strata.operators.recsys.split import Split, ranking_task, train_pairs
from strata.storage._types import Int64Array

__all__ = [
    "LightGCN",
    "LightGCNConfig",
    "LightGCNResult",
    "LightGCNTrainer",
    "normalised_adjacency",
    "train_lightgcn",
]


@dataclass(frozen=True, slots=True)
class LightGCNConfig:
    """LightGCN settings.

    Attributes:
        dim: embedding width (64).
        layers: propagation layers K (3).
        lr: Adam learning rate.
        weight_decay: L2 on the batch's layer-0 embeddings (the paper's 1e-4).
        epochs: at most this many epochs.
        patience: early-stopping patience on validation NDCG@20.
        batch_size: positives per batch.
        seed: model seed.
    """

    dim: int = 64
    layers: int = 3
    lr: float = 5e-3
    weight_decay: float = 1e-4
    epochs: int = 20
    patience: int = 3
    batch_size: int = 2048
    seed: int = 0

    def __post_init__(self) -> None:
        check(self.layers >= 0, "layers", "LightGCNConfig", ">= 0", self.layers)
        check(self.dim > 0, "dim", "LightGCNConfig", "> 0", self.dim)


def normalised_adjacency(
    user: Int64Array, item: Int64Array, num_users: int, num_items: int
) -> torch.Tensor:
    """``D^-1/2 A D^-1/2`` of the bipartite graph, users first, as sparse CSR.

    Repeated pairs count once. Nodes are ``[users..., items...]``.
    """
    n = num_users + num_items
    key = np.unique(user * np.int64(num_items) + item)
    u, i = key // num_items, key % num_items + num_users
    rows = np.concatenate([u, i])
    cols = np.concatenate([i, u])
    deg = np.bincount(rows, minlength=n).astype(np.float64)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1.0)), 0.0)
    values = inv[rows] * inv[cols]
    coo = torch.sparse_coo_tensor(
        torch.from_numpy(np.stack([rows, cols])),
        torch.from_numpy(values.astype(np.float32)),
        (n, n),
        check_invariants=True,
    ).coalesce()
    with warnings.catch_warnings():
        # "Sparse CSR tensor support is in beta": CSR @ dense is the fast path.
        warnings.simplefilter("ignore", UserWarning)
        return coo.to_sparse_csr()


class LightGCN(nn.Module):
    """LightGCN embeddings for ``num_users`` users and ``num_items`` items.

    Args:
        num_users: users.
        num_items: items.
        config: the settings (``dim``, ``layers``).
    """

    def __init__(self, num_users: int, num_items: int, config: LightGCNConfig) -> None:
        super().__init__()
        self.num_users = num_users
        self.num_items = num_items
        self.layers = config.layers
        self.embedding = nn.Embedding(num_users + num_items, config.dim)
        nn.init.normal_(self.embedding.weight, std=0.1)

    def forward(self, adjacency: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Propagate; return the final ``(user, item)`` embeddings.

        Shapes:
            adjacency: sparse ``[U + I, U + I]``; returns ``[U, d]`` and ``[I, d]``.
        """
        x = self.embedding.weight
        total = x
        for _ in range(self.layers):
            x = adjacency @ x
            total = total + x
        final = total / (self.layers + 1)
        return final[: self.num_users], final[self.num_users :]


@dataclass(frozen=True, slots=True)
class LightGCNResult:
    """A trained LightGCN: final embeddings at the best validation epoch.

    Attributes:
        user: ``[num_users, dim]`` user embeddings.
        item: ``[num_items, dim]`` item embeddings.
        val_ndcg: validation NDCG@20 per epoch.
        best_epoch: the epoch whose embeddings are kept (0-based).
    """

    user: torch.Tensor
    item: torch.Tensor
    val_ndcg: list[float]
    best_epoch: int


class LightGCNTrainer:
    """LightGCN's training loop, one epoch at a time, with its complete state.

    It keeps :class:`~strata.operators.recsys.train.RecTrainer`'s loop protocol
    (``epoch``, ``batch``, ``stopped``, :meth:`run`, :meth:`state_dict`,
    :meth:`load_state_dict`), so :func:`~strata.operators.recsys.step.train_reference`
    checkpoints and resumes it with the code that does so for the recommender.
    Epoch ``e`` draws its order and its negatives from ``(seed, e)``: a resumed
    run carries no generator state and continues on the same trajectory.

    Args:
        split: the temporal split (only train interactions become graph edges).
        config: the settings.
    """

    def __init__(self, split: Split, config: LightGCNConfig) -> None:
        self.config = config
        inter = split.inter
        self.num_users, self.num_items = inter.num_users, inter.num_items
        self.user, self.item = train_pairs(split)
        self.adjacency = normalised_adjacency(
            self.user, self.item, self.num_users, self.num_items
        )
        torch.manual_seed(config.seed)
        self.model = LightGCN(self.num_users, self.num_items, config)
        self.optimiser = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self.val = ranking_task(split, "val")
        self.epoch = 0
        self.batch = 0  # always 0 between calls: the loop reports epoch ends only
        self.stopped = config.epochs <= 0
        self.val_history: list[float] = []
        self.best_ndcg = -math.inf
        self.best_epoch = -1
        self.best: dict[str, torch.Tensor] = {}

    def train_epoch(self) -> None:
        """One pass over the train pairs, then validation and early stopping."""
        config, n = self.config, self.user.shape[0]
        rng = np.random.default_rng((config.seed, self.epoch))
        order = rng.permutation(n)
        negatives = np.asarray(rng.integers(0, self.num_items, size=n), np.int64)
        for start in range(0, n, config.batch_size):
            rows = order[start : start + config.batch_size]
            u = torch.from_numpy(self.user[rows])
            pos = torch.from_numpy(self.item[rows])
            neg = torch.from_numpy(negatives[rows])
            users_e, items_e = self.model(self.adjacency)
            loss = bpr_loss(
                (users_e[u] * items_e[pos]).sum(1), (users_e[u] * items_e[neg]).sum(1)
            )
            base = self.model.embedding.weight
            reg = (
                base[u].pow(2).sum()
                + base[pos + self.num_users].pow(2).sum()
                + base[neg + self.num_users].pow(2).sum()
            ) / (2 * rows.shape[0])
            self.optimiser.zero_grad()
            (loss + config.weight_decay * reg).backward()
            self.optimiser.step()
        with torch.no_grad():
            users_e, items_e = self.model(self.adjacency)
        val = self.val
        ndcg = topk_metrics(
            users_e, items_e, val.users, val.seen, val.relevant, (20,)
        ).ndcg[20]
        self.val_history.append(ndcg)
        patience_out = False
        if not self.best or ndcg > self.best_ndcg:
            self.best_ndcg, self.best_epoch = ndcg, self.epoch
            self.best = {"user": users_e.clone(), "item": items_e.clone()}
        else:
            patience_out = self.epoch - self.best_epoch >= config.patience
        self.epoch += 1
        self.stopped = patience_out or self.epoch >= config.epochs

    def run(self, on_epoch: Callable[[LightGCNTrainer], None] | None = None) -> None:
        """Train until early stopping or the epoch limit (resumes where it is).

        Args:
            on_epoch: called after every epoch (e.g. to checkpoint).
        """
        while not self.stopped:
            self.train_epoch()
            if on_epoch is not None:
                on_epoch(self)

    def result(self) -> LightGCNResult:
        """The embeddings of the best validation epoch and the history."""
        check(bool(self.best), "epochs", "LightGCNTrainer", ">= 1 epoch run", 0)
        return LightGCNResult(
            self.best["user"], self.best["item"], self.val_history, self.best_epoch
        )

    def state_dict(self) -> dict[str, Any]:
        """The loop's complete state: tensors, numbers and lists."""
        return {
            "model": copy.deepcopy(self.model.state_dict()),
            "optimiser": copy.deepcopy(self.optimiser.state_dict()),
            "epoch": self.epoch,
            "batch": self.batch,
            "stopped": self.stopped,
            "best_ndcg": self.best_ndcg,
            "best_epoch": self.best_epoch,
            "best": {k: v.clone() for k, v in self.best.items()},
            "val_history": list(self.val_history),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (continues on the same trajectory)."""
        self.model.load_state_dict(state["model"])
        self.optimiser.load_state_dict(state["optimiser"])
        self.epoch = int(state["epoch"])
        self.batch = int(state["batch"])
        self.best_ndcg = float(state["best_ndcg"])
        self.best_epoch = int(state["best_epoch"])
        self.best = dict(state["best"])
        self.val_history = [float(v) for v in state["val_history"]]
        self.stopped = bool(state["stopped"])


def train_lightgcn(
    split: Split, config: LightGCNConfig | None = None
) -> LightGCNResult:
    """Train LightGCN on the split's train interactions, early-stopped on val NDCG@20.

    Args:
        split: the temporal split (only train interactions become graph edges).
        config: the settings.

    Returns:
        The embeddings of the best validation epoch and the validation history.
    """
    trainer = LightGCNTrainer(split, config or LightGCNConfig())
    trainer.run()
    return trainer.result()
