"""The exact placement optimum on a tiny instance (spec §2.1, acceptance A8).

A binary integer programme over the read patterns of a log, solved with HiGHS through
:func:`scipy.optimize.milp` (no extra dependency):

* ``x[i, r]`` (binary): region ``r`` holds item ``i``; home copies are fixed to 1.
* ``u[k, r]`` (binary): the read pair ``k = (pattern, reader y)`` uses region ``r``;
  with ``hard_slo`` only regions whose real RTT from ``y`` is within the pattern's SLO
  are allowed. By default the SLO is dropped (a relaxation): a fixed placement that
  misses some SLOs stays feasible, and the optimum is a lower bound of the constrained
  one, so the reported gap can only overstate the true gap.
* ``w[k, i, r]`` (continuous): item ``i`` of pair ``k`` is served by ``r``;
  ``sum_r w = 1``, ``w <= x[i, r]``, ``w <= u[k, r]``.

Minimised, over the log's window: storage ``sum b_i x`` x price, transfer of every
remotely served byte, a PUT plus a transfer per replica of every write, GETs, and the
association penalty's region term ``assoc_usd * lambda1 * (sum_r u - 1)`` per read. The
penalty's latency-spread term is not linear and is left out of both sides of the gap.
Replicas per region stay within ``budget_bytes``.

Examples:
    >>> from strata.storage.geo.topology import table1
    >>> from strata.storage.geo.workload import GeoWorkloadConfig, synthetic_workload
    >>> topo = table1()
    >>> cfg = GeoWorkloadConfig(num_vertices=300, history_ops=300, test_ops=10)
    >>> w = synthetic_workload(topo, cfg, seed=0)
    >>> inst = tiny_instance(w, topo, num_patterns=10)
    >>> opt = solve_optimal(inst)
    >>> geo = evaluate_holders(inst, inst.home_holders())
    >>> bool(opt.cost_usd <= geo.cost_usd + 1e-12)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from strata.storage.geo.cost import HOURS_PER_MONTH, CostConfig
from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import region_bits
from strata.storage.geo.placement import pattern_log
from strata.storage.geo.topology import Topology
from strata.storage.geo.workload import GeoWorkload

__all__ = [
    "OptimalResult",
    "TinyInstance",
    "evaluate_holders",
    "solve_optimal",
    "tiny_instance",
]

_GB = 1e9


@dataclass(frozen=True, eq=False)
class TinyInstance:
    """The top read patterns of a log, restricted to their items."""

    items: np.ndarray
    home: np.ndarray
    item_bytes: np.ndarray
    item_writes: np.ndarray
    pair_pattern_ptr: np.ndarray
    pair_items: np.ndarray
    pair_reader: np.ndarray
    pair_reads: np.ndarray
    pair_slo_ms: np.ndarray
    budget_bytes: np.ndarray
    topology: Topology
    cost: CostConfig
    hard_slo: bool = False

    def home_holders(self) -> np.ndarray:
        """Holder masks with only the home copies."""
        return np.left_shift(np.uint32(1), self.home.astype(np.uint32))


@dataclass(frozen=True, eq=False)
class OptimalResult:
    """Cost of a placement (optimal routing given it) and the solver's status."""

    cost_usd: float
    holders: np.ndarray
    status: int
    message: str
    mip_gap: float
    lower_bound_usd: float


def tiny_instance(
    workload: GeoWorkload,
    topology: Topology,
    num_patterns: int = 200,
    replica_budget: float = 1.0,
    cost: CostConfig | None = None,
    hard_slo: bool = False,
) -> TinyInstance:
    """The ``num_patterns`` most-read patterns of the workload's history."""
    r = topology.num_regions
    space = workload.space
    log = pattern_log(workload.history, space.num_items, r)
    if log.num_patterns == 0:
        raise GeoError.build("history", "tiny_instance", "read patterns", "none")
    top = np.argsort(-log.reads.sum(axis=1), kind="stable")[:num_patterns]
    items = np.unique(
        np.concatenate([log.items[log.ptr[p] : log.ptr[p + 1]] for p in top])
    )
    local = {int(x): j for j, x in enumerate(items.tolist())}
    ptr, members, reader, reads, slo = [0], [], [], [], []
    for p in top.tolist():
        ids = np.array([local[int(x)] for x in log.items[log.ptr[p] : log.ptr[p + 1]]])
        for y in np.flatnonzero(log.reads[p] > 0).tolist():
            members.append(ids)
            ptr.append(ptr[-1] + ids.size)
            reader.append(y)
            reads.append(log.reads[p, y])
            slo.append(log.slo_ms[p])
    home_bytes = np.bincount(
        space.home.astype(np.int64), space.item_bytes.astype(np.float64), minlength=r
    )
    return TinyInstance(
        items=items,
        home=space.home[items],
        item_bytes=space.item_bytes[items].astype(np.float64),
        item_writes=log.item_writes[items].astype(np.float64),
        pair_pattern_ptr=np.asarray(ptr, dtype=np.int64),
        pair_items=np.concatenate(members).astype(np.int64),
        pair_reader=np.asarray(reader, dtype=np.int64),
        pair_reads=np.asarray(reads, dtype=np.float64),
        pair_slo_ms=np.asarray(slo, dtype=np.float64),
        budget_bytes=replica_budget * home_bytes,
        topology=topology,
        cost=cost or CostConfig(),
        hard_slo=hard_slo,
    )


def _solve(
    inst: TinyInstance, fixed: np.ndarray | None, time_limit: float
) -> OptimalResult:
    topo, cc = inst.topology, inst.cost
    prices = topo.prices
    r = topo.num_regions
    n = inst.items.size
    pairs = inst.pair_reader.size
    sizes = np.diff(inst.pair_pattern_ptr)
    allowed = topo.rtt_ms[inst.pair_reader] <= inst.pair_slo_ms[:, None]  # (pairs, R)
    allowed[np.arange(pairs), inst.pair_reader] = True
    if not inst.hard_slo:
        allowed[:] = True
    # w entries: one per (pair, item occurrence, allowed region).
    occ_pair = np.repeat(np.arange(pairs), sizes)
    occ_item = inst.pair_items
    occ_allowed = allowed[occ_pair]
    occ_idx, w_region = np.nonzero(occ_allowed)
    w_pair, w_item = occ_pair[occ_idx], occ_item[occ_idx]
    nx, nu, nw = n * r, pairs * r, occ_idx.size
    total = nx + nu + nw
    x_of = w_item * r + w_region
    u_of = nx + w_pair * r + w_region
    w_of = nx + nu + np.arange(nw)
    # Objective.
    c = np.zeros(total)
    b = inst.item_bytes
    storage = b / _GB * prices.storage_usd_gb_month * cc.window_hours / HOURS_PER_MONTH
    write = inst.item_writes * (
        prices.put_usd_per_million / 1e6 + b / _GB * prices.transfer_usd_per_gb
    )
    c[:nx] = np.repeat(storage + write, r)
    c[nx : nx + nu] = np.repeat(inst.pair_reads * cc.assoc_usd * cc.lambda1, r)
    remote = w_region != inst.pair_reader[w_pair]
    c[nx + nu :] = (
        inst.pair_reads[w_pair] * b[w_item] / _GB * prices.transfer_usd_per_gb * remote
    )
    constant = float(
        (inst.pair_reads * sizes).sum() * prices.get_usd_per_million / 1e6
        - (inst.pair_reads * cc.assoc_usd * cc.lambda1).sum()
    )
    # Bounds: home copies fixed; disallowed u fixed to 0; a fixed placement fixes x.
    lb, ub = np.zeros(total), np.ones(total)
    home_x = np.arange(n) * r + inst.home.astype(np.int64)
    lb[home_x] = 1.0
    ub[nx : nx + nu] = allowed.reshape(-1).astype(float)
    if fixed is not None:
        bits = region_bits(fixed, r).reshape(-1).astype(float)
        lb[:nx] = ub[:nx] = bits
    integrality = np.zeros(total)
    integrality[: nx + nu] = 1
    # Constraints.
    rows_cover = np.repeat(np.arange(occ_pair.size), occ_allowed.sum(axis=1))
    a_cover = sp.csr_matrix(
        (np.ones(nw), (rows_cover, w_of)), shape=(occ_pair.size, total)
    )
    k = np.arange(nw)
    a_x = sp.csr_matrix(
        (
            np.concatenate([np.ones(nw), -np.ones(nw)]),
            (np.concatenate([k, k]), np.concatenate([w_of, x_of])),
        ),
        shape=(nw, total),
    )
    a_u = sp.csr_matrix(
        (
            np.concatenate([np.ones(nw), -np.ones(nw)]),
            (np.concatenate([k, k]), np.concatenate([w_of, u_of])),
        ),
        shape=(nw, total),
    )
    cols = np.arange(nx)
    a_budget = sp.csr_matrix((np.repeat(b, r), (cols % r, cols)), shape=(r, total))
    home_bytes = np.bincount(inst.home.astype(np.int64), b, minlength=r)
    constraints = [
        LinearConstraint(a_cover, 1.0, 1.0),
        LinearConstraint(a_x, -np.inf, 0.0),
        LinearConstraint(a_u, -np.inf, 0.0),
        LinearConstraint(a_budget, -np.inf, inst.budget_bytes + home_bytes),
    ]
    # HiGHS's tolerances are absolute: work in micro-dollars so that storage and
    # transfer coefficients (~1e-10 $) do not vanish below them.
    micro = 1e6
    res = milp(
        c * micro,
        constraints=constraints,
        integrality=integrality,
        bounds=Bounds(lb, ub),
        options={"time_limit": time_limit, "disp": False},
    )
    if res.x is None:
        raise GeoError.build(
            "instance",
            "optimal",
            "a feasible programme",
            f"status {res.status}: {res.message}",
        )
    xs = np.round(res.x[:nx]).reshape(n, r).astype(bool)
    holders = (xs * np.left_shift(np.uint32(1), np.arange(r, dtype=np.uint32))).sum(
        axis=1
    )
    gap = float(getattr(res, "mip_gap", 0.0) or 0.0)
    bound = getattr(res, "mip_dual_bound", None)
    lower = (
        float(bound) / micro + constant if bound is not None else float(res.fun) / micro
    )
    return OptimalResult(
        float(res.fun) / micro + constant,
        holders.astype(np.uint32),
        int(res.status),
        str(res.message),
        gap,
        lower if bound is not None else float(res.fun) / micro + constant,
    )


def solve_optimal(inst: TinyInstance, time_limit: float = 300.0) -> OptimalResult:
    """The exact optimum (within HiGHS's ``mip_gap``, reported)."""
    return _solve(inst, None, time_limit)


def evaluate_holders(
    inst: TinyInstance, holders: np.ndarray, time_limit: float = 120.0
) -> OptimalResult:
    """Cost of a fixed placement (masks over ``inst.items``) with optimal routing."""
    h = np.asarray(holders, dtype=np.uint32)
    if h.shape != inst.items.shape:
        raise GeoError.build(
            "holders", "evaluate_holders", str(inst.items.shape), str(h.shape)
        )
    home_bit = inst.home_holders()
    return _solve(inst, h | home_bit, time_limit)
