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

import warnings
from dataclasses import dataclass

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
    config = config or LightGCNConfig()
    inter = split.inter
    user, item = train_pairs(split)
    adjacency = normalised_adjacency(user, item, inter.num_users, inter.num_items)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = LightGCN(inter.num_users, inter.num_items, config)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    val = ranking_task(split, "val")
    history: list[float] = []
    best: tuple[float, int, torch.Tensor, torch.Tensor] | None = None
    n = user.shape[0]
    for epoch in range(config.epochs):
        order = rng.permutation(n)
        negatives = np.asarray(rng.integers(0, inter.num_items, size=n), np.int64)
        for start in range(0, n, config.batch_size):
            rows = order[start : start + config.batch_size]
            u = torch.from_numpy(user[rows])
            pos = torch.from_numpy(item[rows])
            neg = torch.from_numpy(negatives[rows])
            users_e, items_e = model(adjacency)
            loss = bpr_loss(
                (users_e[u] * items_e[pos]).sum(1), (users_e[u] * items_e[neg]).sum(1)
            )
            base = model.embedding.weight
            reg = (
                base[u].pow(2).sum()
                + base[pos + inter.num_users].pow(2).sum()
                + base[neg + inter.num_users].pow(2).sum()
            ) / (2 * rows.shape[0])
            optimiser.zero_grad()
            (loss + config.weight_decay * reg).backward()
            optimiser.step()
        with torch.no_grad():
            users_e, items_e = model(adjacency)
        metrics = topk_metrics(
            users_e, items_e, val.users, val.seen, val.relevant, (20,)
        )
        history.append(metrics.ndcg[20])
        if best is None or metrics.ndcg[20] > best[0]:
            best = (metrics.ndcg[20], epoch, users_e.clone(), items_e.clone())
        elif epoch - best[1] >= config.patience:
            break
    assert best is not None
    return LightGCNResult(best[2], best[3], history, best[1])
