"""Items (vertices and edges) and placements as one uint32 holder bitmask per item.

Vertex ``v`` is item ``v``; edge ``e`` (its CSR position) is item ``V + e``. Every item
has a size in bytes and a home region. A :class:`Placement` keeps, per item, the set of
regions holding a copy as bits of a uint32; the home bit is always set.

Examples:
    >>> import numpy as np
    >>> size, home = np.array([100, 200, 32], np.int32), np.array([0, 1, 0], np.int8)
    >>> space = ItemSpace(2, 1, size, home)
    >>> p = Placement.home_only(space)
    >>> p.add(2, np.array([0, 2]))
    >>> p.replicas().tolist(), p.holds(2).tolist()
    ([2, 1, 2], [True, False, True])
    >>> p.storage_bytes(space, 3).tolist()
    [132.0, 200.0, 132.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strata.storage.geo.errors import GeoError
from strata.storage.geo.topology import MAX_REGIONS

__all__ = ["ItemSpace", "Placement", "popcount32", "region_bits"]


def popcount32(masks: np.ndarray) -> np.ndarray:
    """Number of set bits of each uint32 mask (int64).

    >>> popcount32(np.array([0, 1, 0b1011, 0xFFFFFFFF], np.uint32)).tolist()
    [0, 1, 3, 32]
    """
    return np.bitwise_count(np.asarray(masks, dtype=np.uint32)).astype(np.int64)


def region_bits(masks: np.ndarray, num_regions: int) -> np.ndarray:
    """A bool (n, R) matrix: bit r of each mask.

    >>> region_bits(np.array([0b101], np.uint32), 3).tolist()
    [[True, False, True]]
    """
    shifts = np.arange(num_regions, dtype=np.uint32)
    return (
        (np.asarray(masks, dtype=np.uint32)[:, None] >> shifts) & np.uint32(1)
    ).astype(bool)


@dataclass(frozen=True, eq=False)
class ItemSpace:
    """Sizes and home regions of the ``num_vertices + num_edges`` items of one graph."""

    num_vertices: int
    num_edges: int
    item_bytes: np.ndarray
    home: np.ndarray

    def __post_init__(self) -> None:
        where = "ItemSpace"
        n = self.num_vertices + self.num_edges
        if self.num_vertices < 0 or self.num_edges < 0:
            raise GeoError.build(
                "counts",
                where,
                "num_vertices >= 0 and num_edges >= 0",
                f"{self.num_vertices}, {self.num_edges}",
            )
        size = np.asarray(self.item_bytes)
        home = np.asarray(self.home)
        if size.shape != (n,) or home.shape != (n,):
            raise GeoError.build(
                "item_bytes/home",
                where,
                f"arrays of shape ({n},)",
                f"{size.shape}, {home.shape}",
            )
        if n and size.min() < 0:
            at = int(np.argmin(size))
            raise GeoError.build(
                "item_bytes",
                where,
                "sizes >= 0",
                f"{int(size[at])} at item {at}",
                "sizes are bytes; a negative size is a corrupt input",
            )
        if n and (home.min() < 0 or home.max() >= MAX_REGIONS):
            at = int(np.flatnonzero((home < 0) | (home >= MAX_REGIONS))[0])
            raise GeoError.build(
                "home",
                where,
                f"regions in 0..{MAX_REGIONS - 1}",
                f"{int(home[at])} at item {at}",
            )
        object.__setattr__(self, "item_bytes", size.astype(np.int32, copy=False))
        object.__setattr__(self, "home", home.astype(np.int8, copy=False))

    @property
    def num_items(self) -> int:
        """``num_vertices + num_edges``."""
        return self.num_vertices + self.num_edges

    def edge_item(self, edges: np.ndarray) -> np.ndarray:
        """Item ids of CSR edge positions."""
        return np.asarray(edges, dtype=np.int64) + self.num_vertices

    def check_regions(self, num_regions: int, where: str) -> None:
        """Raise GeoError when a home region is outside ``0..num_regions-1``."""
        if self.num_items and int(self.home.max()) >= num_regions:
            at = int(np.argmax(self.home))
            raise GeoError.build(
                "home",
                where,
                f"regions in 0..{num_regions - 1}",
                f"region {int(self.home[at])} at item {at}",
                "unknown region for this topology",
            )


@dataclass(eq=False)
class Placement:
    """A holder bitmask (uint32) per item: bit r set when region r keeps a copy."""

    holders: np.ndarray

    def __post_init__(self) -> None:
        if self.holders.dtype != np.uint32 or self.holders.ndim != 1:
            raise GeoError.build(
                "holders",
                "Placement",
                "a 1-D uint32 array",
                f"{self.holders.dtype} of shape {self.holders.shape}",
            )

    @classmethod
    def home_only(cls, space: ItemSpace) -> Placement:
        """Every item at its home region only."""
        return cls(np.left_shift(np.uint32(1), space.home.astype(np.uint32)))

    def holds(self, region: int) -> np.ndarray:
        """Bool per item: does ``region`` keep a copy."""
        out: np.ndarray = (self.holders >> np.uint32(region)) & np.uint32(1) == 1
        return out

    def replicas(self) -> np.ndarray:
        """Copies per item (int64)."""
        return popcount32(self.holders)

    def add(self, region: int, item_ids: np.ndarray) -> None:
        """Give ``region`` a copy of ``item_ids`` (in place)."""
        if not 0 <= region < MAX_REGIONS:
            raise GeoError.build(
                "region", "Placement.add", f"0..{MAX_REGIONS - 1}", str(region)
            )
        self.holders[np.asarray(item_ids, dtype=np.int64)] |= np.uint32(1 << region)

    def storage_bytes(
        self, space: ItemSpace, num_regions: int | None = None
    ) -> np.ndarray:
        """Bytes stored per region (float64 of length R)."""
        r = num_regions if num_regions is not None else int(space.home.max()) + 1
        bits = region_bits(self.holders, r)
        out: np.ndarray = space.item_bytes.astype(np.float64) @ bits
        return out

    def copy(self) -> Placement:
        """An independent copy."""
        return Placement(self.holders.copy())

    def check(self, space: ItemSpace) -> None:
        """Raise GeoError unless it fits ``space`` with every home bit set."""
        where = "Placement.check"
        if self.holders.shape != (space.num_items,):
            raise GeoError.build(
                "holders", where, f"shape ({space.num_items},)", str(self.holders.shape)
            )
        home_bit = np.left_shift(np.uint32(1), space.home.astype(np.uint32))
        missing = np.flatnonzero((self.holders & home_bit) == 0)
        if missing.size:
            raise GeoError.build(
                "holders",
                where,
                "every item's home bit set",
                f"{missing.size} items without it",
            )
