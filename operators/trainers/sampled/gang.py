"""One trainer rank of sampled training on a gang: :func:`train_rank`.

Every trainer rank owns one part of the graph: its feature rows and labels (read
locally), and its share of the training vertices
(:func:`~strata.operators.samplers.schedule.balanced_train_ids`). An epoch is the
list of *global* batches of :mod:`strata.operators.samplers.schedule`; in batch
``b`` the rank trains on the seeds of ``b`` it was given, and the gradients of
the ranks are summed, each rank's loss scaled by ``1 / |b|`` (the global batch's
size). So the step is the gradient of the mean loss over the global batch,
whatever the worker count, and every rank takes the same ``ceil(T / B)`` steps.
Dropout masks are counter-based (a row's mask is a hash of its global id, the
step and the layer), so they too are the same with 1 or N workers.

Where a rank's blocks come from is a :class:`BlockSource`:

* :class:`LocalBlockSource` (colocated, RapidGNN): the rank samples its part of
  each global batch itself, with the rank-free sampler key ``(seed, epoch, b)``;
* Armada's source (:mod:`strata.operators.trainers.sampled.armada`): sampler
  workers hold the structure and stream the blocks to the trainers.

A background :class:`~strata.operators.trainers.prefetch.Prefetcher` (``depth``
batches and at most ``prefetch_bytes`` ahead) takes each batch's blocks from the
source, checks them against the epoch's schedule (digest), and gathers the input
rows through a :class:`~strata.operators.trainers.sampled.rows.RowRouter`: local
rows from this rank's table, remote rows from the cache, misses with one request
per owner to the feature servers. The cache of remote rows for epoch ``e + 1``
(its schedule is computed ahead) fills in the background during epoch ``e``
(RapidGNN's look-ahead ``EPOCH``); the buffers swap at the epoch boundary.

The rank returns its per-epoch counters (traffic, cache, times, waits) and, on
trainer rank 0, the final weights and the per-step losses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from strata.engine.gang import GangContext, GradientAllReducer
from strata.operators.layers import BasicGNN
from strata.operators.samplers import Block, NeighborSampler, SamplerConfig
from strata.operators.samplers.schedule import (
    EpochSchedule,
    build_schedule,
    global_batches,
    rank_batches,
)
from strata.operators.trainers.config import TrainConfig, build_model
from strata.operators.trainers.dropout import counter_dropout
from strata.operators.trainers.optim import clip_gradients, set_epoch_lr
from strata.operators.trainers.prefetch import Prefetcher
from strata.operators.trainers.sampled.cache import (
    BeladyCache,
    DegreeCache,
    FrequencyCache,
    NoCache,
    RemoteRowCache,
    fetch_by_owner,
)
from strata.operators.trainers.sampled.config import SampledGangConfig
from strata.operators.trainers.sampled.inputs import RankInputs, RankResult
from strata.operators.trainers.sampled.rows import RowRouter
from strata.operators.trainers.sampled.source import (
    BlockSource,
    LocalBlockSource,
    SampledBlocks,
)
from strata.storage.features.traffic import Traffic

if TYPE_CHECKING:
    from strata.storage.features.remote import RemoteFeatureStore

__all__ = ["colocated_worker", "make_cache", "train_rank"]


@dataclass(slots=True, eq=False)
class _Prepared:
    """A batch ready for the step: blocks, input rows, labels, costs."""

    index: int
    seeds: np.ndarray
    blocks: list[Block] | None
    x: torch.Tensor | None
    y: torch.Tensor | None
    sample_s: float
    gather_s: float
    nbytes: int


def make_cache(
    gang: SampledGangConfig,
    *,
    owner: np.ndarray,
    rank: int,
    num_features: int,
    degree: np.ndarray,
    planned: bool = True,
) -> RemoteRowCache:
    """The remote-row cache ``gang`` asks for, for the feature rows of ``rank``.

    ``planned``: whether an epoch schedule will size a fractional cache (the
    colocated ranks build one; Armada's trainers cannot).
    """
    spec: int | float = gang.cache if gang.cache <= 1 else int(gang.cache)
    if not planned and isinstance(spec, float):
        # No schedule to size a fraction by (Armada's trainers hold no
        # structure): a fraction of the vertices other parts own.
        spec = math.ceil(spec * int(np.count_nonzero(owner != rank)))
    common: dict[str, Any] = {
        "attr": "x",
        "owner": owner,
        "rank": rank,
        "row_shape": (num_features,),
        "dtype": np.float32,
    }
    if gang.cache == 0 or gang.cache_policy == "none":
        return NoCache(**common)
    if gang.cache_policy == "frequency":
        return FrequencyCache(spec, **common)
    if gang.cache_policy == "degree":
        return DegreeCache(spec, degree=degree, **common)
    return BeladyCache(spec, **common)


def _needs_schedule(cache: RemoteRowCache) -> bool:
    """Whether the cache plans each epoch from its schedule (look-ahead)."""
    return isinstance(cache, (FrequencyCache, BeladyCache))


class _Labels:
    """The labels of this rank's training seeds: own rows, others fetched once."""

    def __init__(
        self,
        inputs: RankInputs,
        rank: int,
        store: RemoteFeatureStore | None,
        train: np.ndarray,
    ) -> None:
        owner = inputs.array("owner")
        self.y = np.full(inputs.num_nodes, -1, dtype=np.int64)
        mine = np.flatnonzero(owner == rank)
        self.y[mine] = inputs.local_tables(rank)["y"].reshape(-1)
        rehomed = train[owner[train] != rank]
        self.fetched = int(rehomed.size)
        if rehomed.size:
            assert store is not None, "re-homed seeds exist only with several parts"
            fetch_by_owner(store, "y", rehomed, owner, self.y, rehomed)

    def __call__(self, seeds: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.y[seeds])


def _batch_bytes(prepared: _Prepared) -> int:
    return prepared.nbytes


def train_rank(
    ctx: GangContext,
    inputs: RankInputs,
    source: BlockSource,
    group: Any = None,
) -> RankResult:
    """Train on this rank until the last epoch (see the module docs).

    Args:
        ctx: the gang context (or a one-rank :func:`~strata.engine.gang.local_gang`).
        inputs: the shared inputs of the run.
        source: where this rank's blocks come from.
        group: the trainers' process group (``None``: every rank trains).
    """
    config, sampling, gang = inputs.config, inputs.sampling, inputs.gang
    rank = inputs.trainer_rank(ctx.rank)
    device = ctx.device
    owner = inputs.array("owner")
    rank_of = inputs.array("rank_of")
    train_ids = inputs.array("train_ids")
    mine = train_ids[rank_of[train_ids] == rank]
    store = _remote_store(inputs, rank)
    # Seeded alike on every rank: every rank starts from the same weights.
    model = build_model(config, inputs.num_features, inputs.num_classes).to(device)
    optimizer = _optimizer(model, config)
    reducer = GradientAllReducer(model, op="sum", **_group_kwargs(group))
    cache = make_cache(
        gang,
        owner=owner,
        rank=rank,
        num_features=inputs.num_features,
        degree=inputs.array("degree"),
        planned=inputs.structure_on_trainers,
    )
    local_x = np.asarray(inputs.local_tables(rank)["x"])
    fetcher = store if store is not None else _NoRemote()
    router = RowRouter("x", owner, rank, local_x, fetcher, cache)
    setup_start = time.perf_counter()
    labels = _Labels(inputs, rank, store, mine)
    sampler = _schedule_sampler(inputs, cache)
    seed, batch_size = config.seed, sampling.batch_size
    steps = math.ceil(train_ids.size / batch_size)

    def plan(epoch: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        batches = global_batches(train_ids, seed, epoch, batch_size)
        return batches, rank_batches(batches, rank_of, rank)

    def schedule_for(epoch: int) -> EpochSchedule | None:
        if sampler is None:
            return None
        return build_schedule(
            sampler,
            plan(epoch)[1],
            owner,
            rank,
            epoch,
            keep_blocks_bytes=gang.keep_blocks_bytes,
        )

    # Epoch 0's schedule and cache are built before training (counted as setup).
    schedule = schedule_for(0)
    if not isinstance(cache, NoCache):
        cache.fill_pending(schedule or _empty_schedule(rank, steps), fetcher)
        cache.swap()
    setup: dict[str, Any] = {
        "setup_s": time.perf_counter() - setup_start,
        "rehomed_labels": labels.fetched,
        "train_ids": int(mine.size),
        "steps": steps,
        **cache.fill.as_dict("setup_fill"),
    }
    history: list[dict[str, Any]] = []
    step_losses: list[list[float]] = []
    epoch_losses: list[float] = []
    train_correct: list[int] = []
    p = model.dropout if isinstance(model, BasicGNN) else 0.0
    for epoch in range(config.epochs):
        set_epoch_lr(optimizer, config.lr, config.schedule, epoch, config.epochs)
        batches, my_batches = plan(epoch)
        sizes = [b.size for b in batches]
        order_digest = _check_same_order(ctx, group, rank, epoch, batches)
        router.reset()
        fill0 = cache.fill.snapshot()
        ahead = _Lookahead(schedule_for, cache, fetcher, epoch + 1, config.epochs)
        epoch_start = time.perf_counter()
        kept = None if schedule is None else schedule.blocks
        if kept is not None and isinstance(source, LocalBlockSource):
            source.adopt(epoch, kept)  # sampled once, not twice
        stream = source.epoch(epoch, my_batches)

        def produce(
            index: int,
            stream: Iterator[SampledBlocks] = stream,
            schedule: EpochSchedule | None = schedule,
        ) -> _Prepared:
            item = next(stream)
            if item.batch_index != index:
                raise RuntimeError(
                    f"batch_index in trainer rank {rank}: expected {index}, got "
                    f"{item.batch_index} from the block source"
                )
            if item.blocks is None:
                return _Prepared(
                    index, item.seeds, None, None, None, item.sample_s, 0, 0
                )
            start = time.perf_counter()
            ids = item.blocks[0].src_global_ids
            if schedule is not None:
                schedule.check(index, ids)
            x = torch.from_numpy(router.gather(index, ids))
            y = labels(item.seeds)
            nbytes = x.numel() * 4 + sum(b.nbytes() for b in item.blocks)
            gathered = time.perf_counter() - start
            return _Prepared(
                index, item.seeds, item.blocks, x, y, item.sample_s, gathered, nbytes
            )

        prefetcher = Prefetcher(
            produce,
            steps,
            sampling.prefetch,
            f"prefetch-r{rank}-e{epoch}",
            max_bytes=gang.prefetch_bytes,
            size_of=_batch_bytes,
        )
        losses = torch.zeros(steps, dtype=torch.float64)
        correct = 0
        compute_s = sample_s = gather_s = 0.0
        model.train()
        with prefetcher:
            for batch in prefetcher:
                start = time.perf_counter()
                optimizer.zero_grad(set_to_none=True)
                if batch.blocks is not None:
                    assert batch.x is not None
                    assert batch.y is not None
                    out = _forward(model, batch, p, seed, epoch * steps + batch.index)
                    y = batch.y.to(device)
                    loss_sum = F.cross_entropy(out, y, reduction="sum")
                    (loss_sum / sizes[batch.index]).backward()
                    losses[batch.index] = loss_sum.detach().double().cpu()
                    correct += int((out.detach().argmax(1) == y).sum())
                reducer.reduce()
                clip_gradients(model.parameters(), config.clip_grad_norm)
                optimizer.step()
                compute_s += time.perf_counter() - start
                sample_s += batch.sample_s
                gather_s += batch.gather_s
        train_s = time.perf_counter() - epoch_start
        lookahead_wait = ahead.join()
        cache.swap()  # no-op unless the look-ahead filled the pending buffer
        epoch_schedule, schedule = schedule, ahead.schedule
        totals = torch.cat(
            [losses, torch.tensor([float(correct)], dtype=torch.float64)]
        )
        _all_reduce(ctx, totals, group)
        step_losses.append((totals[:-1] / torch.tensor(sizes)).tolist())
        epoch_losses.append(float(totals[:-1].sum()) / train_ids.size)
        train_correct.append(int(totals[-1]))
        counters = router.snapshot(epoch_schedule).as_dict()
        fill = cache.fill.snapshot() - fill0
        counters.update(fill.as_dict("epoch_fill"))
        counters.update(
            {
                "epoch": epoch,
                "order_digest": f"{order_digest:016x}",
                "train_s": train_s,
                "compute_s": compute_s,
                "sample_s": sample_s,
                "gather_s": gather_s,
                "trainer_stall_s": prefetcher.stall_s,
                "lookahead_wait_s": lookahead_wait,
                "schedule_s": ahead.schedule_s,
                "schedule_bytes": 0 if schedule is None else schedule.nbytes,
                "prefetch_peak_bytes": prefetcher.peak_bytes,
                "queue_depth": {
                    str(d): n for d, n in sorted(prefetcher.depth_counts.items())
                },
                "seeds": int(mine.size),
                **source.counters(),
            }
        )
        history.append(counters)
        ctx.heartbeat(f"epoch {epoch + 1}/{config.epochs}")
    client = Traffic() if store is None else store.traffic.snapshot()
    client = client + inputs.partition_traffic(rank)  # the network path's read
    setup["client"] = dataclasses.asdict(client)
    if store is not None:
        store.close()
    state = None
    if rank == 0:
        state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return RankResult(
        rank, history, step_losses, epoch_losses, train_correct, state, setup
    )


def colocated_worker(ctx: GangContext, inputs: RankInputs) -> RankResult:
    """The gang function of the colocated mode: every rank samples and trains."""
    sampler = _sampler(inputs)
    return train_rank(ctx, inputs, LocalBlockSource(sampler))


# ----------------------------------------------------------------- pieces


class _NoRemote:
    """The fetcher of a one-part run: nothing is remote."""

    def __init__(self) -> None:
        self.traffic = Traffic()

    def fetch(
        self, attr: str, ids_by_owner: Mapping[int, np.ndarray]
    ) -> dict[int, np.ndarray]:
        if any(len(ids) for ids in ids_by_owner.values()):
            raise RuntimeError("a one-part run has no remote rows to fetch")
        return {part: np.empty(0) for part in ids_by_owner}

    def row_bytes(self, attr: str) -> int:
        return 0


class _Lookahead:
    """Epoch ``e + 1``'s schedule and cache fill, built in a background thread."""

    def __init__(
        self,
        schedule_for: Any,
        cache: RemoteRowCache,
        fetcher: Any,
        epoch: int,
        epochs: int,
    ) -> None:
        self.schedule: EpochSchedule | None = None
        self.schedule_s = 0.0
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if epoch >= epochs or not _needs_schedule(cache):
            return

        def run() -> None:
            try:
                start = time.perf_counter()
                self.schedule = schedule_for(epoch)
                self.schedule_s = time.perf_counter() - start
                assert self.schedule is not None
                cache.fill_pending(self.schedule, fetcher)
            except BaseException as error:  # re-raised by join
                self._error = error

        self._thread = threading.Thread(target=run, name=f"lookahead-e{epoch}")
        self._thread.start()

    def join(self) -> float:
        """Wait for the thread; return the seconds waited; re-raise its error."""
        if self._thread is None:
            return 0.0
        start = time.perf_counter()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return time.perf_counter() - start


def _sampler(inputs: RankInputs) -> NeighborSampler:
    sampling = inputs.sampling
    config = SamplerConfig(sampling.fanouts, sampling.replace)
    return NeighborSampler(inputs.graph(), config, seed=inputs.config.seed)


def _schedule_sampler(
    inputs: RankInputs, cache: RemoteRowCache
) -> NeighborSampler | None:
    """A sampler for the schedule pass, where a cache is planned from it.

    Colocated ranks hold the structure and build each epoch's schedule for any
    cache (the top-degree one uses epoch 0's to resolve a fractional size);
    Armada's trainers hold no structure, so only caches without a schedule run
    there.
    """
    if isinstance(cache, NoCache):
        return None
    if not inputs.structure_on_trainers:
        if not _needs_schedule(cache):
            return None
        raise RuntimeError(
            "cache_policy in SampledGangConfig: the frequency and Belady caches need "
            "the epoch schedule, which needs the graph's structure on the trainers; "
            "with sampler workers use cache_policy='degree' or 'none'"
        )
    return _sampler(inputs)


def _empty_schedule(rank: int, steps: int) -> EpochSchedule:
    empty = np.empty(0, dtype=np.int64)
    return EpochSchedule(
        epoch=0,
        rank=rank,
        seeds=tuple(empty for _ in range(steps)),
        remote_ids=empty,
        remote_offsets=np.zeros(steps + 1, dtype=np.int64),
        digests=np.zeros(steps, dtype=np.uint64),
        num_inputs=np.zeros(steps, dtype=np.int64),
        num_local=np.zeros(steps, dtype=np.int64),
        count_ids=empty,
        counts=empty,
        schedule_s=0.0,
    )


def _remote_store(inputs: RankInputs, rank: int) -> RemoteFeatureStore | None:
    if inputs.gang.workers == 1:
        return None
    from strata.storage.features.remote import RemoteFeatureStore

    # The servers apply the network model (one place); the client only waits.
    return RemoteFeatureStore(
        dict(inputs.endpoints),
        inputs.array("owner"),
        local_part=rank,
        local_tables=inputs.local_tables(rank),
        timeout_s=inputs.gang.fetch_timeout_s,
        names=dict(inputs.server_names),
    )


def _optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    from strata.operators.trainers.base import build_optimizer

    return build_optimizer(model, config)


def _group_kwargs(group: Any) -> dict[str, Any]:
    return {} if group is None else {"group": group}


def _check_same_order(
    ctx: GangContext,
    group: Any,
    rank: int,
    epoch: int,
    batches: list[np.ndarray],
) -> int:
    """The epoch's global batches' digest, checked equal on every trainer.

    Every rank derives the global batches from the seed and the training ids on
    its own; a rank that derived others (another seed, other training ids)
    would train on a different schedule silently. One small all-reduce per
    epoch (the max of the digest and of its negation) catches it.
    """
    hasher = hashlib.blake2b(digest_size=8)
    for batch in batches:
        hasher.update(np.int64(batch.size).tobytes())
        hasher.update(np.ascontiguousarray(batch, dtype="<i8").tobytes())
    digest = int.from_bytes(hasher.digest(), "little", signed=True)
    both = torch.tensor([digest, -digest], dtype=torch.int64)
    _all_reduce(ctx, both, group, op="max")
    if int(both[0]) != digest or int(both[1]) != -digest:
        raise RuntimeError(
            f"epoch schedule in trainer rank {rank}, epoch {epoch}: expected the "
            f"global batches every trainer derived, got digest {digest:016x} here "
            "and another elsewhere. Hint: every rank needs the same seed and "
            "training ids"
        )
    return digest & ((1 << 64) - 1)


def _all_reduce(
    ctx: GangContext, tensor: torch.Tensor, group: Any, op: str = "sum"
) -> None:
    """Sum ``tensor`` in place over the trainers (every rank when ``group`` is None).

    NCCL reduces device tensors only, so the sum runs on the rank's device.
    """
    on_device = tensor.to(ctx.device)
    if group is None:
        ctx.all_reduce(on_device, op="max" if op == "max" else "sum")
    else:
        import torch.distributed as dist

        reduce = dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM
        dist.all_reduce(on_device, op=reduce, group=group)
    tensor.copy_(on_device.cpu())


def _forward(
    model: torch.nn.Module, batch: _Prepared, p: float, seed: int, step_key: int
) -> torch.Tensor:
    """The seeds' outputs, with counter-based dropout keyed by global row ids."""
    assert batch.blocks is not None
    assert batch.x is not None
    blocks = batch.blocks
    x = batch.x.to(next(model.parameters()).device, torch.float32)
    if not isinstance(model, BasicGNN) or p == 0.0:
        out: torch.Tensor = model(blocks, x)
        return out
    ids = [torch.from_numpy(b.src_global_ids) for b in blocks]

    def dropout(rows: torch.Tensor, layer: int) -> torch.Tensor:
        return counter_dropout(
            rows, ids[layer], p=p, seed=seed, epoch=step_key, layer=layer
        )

    result: torch.Tensor = model(blocks, x, dropout=dropout)
    return result
