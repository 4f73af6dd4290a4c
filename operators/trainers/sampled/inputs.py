"""What every process of a sampled gang gets, and what a trainer rank returns.

:class:`RankInputs` is pickled once per process (its arrays travel in one
shared-memory segment; feature rows in the feature servers' own segments);
:class:`RankResult` is a trainer rank's answer to the step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from strata.engine.gang import SharedTensors
from strata.engine.gang.ray_gang import network_forced
from strata.operators.trainers.config import TrainConfig
from strata.operators.trainers.sampled.config import SampledGangConfig
from strata.operators.trainers.sampled.trainer import SamplingConfig
from strata.storage import CSRGraph
from strata.storage.features.server_group import attach_partition, partition_here
from strata.storage.features.traffic import Traffic

__all__ = ["RankInputs", "RankResult"]

# A part's rows fetched over the wire, and what that cost, by server endpoint
# (unique per server).
_FETCHED: dict[str, tuple[dict[str, np.ndarray], Traffic]] = {}


@dataclass(frozen=True, slots=True)
class RankInputs:
    """What every process of a sampled gang gets (pickled once per process).

    Arrays travel in ``shared`` (one shared-memory segment): ``train_ids`` (all
    training vertices, sorted), ``rank_of`` (the trainer of each training
    vertex, -1 elsewhere), ``owner`` (the part of every vertex), ``degree``
    (in-degree, for the top-degree cache), per part ``x.{p}`` / ``y.{p}`` (its
    rows in ascending id order) and, where ranks sample, ``graph.indptr`` /
    ``graph.indices`` (the out-CSR).
    """

    shared: SharedTensors
    config: TrainConfig
    sampling: SamplingConfig
    gang: SampledGangConfig
    num_nodes: int
    num_features: int
    num_classes: int
    endpoints: Mapping[int, str] = field(default_factory=dict)
    server_names: Mapping[int, str] = field(default_factory=dict)
    layouts: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    structure_on_trainers: bool = True

    def array(self, name: str) -> np.ndarray:
        """One shared array as numpy (no copy)."""
        return self.shared[name].numpy()

    def local_tables(self, part: int) -> dict[str, np.ndarray]:
        """Part ``part``'s rows (``x``, ``y``) in ascending id order, mapped here.

        With feature servers they are the servers' own shared segments
        (:func:`~strata.storage.features.server.attach_partition`); a one-part
        run keeps them in ``shared``. A rank on another machine than the
        servers (or any rank when ``$STRATA_GANG_NETWORK=1``) reads them from
        the part's server once, over the wire (the network path).
        """
        if part in self.layouts:
            layout = self.layouts[part]
            if partition_here(layout) and not network_forced():
                return attach_partition(layout)[1]
            return self._fetched(part, [t["attr"] for t in layout["tables"]])
        return {"x": self.array(f"x.{part}"), "y": self.array(f"y.{part}")}

    def _fetched(self, part: int, attrs: list[str]) -> dict[str, np.ndarray]:
        endpoint = self.endpoints[part]
        if endpoint not in _FETCHED:
            from strata.storage.features.remote import RemoteFeatureStore

            owner = self.array("owner")
            ids = np.flatnonzero(owner == part)
            with RemoteFeatureStore(
                dict(self.endpoints), owner, timeout_s=self.gang.fetch_timeout_s
            ) as store:
                tables = {attr: store.fetch(attr, {part: ids})[part] for attr in attrs}
                _FETCHED[endpoint] = (tables, store.traffic.snapshot())
        return _FETCHED[endpoint][0]

    def partition_traffic(self, part: int) -> Traffic:
        """What reading part ``part`` over the wire cost (zero where it was mapped)."""
        fetched = _FETCHED.get(self.endpoints.get(part, ""))
        return Traffic() if fetched is None else fetched[1]

    def graph(self) -> CSRGraph:
        """The graph (shared arrays; its in-adjacency is computed here)."""
        return CSRGraph(
            indptr=self.array("graph.indptr"),
            indices=self.array("graph.indices"),
            num_nodes=self.num_nodes,
        )

    def trainer_rank(self, gang_rank: int) -> int:
        """The trainer index of a gang rank (samplers come first)."""
        return gang_rank - self.gang.samplers


@dataclass(frozen=True, slots=True)
class RankResult:
    """What one trainer rank returns.

    Attributes:
        rank: the trainer index.
        epochs: per epoch, the rank's counters (traffic, cache, times, waits).
        step_losses: per epoch, the global batch's mean loss of every step (the
            same on every rank: all-reduced).
        epoch_losses: per epoch, the mean loss over every training seed.
        train_correct: per epoch, correct training predictions (all ranks).
        state: trainer rank 0's final weights (``None`` elsewhere).
        setup: setup counters (label fetch, first schedule and cache fill).
    """

    rank: int
    epochs: list[dict[str, Any]]
    step_losses: list[list[float]]
    epoch_losses: list[float]
    train_correct: list[int]
    state: dict[str, torch.Tensor] | None
    setup: dict[str, Any]
