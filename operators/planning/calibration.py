"""This machine's kernel rates, measured once and cached: :class:`Calibration`.

The planner's cost model (:mod:`strata.operators.planning.cost_model`) turns
operation counts into seconds with rates measured here, on the kernels the
trainers actually call, so a faster SpMM or dropout shows up in the next
calibration without touching the model:

* ``spmm``: :func:`strata.operators.kernels.spmm` over a synthetic power-law
  graph, forward and transposed (backward), at a few widths: seconds per
  (edge x feature);
* ``linear``: ``F.linear`` forward and backward at a few (in, out) shapes:
  seconds per multiply-add;
* ``dropout``: the trainers' counter-based dropout, seconds per element;
  ``elementwise``: ReLU and bias, seconds per element;
* ``gather``: ``index_select`` of random rows, seconds per byte;
* ``fresh``: first touch of a tensor too large for the allocator's heap
  (glibc maps fresh zeroed pages for every allocation over 32 MiB), per byte;
* ``sample``: the neighbour sampler, seconds per sampled edge;
* ``epoch_fixed``: a full-graph training epoch and evaluation on a tiny graph
  (the loss, the optimiser step, Python: what does not scale with the graph).

Each rate is measured at one thread and at every core (numba kernels follow
numba's thread count, torch's follow torch's), taking the mean of a few
repeats. The whole run takes a few seconds; the result is cached as JSON under
``~/.cache/strata/calibration.json`` (``STRATA_CACHE_DIR`` moves it), keyed by
machine, core count and torch/numba versions, and ``--recalibrate`` measures
again.

Examples:
    >>> rates = KernelRates(spmm_fwd={8: 2e-9, 128: 2.6e-8},
    ...     spmm_bwd={8: 2e-9, 128: 3e-8},
    ...     spmm_small_fwd={8: 1e-9, 128: 1e-8},
    ...     spmm_small_bwd={8: 1e-9, 128: 1e-8},
    ...     linear_fwd={"128x128": 1e-11, "16x8": 1e-10},
    ...     linear_bwd={"128x128": 2e-11, "16x8": 2e-10},
    ...     dropout=1e-9, elementwise=5e-10, gather=1e-10, sample=5e-8)
    >>> round(rates.spmm(1_000_000, 64), 6)  # seconds
    0.0132
    >>> rates.linear(100, 120)
    1e-11
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CALIBRATION_VERSION",
    "Calibration",
    "GangRates",
    "KernelRates",
    "cache_path",
    "calibrate",
    "calibrate_gang",
    "load_calibration",
    "machine_key",
]

#: Bumped when the set of measured rates changes (older caches are ignored).
CALIBRATION_VERSION = 4

#: Widths at which SpMM is timed (features per edge).
SPMM_WIDTHS = (8, 128)
#: Nodes of the two graphs SpMM is timed on: rows that fit in cache, rows that
#: do not (random rows of a wide matrix miss the cache).
SPMM_NODES = (1 << 11, 1 << 16)
#: Tensors larger than this get fresh zeroed pages (glibc's largest mmap
#: threshold); smaller ones reuse the heap.
HEAP_LIMIT = 32 << 20
#: ``(in, out)`` shapes at which ``F.linear`` is timed.
LINEAR_SHAPES = ((16, 8), (128, 8), (128, 128), (1024, 16))


@dataclass(frozen=True, slots=True)
class KernelRates:
    """Seconds per unit of work at one thread count.

    Attributes:
        spmm_fwd: per timed width, seconds per edge of a forward SpMM (linear
            in the width between and beyond the timed widths).
        spmm_bwd: the same for the transposed SpMM of the backward pass.
        spmm_small_fwd: the same on a graph whose rows fit in cache
            (:data:`SPMM_NODES`: the per-edge cost moves between the two with
            log N).
        spmm_small_bwd: its transposed SpMM.
        linear_fwd: per ``"INxOUT"`` shape, seconds per multiply-add forward.
        linear_bwd: per shape, seconds per multiply-add of one backward product.
        dropout: seconds per element of counter-based dropout (forward).
        elementwise: seconds per element of a ReLU or bias pass.
        gather: seconds per byte of a random-row gather.
        sample: seconds per sampled edge.
        fresh: seconds per byte of a new tensor too large for the allocator's
            heap (over 32 MiB: glibc maps fresh zeroed pages for every one).
    """

    spmm_fwd: dict[int, float]
    spmm_bwd: dict[int, float]
    spmm_small_fwd: dict[int, float]
    spmm_small_bwd: dict[int, float]
    linear_fwd: dict[str, float]
    linear_bwd: dict[str, float]
    dropout: float
    elementwise: float
    gather: float
    sample: float
    fresh: float = 0.0

    def spmm(
        self, edges: float, width: int, *, nodes: int = 0, backward: bool = False
    ) -> float:
        """Seconds of one SpMM over ``edges`` edges at ``width`` features.

        ``nodes`` (source rows) places it between the cache-resident and the
        large calibration graph (0: the large one).
        """
        large = _per_edge(self.spmm_bwd if backward else self.spmm_fwd, width)
        if not nodes:
            return edges * large
        small = _per_edge(
            self.spmm_small_bwd if backward else self.spmm_small_fwd, width
        )
        lo, hi = (math.log2(n) for n in SPMM_NODES)
        t = min(max((math.log2(max(nodes, 1)) - lo) / (hi - lo), 0.0), 1.0)
        return edges * (small + t * (large - small))

    def linear(self, fan_in: int, fan_out: int, *, backward: bool = False) -> float:
        """Seconds per multiply-add of ``F.linear`` at the nearest timed shape."""
        table = self.linear_bwd if backward else self.linear_fwd

        def distance(key: str) -> float:
            a, b = (int(v) for v in key.split("x"))
            return abs(math.log2(a / fan_in)) + abs(math.log2(b / fan_out))

        return table[min(table, key=distance)]

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> KernelRates:
        """Rebuild from :func:`dataclasses.asdict` output read back from JSON."""
        values = dict(data)
        for name in ("spmm_fwd", "spmm_bwd", "spmm_small_fwd", "spmm_small_bwd"):
            values[name] = {int(k): float(v) for k, v in values[name].items()}
        return KernelRates(**values)


@dataclass(frozen=True, slots=True)
class GangRates:
    """A CPU gang (gloo), measured on a gang of two.

    Attributes:
        latency_s: seconds of a small all-reduce (one collective's fixed cost).
        per_byte_s: seconds per byte of a large all-to-all, per worker.
        worker_rss_bytes: a gang worker's peak resident bytes training a tiny
            graph (forked from the fork server, which preloaded torch; its
            kernels and collectives loaded).
        epoch_fixed_s: exact mode's training step on a tiny graph: what a gang
            epoch costs besides the work (collectives, barriers, Python).
        eval_fixed_s: the same for its evaluation pass.
        moved_s: HongTu's seconds per byte its load plan moves (rows loaded
            or copied, cached aggregates written and read), from exact and
            chunked epochs of a 4096-node graph at width 64.
        moved_eval_s: the same for an evaluation pass.
    """

    latency_s: float
    per_byte_s: float
    worker_rss_bytes: int = 0
    epoch_fixed_s: float = 0.0
    eval_fixed_s: float = 0.0
    moved_s: float = 0.0
    moved_eval_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Calibration:
    """Everything the cost model needs to know about this machine.

    Attributes:
        key: machine, cores and library versions the rates belong to.
        cores: CPU cores torch and numba may use.
        rates: per thread count (1 and ``cores``), the kernel rates.
        epoch_fixed_s: per thread count, seconds of a training epoch that do
            not scale with the graph (loss, optimiser, Python).
        eval_fixed_s: the same for one evaluation pass.
        base_rss_bytes: resident memory of the calibrating process once it
            imported torch and Strata's trainers, before any data (what a
            training process or gang worker starts from).
        seconds: how long the calibration took.
        created: when it ran (Unix seconds).
        version: :data:`CALIBRATION_VERSION` when it ran.
        gang: the gang's collectives (measured when a gang plan is first costed).
        load: the 1-minute load average while it ran (rates measured on a busy
            machine predict runs on an equally busy one).
    """

    key: str
    cores: int
    rates: dict[int, KernelRates]
    epoch_fixed_s: dict[int, float]
    eval_fixed_s: dict[int, float]
    base_rss_bytes: int
    seconds: float = 0.0
    created: float = 0.0
    version: int = CALIBRATION_VERSION
    gang: GangRates | None = None
    load: float = 0.0

    def at(self, threads: int) -> KernelRates:
        """Rates at ``threads`` (the nearest measured thread count)."""
        return self.rates[min(self.rates, key=lambda t: abs(t - threads))]

    def fixed(self, threads: int) -> tuple[float, float]:
        """``(epoch, eval)`` fixed seconds at the nearest measured thread count."""
        t = min(self.epoch_fixed_s, key=lambda t: abs(t - threads))
        return self.epoch_fixed_s[t], self.eval_fixed_s[t]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        data = asdict(self)
        data["rates"] = {str(t): asdict(r) for t, r in self.rates.items()}
        return data

    def with_gang(self, gang: GangRates) -> Calibration:
        """A copy with the gang's rates."""
        return dataclasses.replace(self, gang=gang)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Calibration:
        """Rebuild from :meth:`to_dict` output read back from JSON."""
        values = dict(data)
        values["rates"] = {
            int(t): KernelRates.from_dict(r) for t, r in values["rates"].items()
        }
        for name in ("epoch_fixed_s", "eval_fixed_s"):
            values[name] = {int(t): float(v) for t, v in values[name].items()}
        if values.get("gang") is not None:
            values["gang"] = GangRates(**values["gang"])
        if values.get("version") != CALIBRATION_VERSION:
            raise ValueError("an older calibration")
        return Calibration(**values)


def _per_edge(table: Mapping[int, float], width: int) -> float:
    """Seconds per edge at ``width``: linear in the width through the table."""
    (w0, t0), (w1, t1) = sorted(table.items())[0], sorted(table.items())[-1]
    slope = max((t1 - t0) / (w1 - w0), 0.0)
    return max(t0 + slope * (width - w0), t0 * min(width / w0, 1.0))


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def machine_key() -> str:
    """Machine, cores, CPU model and torch/numba versions (the cache key)."""
    import numba
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:  # pragma: no cover - not Linux
        pass
    return (
        f"{platform.node()}|{cpu}|cores={cores()}|torch={torch.__version__}"
        f"|numba={numba.__version__}|v{CALIBRATION_VERSION}"
    )


def cache_path() -> Path:
    """``$STRATA_CACHE_DIR/calibration.json`` (default ``~/.cache/strata``)."""
    root = os.environ.get("STRATA_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "strata"
    return base / "calibration.json"


def load_calibration(
    path: Path | None = None, *, recalibrate: bool = False, gang: bool = False
) -> Calibration:
    """The cached calibration for this machine, measuring it when missing.

    Args:
        path: the cache file (default :func:`cache_path`); it maps machine
            keys to calibrations, so one file serves several machines.
        recalibrate: measure again and replace the cached entry.
        gang: also measure a gang's collectives if the entry lacks them
            (starts a gang of two: a few seconds more).
    """
    path = cache_path() if path is None else path
    key = machine_key()
    entries: dict[str, Any] = {}
    if path.exists():
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            entries = {}
    calibration: Calibration | None = None
    if not recalibrate and key in entries:
        try:
            calibration = Calibration.from_dict(entries[key])
        except (KeyError, TypeError, ValueError):
            calibration = None  # an older layout: measure again
    if calibration is not None and (calibration.gang is not None or not gang):
        return calibration
    if calibration is None:
        calibration = calibrate()
    if gang and calibration.gang is None:
        calibration = calibration.with_gang(calibrate_gang())
    entries[key] = calibration.to_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1), encoding="utf-8")
    tmp.replace(path)
    return calibration


# ----------------------------------------------------------------- measuring
def _best(fn: Callable[[], Any], repeats: int = 5) -> float:
    """Mean of ``repeats`` timed calls after one warm-up call.

    The mean, not the minimum or the median: an epoch is a sum of many kernel
    calls, so its time is the sum of their means; on a busy machine a kernel's
    time is heavy-tailed (a parallel region waits for a descheduled thread),
    and the minimum or median would predict too fast.
    """
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.fmean(times)


@contextmanager
def _threads(count: int) -> Iterator[None]:
    """Torch and numba at ``count`` threads, restored afterwards."""
    import numba
    import torch

    before = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(count)
    numba.set_num_threads(min(count, cores()))
    try:
        yield
    finally:
        torch.set_num_threads(before[0])
        numba.set_num_threads(before[1])


def _spmm_times(graph: Any, fresh: float) -> tuple[dict[int, float], dict[int, float]]:
    """Seconds per edge of SpMM forward and transposed, per width, on ``graph``.

    Without the fresh pages of outputs over the heap limit: counted apart.
    """
    import torch

    from strata.operators.kernels import as_device_graph, spmm

    dg = as_device_graph(graph, torch.device("cpu"))
    n, e = graph.num_nodes, int(graph.indices.shape[0])
    values = torch.rand(e)
    forward: dict[int, float] = {}
    backward: dict[int, float] = {}
    for width in SPMM_WIDTHS:
        x = torch.randn(n, width, requires_grad=True)
        grad = torch.randn(n, width)
        out_bytes = n * width * 4
        pages = out_bytes * fresh if out_bytes > HEAP_LIMIT else 0.0

        def once(x: torch.Tensor = x) -> None:
            with torch.no_grad():
                spmm(dg, x, values)

        def both(x: torch.Tensor = x, grad: torch.Tensor = grad) -> None:
            x.grad = None
            torch.autograd.backward(spmm(dg, x, values), grad)

        fwd = _best(once)
        bwd = max(_best(both) - fwd, 0.2 * fwd)
        forward[width] = max(fwd - pages, 0.2 * fwd) / e
        backward[width] = max(bwd - pages, 0.2 * bwd) / e
    return forward, backward


def _rates() -> KernelRates:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from strata.operators.samplers import NeighborSampler, SamplerConfig
    from strata.operators.trainers.dropout import counter_dropout
    from strata.storage.generators import rmat

    torch.manual_seed(0)
    small = torch.randn(1 << 15, 64)  # 8 MiB: within the allocator's heap
    fill = _best(lambda: small.mul_(1.0))
    fresh = max(_best(lambda: torch.ones(1 << 24)) - 8 * fill, 0.0) / (1 << 26)
    tables = [_spmm_times(rmat(scale, 16, seed=1), fresh) for scale in (11, 16)]
    graph = rmat(13, 8, seed=1)  # for the sampler
    n = graph.num_nodes
    linear_fwd: dict[str, float] = {}
    linear_bwd: dict[str, float] = {}
    for fan_in, fan_out in LINEAR_SHAPES:
        rows = max(1 << 15, (1 << 23) // (fan_in * fan_out))
        x = torch.randn(rows, fan_in, requires_grad=True)
        w = torch.randn(fan_out, fan_in, requires_grad=True)
        macs = rows * fan_in * fan_out
        grad = torch.randn(rows, fan_out)

        def project(x: torch.Tensor = x, w: torch.Tensor = w) -> None:
            with torch.no_grad():
                F.linear(x, w)

        def step(
            x: torch.Tensor = x, w: torch.Tensor = w, g: torch.Tensor = grad
        ) -> None:
            x.grad = w.grad = None
            torch.autograd.backward(F.linear(x, w), g)

        fwd = _best(project)

        key = f"{fan_in}x{fan_out}"
        linear_fwd[key] = fwd / macs
        linear_bwd[key] = max(_best(step) - fwd, fwd) / (2 * macs)
    big = torch.randn(1 << 15, 64)  # 8 MiB: heap-allocated outputs
    ids = torch.arange(big.shape[0])
    dropout = (
        _best(lambda: counter_dropout(big, ids, p=0.5, seed=0, epoch=0, layer=0))
        / big.numel()
    )
    bias = torch.randn(64)
    elementwise = _best(lambda: F.relu(big + bias)) / (2 * big.numel())
    picks = torch.randint(0, big.shape[0], (1 << 15,))
    gather = _best(lambda: big.index_select(0, picks)) / (picks.numel() * 64 * 4)
    sampler = NeighborSampler(graph, SamplerConfig((10, 5)), seed=0)
    seeds = np.random.default_rng(0).choice(n, 1024, replace=False)
    sampled = sum(int(b.num_edges) for b in sampler.sample(seeds))
    sample = _best(lambda: sampler.sample(seeds)) / max(sampled, 1)
    return KernelRates(
        tables[1][0],
        tables[1][1],
        tables[0][0],
        tables[0][1],
        linear_fwd,
        linear_bwd,
        dropout,
        elementwise,
        gather,
        sample,
        fresh,
    )


def _fixed(threads: int) -> tuple[float, float]:
    """Median train and eval seconds of an epoch on a 64-node graph."""
    from strata.operators.io.datasets import load_dataset
    from strata.operators.io.task import with_task
    from strata.operators.trainers import FullGraphTrainer, ModelConfig, TrainConfig

    payload = load_dataset("rmat:scale=6,edge_factor=4")
    payload = with_task(payload, classes=4, features=8, train_fraction=0.5, seed=0)
    config = TrainConfig(
        ModelConfig("gcn", hidden=8), epochs=8, device="cpu", threads=threads
    )
    train: list[float] = []
    evals: list[float] = []

    def record(rec: Any) -> None:
        train.append(rec.seconds - rec.eval_s)
        evals.append(rec.eval_s)

    FullGraphTrainer(config).fit(payload, on_epoch=record)
    return statistics.median(train[2:]), statistics.median(evals[2:])


def current_rss() -> int:
    """This process's resident bytes (``VmRSS``)."""
    import psutil

    return int(psutil.Process().memory_info().rss)


def _steady(rates: dict[int, KernelRates], single: int) -> None:
    """Keep every multi-thread rate at least 0.4x the one-thread rate.

    Two threads are not more than 2.5x faster than one; a faster timing is
    noise. A slower one is kept: on a busy machine a parallel region waits for
    its slowest thread (numba's workers spin beside torch's), and training
    sees the same.
    """
    base = rates[single]

    def band(value: float, ref: float) -> float:
        return max(value, 0.4 * ref)

    for threads, r in list(rates.items()):
        if threads == single:
            continue
        rates[threads] = KernelRates(
            spmm_fwd={k: band(v, base.spmm_fwd[k]) for k, v in r.spmm_fwd.items()},
            spmm_bwd={k: band(v, base.spmm_bwd[k]) for k, v in r.spmm_bwd.items()},
            spmm_small_fwd={
                k: band(v, base.spmm_small_fwd[k]) for k, v in r.spmm_small_fwd.items()
            },
            spmm_small_bwd={
                k: band(v, base.spmm_small_bwd[k]) for k, v in r.spmm_small_bwd.items()
            },
            linear_fwd={
                k: band(v, base.linear_fwd[k]) for k, v in r.linear_fwd.items()
            },
            linear_bwd={
                k: band(v, base.linear_bwd[k]) for k, v in r.linear_bwd.items()
            },
            dropout=band(r.dropout, base.dropout),
            elementwise=band(r.elementwise, base.elementwise),
            gather=band(r.gather, base.gather),
            sample=band(r.sample, base.sample),
            fresh=band(r.fresh, base.fresh),
        )


def calibrate() -> Calibration:
    """Measure every rate at one thread and at every core (a few seconds)."""
    start = time.perf_counter()
    import strata.operators.io.datasets
    import strata.operators.trainers  # noqa: F401  (what a worker imports)

    base_rss = current_rss()
    counts = sorted({1, cores()})
    quiet = logging.getLogger("strata")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # the trainers' epoch lines are not news
    rates: dict[int, KernelRates] = {}
    epoch_fixed: dict[int, float] = {}
    eval_fixed: dict[int, float] = {}
    for threads in counts:
        with _threads(threads):
            rates[threads] = _rates()
            epoch_fixed[threads], eval_fixed[threads] = _fixed(threads)
    quiet.setLevel(level)
    _steady(rates, counts[0])
    return Calibration(
        key=machine_key(),
        cores=cores(),
        rates=rates,
        epoch_fixed_s=epoch_fixed,
        eval_fixed_s=eval_fixed,
        base_rss_bytes=base_rss,
        seconds=time.perf_counter() - start,
        created=time.time(),
        load=os.getloadavg()[0],
    )


def _collectives(ctx: Any) -> dict[str, float]:
    """Gang worker: its RSS, a small all-reduce's and a large all-to-all's time."""
    import torch
    import torch.distributed as dist

    rss = current_rss()
    small = torch.zeros(16)
    big = torch.zeros(1 << 20)  # 4 MiB, half to each rank of two
    for _ in range(3):
        dist.all_reduce(small)
        dist.all_to_all_single(torch.empty_like(big), big)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(20):
        dist.all_reduce(small)
    latency = (time.perf_counter() - start) / 20
    times = []
    for _ in range(5):
        dist.barrier()
        start = time.perf_counter()
        dist.all_to_all_single(torch.empty_like(big), big)
        times.append(time.perf_counter() - start)
    return {
        "latency": latency,
        "per_byte": statistics.median(times) / (big.numel() * 4),
        "rss": rss,
    }


def _gang_epochs(scale: int, width: int, chunks: int) -> tuple[float, float, Any]:
    """Median train and eval seconds of a gang of two on an RMAT graph.

    With the run's report (HongTu's plan summary, each worker's peak RSS).
    """
    from strata.operators.io.datasets import load_dataset
    from strata.operators.io.task import with_task
    from strata.operators.trainers import ModelConfig, TrainConfig
    from strata.operators.trainers.distributed import (
        DistributedConfig,
        DistributedTrainer,
        Exact,
        GangConfig,
        HongTu,
    )

    payload = load_dataset(f"rmat:scale={scale},edge_factor=8")
    payload = with_task(payload, classes=4, features=width, train_fraction=0.5, seed=0)
    config = TrainConfig(
        ModelConfig("gcn", hidden=width), epochs=5, device="cpu", restore_best=False
    )
    mode = Exact() if chunks == 0 else HongTu(chunks=chunks)
    dist = DistributedConfig(gang=GangConfig(workers=2), mode=mode)
    run = DistributedTrainer(config, dist).fit(payload)
    history = run.history[1:]
    return (
        statistics.median(r.seconds - r.eval_s for r in history),
        statistics.median(r.eval_s for r in history),
        run.report,
    )


def calibrate_gang() -> GangRates:
    """Time a CPU gang of two: collectives, exact and chunked epochs.

    Four gangs start (seconds each): one times the collectives; the others
    train a 2-layer GCN in exact mode on a 512-node graph (a gang epoch's fixed
    cost), and in exact mode and with HongTu's 2 chunks on a 4096-node graph at
    width 64 (what HongTu's moved bytes cost).
    """
    from strata.engine.gang import GangSpec, run_gang

    results = run_gang(_collectives, GangSpec(workers=2, device="cpu"))
    fixed_train, fixed_eval, tiny = _gang_epochs(9, 8, 0)
    exact_train, exact_eval, _ = _gang_epochs(12, 64, 0)
    chunked_train, chunked_eval, report = _gang_epochs(12, 64, 2)
    plan = report["plan"]
    rows = (plan["host_rows"] + plan["peer_rows"]) / 2  # per worker, per layer
    moved = 2 * rows * 64 * 4  # two layers of width 64 (input and hidden)
    cached = 2 * (1 << 12) / 2 * 64 * 4
    return GangRates(
        latency_s=max(r["latency"] for r in results),
        per_byte_s=max(r["per_byte"] for r in results),
        worker_rss_bytes=max(int(w["peak_rss_bytes"]) for w in tiny["per_worker"]),
        epoch_fixed_s=fixed_train,
        eval_fixed_s=fixed_eval,
        moved_s=max(chunked_train - exact_train, 0.0) / (2 * moved + 2 * cached),
        moved_eval_s=max(chunked_eval - exact_eval, 0.0) / moved,
    )
