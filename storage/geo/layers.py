"""The latency-aware layered tree of regions (spec §2.2, §3.1).

Inter-region RTTs are cut into buckets (default 100 ms wide: < 100, 100-200, >= 200).
Layer 0 is each region alone; layer ``i`` unions, on top of layer ``i-1``, the regions
joined by a cross-region pair (a pair that shares at least one edge) whose RTT falls in
bucket ``i``. Layers that merge nothing are dropped; when pairs never connect every
region a final root merges the rest, so every region has the whole set as its top
ancestor (routing can always reach every home copy).

A region pair *belongs* to the layer where its two regions first share a cluster, not
to its own link's bucket (pitfall 3): USW-LON is 136 ms but both sit in cluster A of
layer 1.

Examples:
    >>> from strata.storage.geo.topology import table1
    >>> tree = LayerTree.build(table1())
    >>> tree.depth
    2
    >>> [c.regions for c in tree.clusters(1)]
    [(0, 1, 2), (3, 4)]
    >>> [c.regions for c in tree.ancestors(3)]
    [(3, 4), (0, 1, 2, 3, 4)]
    >>> tree.merge_layer(1, 2), tree.merge_layer(1, 4)
    (1, 2)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from strata.storage.geo.errors import GeoError
from strata.storage.geo.topology import Topology

__all__ = ["Cluster", "LayerTree", "cross_region_pairs"]


@dataclass(frozen=True, slots=True)
class Cluster:
    """Regions merged at one layer; ``bound_ms`` is that layer's upper RTT bound."""

    layer: int
    regions: tuple[int, ...]
    bound_ms: float

    @property
    def mask(self) -> int:
        """The regions as a bitmask."""
        return sum(1 << r for r in self.regions)


def _find(parent: list[int], x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def cross_region_pairs(
    src_home: np.ndarray, dst_home: np.ndarray, num_regions: int
) -> np.ndarray:
    """A symmetric bool (R, R) matrix: regions that share at least one edge.

    >>> cross_region_pairs(np.array([0, 1]), np.array([1, 1]), 3).astype(int).tolist()
    [[0, 1, 0], [1, 0, 0], [0, 0, 0]]
    """
    a = np.asarray(src_home, dtype=np.int64)
    b = np.asarray(dst_home, dtype=np.int64)
    seen = np.zeros(num_regions * num_regions, dtype=bool)
    seen[np.unique(a * num_regions + b)] = True
    m = seen.reshape(num_regions, num_regions)
    m = m | m.T
    np.fill_diagonal(m, False)
    return m


@dataclass(frozen=True, eq=False)
class LayerTree:
    """Clusters per layer: ``labels[l, r]`` is region r's cluster id at layer l."""

    labels: np.ndarray
    bounds_ms: tuple[float, ...]

    @classmethod
    def build(
        cls,
        topology: Topology,
        cross_pairs: np.ndarray | Iterable[tuple[int, int]] | None = None,
        bounds_ms: tuple[float, ...] = (100.0, 200.0, math.inf),
    ) -> LayerTree:
        """Union-find over regions, bucket by bucket.

        ``cross_pairs`` is a bool (R, R) matrix or pairs of regions sharing edges;
        ``None`` means every pair does.
        """
        r = topology.num_regions
        if (
            list(bounds_ms) != sorted(bounds_ms)
            or not bounds_ms
            or bounds_ms[-1] != math.inf
        ):
            raise GeoError.build(
                "bounds_ms",
                "LayerTree.build",
                "increasing bounds ending in inf",
                str(bounds_ms),
            )
        if cross_pairs is None:
            pairs = ~np.eye(r, dtype=bool)
        elif isinstance(cross_pairs, np.ndarray):
            pairs = np.asarray(cross_pairs, dtype=bool)
            if pairs.shape != (r, r):
                raise GeoError.build(
                    "cross_pairs",
                    "LayerTree.build",
                    f"shape ({r}, {r})",
                    str(pairs.shape),
                )
        else:
            pairs = np.zeros((r, r), dtype=bool)
            for a, b in cross_pairs:
                i, j = topology.index(a), topology.index(b)
                pairs[i, j] = pairs[j, i] = True
        parent = list(range(r))
        labels = [np.arange(r, dtype=np.int64)]
        kept: list[float] = []
        lower = -math.inf
        for bound in bounds_ms:
            merged = False
            for a in range(r):
                for b in range(a + 1, r):
                    rtt = topology.rtt_ms[a, b]
                    if pairs[a, b] and lower <= rtt < bound:
                        ra, rb = _find(parent, a), _find(parent, b)
                        if ra != rb:
                            parent[max(ra, rb)] = min(ra, rb)
                            merged = True
            lower = bound
            if merged:
                labels.append(
                    np.array([_find(parent, x) for x in range(r)], dtype=np.int64)
                )
                kept.append(bound)
        if len({_find(parent, x) for x in range(r)}) > 1:
            labels.append(np.zeros(r, dtype=np.int64))
            kept.append(math.inf)
        if r == 1 and not kept:
            kept.append(math.inf)
            labels.append(np.zeros(1, dtype=np.int64))
        stacked = np.stack(labels)
        stacked.setflags(write=False)
        return cls(stacked, tuple(kept))

    @property
    def depth(self) -> int:
        """Layers above layer 0 (the root's layer)."""
        return int(self.labels.shape[0]) - 1

    @property
    def num_regions(self) -> int:
        """Leaves of the tree."""
        return int(self.labels.shape[1])

    def bound_ms(self, layer: int) -> float:
        """Upper RTT bound of a layer (0 ms for layer 0)."""
        return 0.0 if layer == 0 else self.bounds_ms[layer - 1]

    def cluster_of(self, region: int, layer: int) -> Cluster:
        """The cluster containing ``region`` at ``layer``."""
        row = self.labels[layer]
        members = tuple(int(x) for x in np.flatnonzero(row == row[region]))
        return Cluster(layer, members, self.bound_ms(layer))

    def clusters(self, layer: int) -> list[Cluster]:
        """Every cluster of a layer, ordered by their smallest region."""
        row = self.labels[layer]
        out = []
        for label in sorted(
            set(row.tolist()), key=lambda x: int(np.flatnonzero(row == x)[0])
        ):
            members = tuple(int(x) for x in np.flatnonzero(row == label))
            out.append(Cluster(layer, members, self.bound_ms(layer)))
        return out

    def ancestors(self, region: int) -> list[Cluster]:
        """Clusters containing ``region`` from layer 1 up to the root."""
        if not 0 <= region < self.num_regions:
            raise GeoError.build(
                "region",
                "LayerTree.ancestors",
                f"0..{self.num_regions - 1}",
                str(region),
            )
        return [self.cluster_of(region, layer) for layer in range(1, self.depth + 1)]

    def merge_layer(self, a: int, b: int) -> int:
        """The lowest layer where ``a`` and ``b`` share a cluster (pitfall 3)."""
        same = self.labels[:, a] == self.labels[:, b]
        return int(np.argmax(same))

    def cluster_masks(self, layer: int) -> np.ndarray:
        """uint32 (R,) mask of each region's cluster at ``layer``."""
        row = self.labels[layer]
        bits = np.left_shift(np.uint32(1), np.arange(self.num_regions, dtype=np.uint32))
        return np.array(
            [bits[row == row[r]].sum() for r in range(self.num_regions)], np.uint32
        )
