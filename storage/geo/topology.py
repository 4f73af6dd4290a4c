"""Regions, their measured links and cloud prices (spec §2.6, §3.1).

A :class:`Topology` is a symmetric (R, R) RTT matrix in milliseconds and a bandwidth
matrix in Mbit/s over ``R <= 32`` named regions (a placement stores holders as a
uint32 bitmask, one bit per region). The diagonal carries the intra-region link
(``intra_rtt_ms``, ``intra_bw_mbps``).

Examples:
    >>> topo = table1()
    >>> topo.regions
    ('USE', 'USW', 'LON', 'SGP', 'BJS')
    >>> topo.link("USW", "BJS")
    (145.0, 77.0)
    >>> topo.index("SGP"), topo.num_regions
    (3, 5)
    >>> uniform(3, 70.0, 90.0).link(0, 2)
    (70.0, 90.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from strata.storage.geo.errors import GeoError

__all__ = ["MAX_REGIONS", "Prices", "Topology", "table1", "uniform"]

#: Holder sets are uint32 bitmasks, so at most 32 regions.
MAX_REGIONS = 32


@dataclass(frozen=True, slots=True)
class Prices:
    """Cloud prices (spec Table II): $/GB-month, $/million GETs and PUTs, $/GB transfer.

    >>> Prices.alibaba().transfer_usd_per_gb
    0.043
    """

    storage_usd_gb_month: float
    get_usd_per_million: float
    put_usd_per_million: float
    transfer_usd_per_gb: float

    @classmethod
    def alibaba(cls) -> Prices:
        """Alibaba Cloud, US-East (the prices the paper's experiments use)."""
        return cls(0.016, 0.10, 1.40, 0.043)

    @classmethod
    def aws(cls) -> Prices:
        """AWS, US-East."""
        return cls(0.023, 0.40, 5.00, 0.050)

    @classmethod
    def gcp(cls) -> Prices:
        """GCP, US-East."""
        return cls(0.020, 0.40, 5.00, 0.080)

    @classmethod
    def azure(cls) -> Prices:
        """Azure, US-East."""
        return cls(0.021, 0.50, 6.50, 0.040)


def _check_matrix(
    name: str, matrix: np.ndarray, regions: int, intra: float
) -> np.ndarray:
    where = "Topology"
    m = np.array(matrix, dtype=np.float64, copy=True)
    if m.shape != (regions, regions):
        raise GeoError.build(name, where, f"shape ({regions}, {regions})", str(m.shape))
    diag = np.diag(m).copy()
    ok_diag = (diag == 0.0) | (diag == intra)
    if not ok_diag.all():
        r = int(np.flatnonzero(~ok_diag)[0])
        raise GeoError.build(
            name,
            where,
            f"a diagonal of 0 or the intra-region value {intra}",
            f"{name}[{r},{r}]={diag[r]}",
        )
    np.fill_diagonal(m, intra)
    if not np.all(np.isfinite(m)) or np.any(m <= 0.0):
        bad = np.argwhere(~np.isfinite(m) | (m <= 0.0))[0]
        raise GeoError.build(
            name,
            where,
            "finite positive off-diagonal values",
            f"{name}[{bad[0]},{bad[1]}]={m[bad[0], bad[1]]}",
        )
    asym = np.argwhere(m != m.T)
    if asym.size:
        a, b = (int(x) for x in asym[0])
        raise GeoError.build(
            name,
            where,
            "a symmetric matrix",
            f"{name}[{a},{b}]={m[a, b]} but {name}[{b},{a}]={m[b, a]}",
            "links are measured both ways; average the two directions",
        )
    m.setflags(write=False)
    return m


@dataclass(frozen=True, eq=False)
class Topology:
    """Named regions with symmetric RTT (ms) and bandwidth (Mbit/s) matrices.

    The matrices are validated and copied (read-only); a diagonal of zeros is replaced
    by the intra-region values.

    >>> rtt, bw = np.array([[0, 100.0], [100.0, 0]]), np.array([[0, 8.0], [8.0, 0]])
    >>> t = Topology(("a", "b"), rtt, bw)
    >>> t.link("a", "a")
    (1.0, 10000.0)
    """

    regions: tuple[str, ...]
    rtt_ms: np.ndarray
    bw_mbps: np.ndarray
    intra_rtt_ms: float = 1.0
    intra_bw_mbps: float = 10_000.0
    prices: Prices = field(default_factory=Prices.alibaba)

    def __post_init__(self) -> None:
        where = "Topology"
        regions = tuple(str(r) for r in self.regions)
        if not 1 <= len(regions) <= MAX_REGIONS:
            raise GeoError.build(
                "regions",
                where,
                f"1..{MAX_REGIONS} regions (holders are uint32 bitmasks)",
                f"{len(regions)} regions",
            )
        if len(set(regions)) != len(regions):
            raise GeoError.build("regions", where, "unique names", str(regions))
        if not (self.intra_rtt_ms > 0 and self.intra_bw_mbps > 0):
            raise GeoError.build(
                "intra link",
                where,
                "intra_rtt_ms > 0 and intra_bw_mbps > 0",
                f"{self.intra_rtt_ms} ms, {self.intra_bw_mbps} Mbps",
            )
        object.__setattr__(self, "regions", regions)
        r = len(regions)
        object.__setattr__(
            self,
            "rtt_ms",
            _check_matrix("rtt_ms", self.rtt_ms, r, float(self.intra_rtt_ms)),
        )
        object.__setattr__(
            self,
            "bw_mbps",
            _check_matrix("bw_mbps", self.bw_mbps, r, float(self.intra_bw_mbps)),
        )

    @property
    def num_regions(self) -> int:
        """How many regions."""
        return len(self.regions)

    def index(self, region: str | int) -> int:
        """A region's index, given its name or index; unknown regions raise GeoError."""
        if isinstance(region, (int, np.integer)) and not isinstance(region, bool):
            if 0 <= int(region) < self.num_regions:
                return int(region)
            raise GeoError.build(
                "region",
                "Topology.index",
                f"an index in 0..{self.num_regions - 1}",
                str(region),
            )
        try:
            return self.regions.index(str(region))
        except ValueError:
            raise GeoError.build(
                "region", "Topology.index", f"one of {list(self.regions)}", repr(region)
            ) from None

    def link(self, a: str | int, b: str | int) -> tuple[float, float]:
        """``(rtt_ms, bw_mbps)`` between two regions (intra values when equal)."""
        i, j = self.index(a), self.index(b)
        return float(self.rtt_ms[i, j]), float(self.bw_mbps[i, j])


_TABLE1_REGIONS = ("USE", "USW", "LON", "SGP", "BJS")
# Upper triangle of spec Table I: (a, b, rtt ms, bandwidth Mbps).
_TABLE1_LINKS = (
    (0, 1, 69, 96),
    (0, 2, 80, 92),
    (0, 3, 225, 66),
    (0, 4, 226, 68),
    (1, 2, 136, 93),
    (1, 3, 178, 80),
    (1, 4, 145, 77),
    (2, 3, 213, 74),
    (2, 4, 256, 42),
    (3, 4, 75, 96),
)


def table1(prices: Prices | None = None) -> Topology:
    """The paper's measured 5-region Alibaba matrix (spec Table I), used as is."""
    rtt = np.zeros((5, 5))
    bw = np.zeros((5, 5))
    for a, b, ms, mbps in _TABLE1_LINKS:
        rtt[a, b] = rtt[b, a] = ms
        bw[a, b] = bw[b, a] = mbps
    return Topology(_TABLE1_REGIONS, rtt, bw, prices=prices or Prices.alibaba())


def uniform(
    n: int, rtt_ms: float, bw_mbps: float, prices: Prices | None = None
) -> Topology:
    """``n`` regions (named ``R0..``) with the same RTT and bandwidth on every link."""
    if not 1 <= n <= MAX_REGIONS:
        raise GeoError.build("n", "uniform", f"1..{MAX_REGIONS}", str(n))
    rtt = np.full((n, n), float(rtt_ms))
    bw = np.full((n, n), float(bw_mbps))
    np.fill_diagonal(rtt, 0.0)
    np.fill_diagonal(bw, 0.0)
    return Topology(
        tuple(f"R{i}" for i in range(n)), rtt, bw, prices=prices or Prices.alibaba()
    )
