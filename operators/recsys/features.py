"""Node features for users and items (``e2egrec.md`` §4.1), from train only.

Users: their raw weak features (if the data has any), standardised, then the share
of their **train** interactions in each domain, and ``log(1 + train degree)``,
standardised. Items: raw weak features, standardised, the domain one-hot, and
``log(1 + train popularity)``, standardised. Standardisation statistics are taken
over the nodes that have at least one train interaction, from train counts only
(pitfall 1: no validation or test interaction reaches a feature).

Examples:
    >>> from strata.operators.recsys.synth import SynthConfig, synth_interactions
    >>> from strata.operators.recsys.split import temporal_split
    >>> split = temporal_split(synth_interactions(SynthConfig.smoke(), seed=0))
    >>> feats = build_features(split)
    >>> feats.user.shape, feats.item.shape  # 16 raw + 2 domains + 1 count
    ((2000, 19), (1000, 19))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from strata.operators.recsys.split import Split, train_pairs
from strata.storage._types import BoolArray, Float32Array

__all__ = ["RecFeatures", "build_features"]


@dataclass(frozen=True, slots=True)
class RecFeatures:
    """Standardised float32 node features per node type.

    Attributes:
        user: ``[num_users, f_user]`` user features.
        item: ``[num_items, f_item]`` item features.
        item_popularity: float32 train interaction count of every item.
    """

    user: Float32Array
    item: Float32Array
    item_popularity: Float32Array

    def tensors(self) -> dict[str, torch.Tensor]:
        """The features as ``{node_type: tensor}`` (``user``, ``item``)."""
        return {
            "user": torch.from_numpy(self.user),
            "item": torch.from_numpy(self.item),
        }

    @property
    def dims(self) -> dict[str, int]:
        """Feature width per node type."""
        return {"user": int(self.user.shape[1]), "item": int(self.item.shape[1])}


def _standardise(values: np.ndarray, rows: BoolArray) -> np.ndarray:
    """Columns centred and scaled by the statistics of ``rows`` only."""
    if values.shape[1] == 0:
        return values
    basis = values[rows] if rows.any() else values
    mean = basis.mean(axis=0)
    std = basis.std(axis=0)
    scaled: np.ndarray = (values - mean) / np.where(std > 1e-6, std, 1.0)
    return scaled


def build_features(split: Split) -> RecFeatures:
    """Build user and item features from the split's train interactions.

    Args:
        split: the temporal split; only ``split.train`` is read for counts.

    Returns:
        The features (see the module doc for the columns).
    """
    inter = split.inter
    user, item = train_pairs(split)
    n_dom = len(inter.domains)
    user_deg = np.bincount(user, minlength=inter.num_users).astype(np.float64)
    item_pop = np.bincount(item, minlength=inter.num_items).astype(np.float64)
    seen_users, seen_items = user_deg > 0, item_pop > 0
    empty_u = np.zeros((inter.num_users, 0))
    empty_i = np.zeros((inter.num_items, 0))
    raw_u = empty_u if inter.user_features is None else inter.user_features
    raw_i = empty_i if inter.item_features is None else inter.item_features
    domain_counts = np.zeros((inter.num_users, n_dom))
    np.add.at(domain_counts, (user, inter.item_domain[item]), 1.0)
    domain_mix = domain_counts / np.maximum(user_deg, 1.0)[:, None]
    onehot = np.eye(n_dom)[inter.item_domain]
    user_x = np.hstack(
        [
            _standardise(np.asarray(raw_u, dtype=np.float64), seen_users),
            domain_mix,
            _standardise(np.log1p(user_deg)[:, None], seen_users),
        ]
    )
    item_x = np.hstack(
        [
            _standardise(np.asarray(raw_i, dtype=np.float64), seen_items),
            onehot,
            _standardise(np.log1p(item_pop)[:, None], seen_items),
        ]
    )
    return RecFeatures(
        user=np.ascontiguousarray(user_x, dtype=np.float32),
        item=np.ascontiguousarray(item_x, dtype=np.float32),
        item_popularity=item_pop.astype(np.float32),
    )
