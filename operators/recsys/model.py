"""The E2E-GRec model of ``e2egrec.md`` §4.2 (Strata's design).

* :class:`Encoder`: a 2-layer heterogeneous GraphSAGE (mean per relation, summed
  over relations, hidden 64, ReLU) over node features only (inductive), then the
  final linear projection ``W`` (64 x 64) to ``z``; ``W`` is the shared layer
  GradNorm measures.
* :class:`Tower`: an MLP (128 -> 64) over ``[id embedding (32), features,
  fuse(z)]``, one for users, one for items.
* :class:`FeatureFusion` (level 1): ``fuse(z) = sigmoid(G [x; z]) * (P z)``.
* Level 2: ``score(u, i) = <t_u, t_i> + a <z_u, z_i>``, ``a`` learnable, 0.1 at init.
* The long-view head: an MLP over ``[t_u * t_i, z_u * z_i]`` to a logit.
* GFAE: per node type a learned mask vector and a linear decoder ``z -> x``.

:class:`RecModel` puts them together for one :class:`VariantSpec`; its
``forward(batch)`` returns every task's loss, so one call is what a DDP wrapper
runs. Full-catalogue scores are inner products of :meth:`RecModel.score_vectors`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.layers.hetero import HeteroSAGE
from strata.operators.recsys.losses import (
    bce_loss,
    bpr_loss,
    masked_reconstruction_loss,
)
from strata.operators.recsys.variants import GraphSignal, VariantSpec
from strata.operators.samplers.typed import TypedNeighborSampler
from strata.operators.samplers.typed_block import TypedBlock
from strata.storage.hetero import Relation, TypedGraph

__all__ = [
    "Encoder",
    "FeatureFusion",
    "ModelDims",
    "RecBatch",
    "RecModel",
    "Tower",
]

NODE_TYPES = ("user", "item")


@dataclass(frozen=True, slots=True)
class ModelDims:
    """Widths of §4.2.

    Attributes:
        hidden: encoder width and ``z`` width (64).
        layers: encoder layers (2; one block per layer).
        id_dim: id embedding width (32).
        tower_hidden: tower MLP hidden width (128).
        tower_out: tower output width ``t`` (64).
        fuse_dim: width of ``fuse(z)`` (64).
        head_hidden: long-view head hidden width (64).
    """

    hidden: int = 64
    layers: int = 2
    id_dim: int = 32
    tower_hidden: int = 128
    tower_out: int = 64
    fuse_dim: int = 64
    head_hidden: int = 64


class Encoder(nn.Module):
    """Heterogeneous SAGE layers, ReLU between, then the shared projection ``W``.

    Args:
        in_dims: feature width per node type.
        relations: the graph's relations.
        hidden: layer width and output width.
        layers: number of SAGE layers.
    """

    def __init__(
        self,
        in_dims: Mapping[str, int],
        relations: Iterable[Relation],
        hidden: int = 64,
        layers: int = 2,
    ) -> None:
        super().__init__()
        relations = tuple(relations)
        dims: Mapping[str, int] = dict(in_dims)
        convs = []
        for _ in range(layers):
            convs.append(HeteroSAGE(dims, hidden, relations))
            dims = dict.fromkeys(in_dims, hidden)
        self.convs = nn.ModuleList(convs)
        self.proj = nn.Linear(hidden, hidden)

    @property
    def shared(self) -> torch.Tensor:
        """``W``, the last shared layer's weight (GradNorm's gradient probe)."""
        return self.proj.weight

    def forward(
        self, blocks: Sequence[TypedBlock], x: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """``z`` of the seeds (``blocks[-1]``'s destinations) per node type."""
        h = dict(x)
        for conv, block in zip(self.convs, blocks, strict=True):
            h = {t: F.relu(v) for t, v in conv(block, h).items()}
        return {t: self.proj(v) for t, v in h.items()}

    def forward_full(
        self, graph: TypedGraph, x: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """``z`` of every node: layer-wise full-neighbourhood inference."""
        h = dict(x)
        for conv in self.convs:
            assert isinstance(conv, HeteroSAGE)
            h = {t: F.relu(v) for t, v in conv.forward_full(graph, h).items()}
        return {t: self.proj(v) for t, v in h.items()}


class FeatureFusion(nn.Module):
    """Level 1: ``fuse(z) = sigmoid(G [x; z]) * (P z)``."""

    def __init__(self, x_dim: int, z_dim: int, out_dim: int) -> None:
        super().__init__()
        self.gate = nn.Linear(x_dim + z_dim, out_dim)
        self.proj = nn.Linear(z_dim, out_dim, bias=False)

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The gated projection of ``z``."""
        gate: torch.Tensor = torch.sigmoid(self.gate(torch.cat([x, z], dim=1)))
        projected: torch.Tensor = self.proj(z)
        return gate * projected


class Tower(nn.Module):
    """An MLP over ``[id embedding, features, fuse(z)]`` (fuse only with level 1)."""

    def __init__(self, num_ids: int, x_dim: int, dims: ModelDims, fusion: bool) -> None:
        super().__init__()
        self.ids = nn.Embedding(num_ids, dims.id_dim)
        nn.init.normal_(self.ids.weight, std=0.1)
        self.fusion = (
            FeatureFusion(x_dim, dims.hidden, dims.fuse_dim) if fusion else None
        )
        width = dims.id_dim + x_dim + (dims.fuse_dim if fusion else 0)
        self.mlp = nn.Sequential(
            nn.Linear(width, dims.tower_hidden),
            nn.ReLU(),
            nn.Linear(dims.tower_hidden, dims.tower_out),
        )

    def forward(
        self, ids: torch.Tensor, x: torch.Tensor, z: torch.Tensor | None
    ) -> torch.Tensor:
        """``t`` for the rows ``ids`` with features ``x`` and embeddings ``z``."""
        parts = [self.ids(ids), x]
        if self.fusion is not None:
            assert z is not None
            parts.append(self.fusion(x, z))
        out: torch.Tensor = self.mlp(torch.cat(parts, dim=1))
        return out


@dataclass(frozen=True, slots=True, eq=False)
class RecBatch:
    """One training batch: seeds, pairs, sampled blocks and features.

    Attributes:
        users: int64 ``[n_u]`` distinct global user ids (the user seeds).
        items: int64 ``[n_i]`` distinct global item ids (positives and negatives).
        user_pos: ``[b]`` position in ``users`` of each pair's user.
        pos: ``[b]`` position in ``items`` of each positive item.
        neg: ``[b]`` position in ``items`` of each sampled negative.
        labels: float ``[b]`` long-view labels, or ``None``.
        x_seed: per type, features of the seeds (rows of ``users``/``items``).
        blocks: the sampled blocks (``None`` without a joint encoder).
        x_input: per type, features of ``blocks[0]``'s source rows.
        gfae_mask: per type, bool ``[n_seeds]``: seeds masked in the GFAE pass.
    """

    users: torch.Tensor
    items: torch.Tensor
    user_pos: torch.Tensor
    pos: torch.Tensor
    neg: torch.Tensor
    labels: torch.Tensor | None
    x_seed: dict[str, torch.Tensor]
    blocks: list[TypedBlock] | None = None
    x_input: dict[str, torch.Tensor] | None = None
    gfae_mask: dict[str, torch.Tensor] | None = None


class RecModel(nn.Module):
    """Encoder, towers, fusion and heads of one variant.

    Args:
        spec: the variant.
        num_nodes: node count per type (``user``, ``item``).
        in_dims: feature width per type.
        relations: the graph's relations (for a joint encoder).
        dims: the widths.
        z_table: the frozen ``z`` per type (two-stage B1), else ``None``.
        gfae_plain: reconstruct from the unmasked pass (the ablation).
        towers: build the recommender (towers, long-view head); ``False`` for
            B1's stage 1, whose ``rank`` loss is BPR on ``<z_u, z_i>``.

    The GFAE loss is the mean of the user and item reconstruction errors, each
    over that type's masked seeds.
    """

    z_user: torch.Tensor
    z_item: torch.Tensor

    def __init__(
        self,
        spec: VariantSpec,
        num_nodes: Mapping[str, int],
        in_dims: Mapping[str, int],
        relations: Iterable[Relation] = (),
        dims: ModelDims | None = None,
        z_table: Mapping[str, torch.Tensor] | None = None,
        gfae_plain: bool = False,
        towers: bool = True,
    ) -> None:
        super().__init__()
        dims = dims or ModelDims()
        self.spec = spec
        self.dims = dims
        self.gfae_plain = gfae_plain
        self.has_towers = towers
        # Seconds in encoder passes (both GFAE passes), for the phase split.
        self.encoder_seconds = 0.0
        self.encoder = (
            Encoder(in_dims, relations, dims.hidden, dims.layers)
            if spec.graph is GraphSignal.JOINT
            else None
        )
        if spec.graph is GraphSignal.FROZEN:
            assert z_table is not None
            self.register_buffer("z_user", z_table["user"].detach().clone())
            self.register_buffer("z_item", z_table["item"].detach().clone())
        self.user_tower = Tower(
            num_nodes["user"], in_dims["user"], dims, spec.feature_fusion
        )
        self.item_tower = Tower(
            num_nodes["item"], in_dims["item"], dims, spec.feature_fusion
        )
        self.a = nn.Parameter(torch.tensor(0.1)) if spec.output_fusion else None
        head_in = dims.tower_out + (dims.hidden if spec.uses_z else 0)
        self.long_view = nn.Sequential(
            nn.Linear(head_in, dims.head_hidden),
            nn.ReLU(),
            nn.Linear(dims.head_hidden, 1),
        )
        if spec.gfae:
            self.mask_token = nn.ParameterDict(
                {t: nn.Parameter(torch.zeros(in_dims[t])) for t in NODE_TYPES}
            )
            self.decoders = nn.ModuleDict(
                {t: nn.Linear(dims.hidden, in_dims[t]) for t in NODE_TYPES}
            )

    # ------------------------------------------------------------------ parts
    def seed_z(self, batch: RecBatch) -> dict[str, torch.Tensor] | None:
        """``z`` of the batch's seeds: the encoder on the blocks, or the table."""
        if self.encoder is not None:
            assert batch.blocks is not None
            assert batch.x_input is not None
            z: dict[str, torch.Tensor] = self.encoder(batch.blocks, batch.x_input)
            return z
        if self.spec.graph is GraphSignal.FROZEN:
            return {"user": self.z_user[batch.users], "item": self.z_item[batch.items]}
        return None

    def pair_score(
        self,
        t_u: torch.Tensor,
        t_i: torch.Tensor,
        z_u: torch.Tensor | None,
        z_i: torch.Tensor | None,
    ) -> torch.Tensor:
        """``<t_u, t_i> + a <z_u, z_i>`` (level 2 only when the variant has it)."""
        score = (t_u * t_i).sum(1)
        if self.a is not None:
            assert z_u is not None
            assert z_i is not None
            score = score + self.a * (z_u * z_i).sum(1)
        return score

    def long_view_logit(
        self,
        t_u: torch.Tensor,
        t_i: torch.Tensor,
        z_u: torch.Tensor | None,
        z_i: torch.Tensor | None,
    ) -> torch.Tensor:
        """The long-view head's logit for each pair."""
        parts = [t_u * t_i]
        if self.spec.uses_z:
            assert z_u is not None
            assert z_i is not None
            parts.append(z_u * z_i)
        logit: torch.Tensor = self.long_view(torch.cat(parts, dim=1))
        return logit.squeeze(1)

    def _gfae(self, batch: RecBatch, z: dict[str, torch.Tensor]) -> torch.Tensor:
        """Masked feature reconstruction (or the plain ablation) over both types."""
        assert self.encoder is not None
        assert batch.blocks is not None
        assert batch.x_input is not None
        if self.gfae_plain:
            recon = z
            masks = {t: torch.ones(len(z[t]), dtype=torch.bool) for t in NODE_TYPES}
        else:
            assert batch.gfae_mask is not None
            masks = batch.gfae_mask
            masked = {}
            for t, x in batch.x_input.items():
                n = masks[t].shape[0]
                seeds = torch.where(masks[t][:, None], self.mask_token[t], x[:n])
                masked[t] = torch.cat([seeds, x[n:]])
            recon = self.encoder(batch.blocks, masked)
        losses = [
            masked_reconstruction_loss(
                self.decoders[t](recon[t]), batch.x_seed[t], masks[t]
            )
            for t in NODE_TYPES
        ]
        return (losses[0] + losses[1]) / 2

    # ------------------------------------------------------------------ forward
    def forward(self, batch: RecBatch) -> dict[str, torch.Tensor]:
        """Every task's loss on ``batch``: ``rank``, ``long_view``, ``gfae``.

        ``long_view`` is left out when the batch has no labels, ``gfae`` when the
        variant has no GFAE; without towers (B1's stage 1) ``rank`` is BPR on
        ``<z_u, z_i>``.
        """
        start = time.perf_counter()
        z = self.seed_z(batch)
        self.encoder_seconds += time.perf_counter() - start
        z_u = None if z is None else z["user"][batch.user_pos]
        z_p = None if z is None else z["item"][batch.pos]
        z_n = None if z is None else z["item"][batch.neg]
        losses: dict[str, torch.Tensor] = {}
        if self.has_towers:
            t_user = self.user_tower(batch.users, batch.x_seed["user"], _get(z, "user"))
            t_item = self.item_tower(batch.items, batch.x_seed["item"], _get(z, "item"))
            t_u = t_user[batch.user_pos]
            t_p, t_n = t_item[batch.pos], t_item[batch.neg]
            losses["rank"] = bpr_loss(
                self.pair_score(t_u, t_p, z_u, z_p), self.pair_score(t_u, t_n, z_u, z_n)
            )
            if batch.labels is not None:
                logit = self.long_view_logit(t_u, t_p, z_u, z_p)
                losses["long_view"] = bce_loss(logit, batch.labels)
        else:
            assert z_u is not None
            assert z_p is not None
            assert z_n is not None
            losses["rank"] = bpr_loss((z_u * z_p).sum(1), (z_u * z_n).sum(1))
        if self.spec.gfae:
            assert z is not None
            start = time.perf_counter()
            losses["gfae"] = self._gfae(batch, z)
            self.encoder_seconds += time.perf_counter() - start
        return losses

    # ------------------------------------------------------------------ eval
    @torch.no_grad()
    def full_z(
        self, graph: TypedGraph | None, x: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor] | None:
        """``z`` of every node (full-neighbourhood inference, or the frozen table)."""
        if self.encoder is not None:
            assert graph is not None
            return self.encoder.forward_full(graph, x)
        if self.spec.graph is GraphSignal.FROZEN:
            return {"user": self.z_user, "item": self.z_item}
        return None

    @torch.no_grad()
    def sampled_z(
        self,
        sampler: TypedNeighborSampler,
        x: Mapping[str, torch.Tensor],
        chunk: int = 4096,
    ) -> dict[str, torch.Tensor]:
        """``z`` of every node from sampled neighbourhoods (as in training).

        Args:
            sampler: a sampler with the training fan-outs; its draws use
                ``epoch = 2**31 - 1`` (no training epoch reaches it).
            x: features per node type.
            chunk: seeds per sampled batch.
        """
        assert self.encoder is not None
        out: dict[str, torch.Tensor] = {}
        batch = 0
        for node_type in NODE_TYPES:
            n = x[node_type].shape[0]
            parts = []
            for start in range(0, n, chunk):
                ids = np.arange(start, min(start + chunk, n), dtype=np.int64)
                blocks = sampler.sample({node_type: ids}, 2**31 - 1, batch)
                batch += 1
                inputs = {
                    t: x[t][torch.from_numpy(src)]
                    for t, src in blocks[0].src_global_ids.items()
                }
                parts.append(self.encoder(blocks, inputs)[node_type])
            out[node_type] = torch.cat(parts)
        return out

    @torch.no_grad()
    def towers_full(
        self, x: Mapping[str, torch.Tensor], z: Mapping[str, torch.Tensor] | None
    ) -> dict[str, torch.Tensor]:
        """``t`` of every user and item."""
        users = torch.arange(x["user"].shape[0])
        items = torch.arange(x["item"].shape[0])
        return {
            "user": self.user_tower(users, x["user"], _get(z, "user")),
            "item": self.item_tower(items, x["item"], _get(z, "item")),
        }

    @torch.no_grad()
    def score_vectors(
        self,
        graph: TypedGraph | None,
        x: Mapping[str, torch.Tensor],
        z: Mapping[str, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(user_vecs, item_vecs)`` whose inner products are the scores.

        ``[t_u, a z_u]`` and ``[t_i, z_i]`` with level 2, ``t`` alone without it;
        without towers (stage 1) ``z`` itself. ``z`` defaults to
        full-neighbourhood inference (:meth:`full_z`); pass sampled ``z`` to
        measure the train/eval mismatch.
        """
        if z is None:
            z = self.full_z(graph, x)
        if not self.has_towers:
            assert z is not None
            return z["user"], z["item"]
        t = self.towers_full(x, z)
        if self.a is None:
            return t["user"], t["item"]
        assert z is not None
        return (
            torch.cat([t["user"], self.a * z["user"]], dim=1),
            torch.cat([t["item"], z["item"]], dim=1),
        )


def _get(z: Mapping[str, torch.Tensor] | None, node_type: str) -> torch.Tensor | None:
    return None if z is None else z[node_type]
