"""Armada: sampler workers apart from trainer workers, streaming blocks to them.

One gang of ``M + N`` processes: ranks ``0 .. M-1`` are *sampler* workers, ranks
``M .. M+N-1`` *trainer* workers (one supervisor covers all of them, so a dead
sampler or trainer fails the run naming its rank, and no process outlives it).
Samplers hold graph structure only; trainers hold features and the model only,
and all-reduce their gradients over a trainer subgroup, which samplers never
join after setup.

**Schedule** (the colocated mode's, so both give the same losses). Epoch ``e``'s
global batches are the shuffled training ids cut every ``batch_size``
(:func:`~strata.operators.samplers.schedule.global_batches`); trainer ``c`` trains,
in batch ``b``, on the seeds of ``b`` the split gave it (``rank_of == c``,
:func:`~strata.operators.samplers.schedule.rank_batches`), whose blocks are
``NeighborSampler.sample(seeds, e, batch_index=b)`` with the rank-free key. A
*unit* ``(b, c)`` is sampled by sampler ``s = (b * N + c) mod M`` and sent on the
``(s, c)`` channel, which therefore carries increasing ``b``; trainer ``c``
reads batch ``b`` from sampler ``(b * N + c) mod M``. Units without seeds are
skipped by both sides. No cycle of waits can form: the smallest unit not yet
consumed is always the next one its sampler sends and its trainer reads.

**Transport.** One :mod:`strata.engine.net` PUSH/PULL channel per ``(s, c)``
pair, bounded by a high-water mark: a trainer that falls behind fills its
queues and blocks its samplers (``send_blocked_s``), a sampler that falls behind
starves its trainers (``recv_wait_s``). A unit is one message tagged
``(epoch, b)``: the seeds, the sampler's seconds, and ``indptr``, ``indices``,
``src_global_ids`` of every block (raw buffers, no pickle, no copy). The
trainer checks the tag and the seeds against its own schedule.

**Structure.** Sampler ``s`` serves a fixed set of trainers (those ``c`` with
``(b * N + c) mod M == s`` for some step ``b``), so it samples only their seeds
and holds only the in-edges of their ``(L - 1)``-hop in-closure
(:mod:`.structure`); ``structure_bytes`` against ``full_structure_bytes`` is
what that saves. With ``M == N`` sampler ``s`` serves trainer ``s`` alone, and a
partition that keeps neighbourhoods together (GREM by default) keeps its share
of the graph small.

Counters: sampler ``batches``, ``sample_s``, ``send_blocked_s``, ``ship_bytes``,
``structure_bytes``; trainer ``recv_wait_s``, ``batches``, ``recv_bytes``.

References:
    Waleffe et al. *Armada: Memory-Efficient Distributed Training of Large-Scale
    Graph Neural Networks.* arXiv:2502.17846 (2025).

Examples:
    >>> layout = ArmadaLayout(samplers=2, trainers=3)
    >>> [layout.sampler_of(b, c) for b in range(2) for c in range(3)]
    [0, 1, 0, 1, 0, 1]
    >>> layout.trainers_of(0, steps=2), layout.samplers_of(1, steps=2)
    ([0, 1, 2], [1, 0])
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from strata.engine.gang import GangContext
from strata.engine.net import ChannelConfig, Kind, Message, Receiver, Sender
from strata.operators.errors import OperatorError
from strata.operators.samplers import Block, SamplerConfig
from strata.operators.samplers.schedule import global_batches
from strata.operators.trainers.sampled.source import SampledBlocks
from strata.operators.trainers.sampled.structure import (
    SamplerStructure,
    sampler_structure,
)
from strata.storage import CSRGraph

if TYPE_CHECKING:
    from strata.operators.trainers.sampled.inputs import RankInputs, RankResult

__all__ = [
    "ArmadaLayout",
    "ArmadaPlan",
    "ArmadaSource",
    "armada_rank",
    "armada_worker",
]

T = TypeVar("T")
_WHERE = "Armada"


@dataclass(frozen=True, slots=True)
class ArmadaLayout:
    """Who samples what for whom: ``samplers`` (M) and ``trainers`` (N).

    Gang ranks ``0 .. M-1`` sample; rank ``M + c`` is trainer ``c``.
    """

    samplers: int
    trainers: int

    def __post_init__(self) -> None:
        if self.samplers < 1 or self.trainers < 1:
            raise OperatorError.build(
                "samplers, trainers",
                _WHERE,
                "at least one of each",
                f"{self.samplers}, {self.trainers}",
            )

    @property
    def processes(self) -> int:
        """Gang size: samplers and trainers."""
        return self.samplers + self.trainers

    @property
    def trainer_ranks(self) -> list[int]:
        """Gang ranks of the trainers, in trainer order."""
        return list(range(self.samplers, self.processes))

    def sampler_of(self, batch: int, trainer: int) -> int:
        """The sampler of unit ``(batch, trainer)``."""
        return (batch * self.trainers + trainer) % self.samplers

    def trainers_of(self, sampler: int, steps: int) -> list[int]:
        """The trainers ``sampler`` sends to (over an epoch of ``steps``)."""
        return sorted(
            {
                c
                for b in range(min(steps, self.samplers))
                for c in range(self.trainers)
                if self.sampler_of(b, c) == sampler
            }
        )

    def samplers_of(self, trainer: int, steps: int) -> list[int]:
        """The samplers ``trainer`` reads from, in the order of first use."""
        order = [self.sampler_of(b, trainer) for b in range(min(steps, self.samplers))]
        return list(dict.fromkeys(order))


@dataclass(frozen=True, slots=True)
class ArmadaPlan:
    """Everything both sides agree on before the first batch.

    Attributes:
        layout: samplers and trainers.
        epochs: epochs to stream.
        batch_size: seeds per global batch.
        seed: the run's seed (sampler key and batch order).
        sampler: fan-outs and replacement.
        channel: queue bound (``hwm`` messages at each end of each channel) and
            deadlines of the channels. ``linger_s`` should match ``timeout_s``:
            a sampler that has sent its last unit waits that long for its
            trainers to read everything (they may be several steps behind);
            closing earlier would drop what they have not read.
        prep_delay_s: extra seconds a sampler waits per unit, standing for
            preparation work it does not do here (gathering on a bigger
            graph); benchmarks use it to check the pipeline model on a 2-core
            machine (``grem.md`` D1). 0 in training.
    """

    layout: ArmadaLayout
    epochs: int
    batch_size: int
    seed: int
    sampler: SamplerConfig
    channel: ChannelConfig = field(
        default_factory=lambda: ChannelConfig(hwm=2, timeout_s=300.0, linger_s=300.0)
    )
    prep_delay_s: float = 0.0

    def steps(self, num_train: int) -> int:
        """Global batches per epoch."""
        return math.ceil(num_train / self.batch_size)


class ArmadaArrays(Protocol):
    """The run's shared arrays as a sampler reads them (``RankInputs`` is one)."""

    def array(self, name: str) -> np.ndarray:
        """``train_ids`` (sorted) or ``rank_of`` (trainer per vertex, -1 elsewhere)."""
        ...

    def graph(self) -> CSRGraph:
        """The whole graph (shared memory; only read to build the structure)."""
        ...


# ------------------------------------------------------------------ trainer side


class ArmadaSource:
    """Trainer ``c``'s blocks, received from the samplers (a ``BlockSource``).

    Args:
        trainer: the trainer index ``c``.
        layout: samplers and trainers.
        receivers: sampler index -> the bound receiving end of its channel.
    """

    def __init__(
        self, trainer: int, layout: ArmadaLayout, receivers: dict[int, Receiver]
    ) -> None:
        self.trainer = trainer
        self.layout = layout
        self.receivers = receivers
        self._batches = 0
        self._reported = (0.0, 0, 0)

    def epoch(self, epoch: int, batches: list[np.ndarray]) -> Iterator[SampledBlocks]:
        """This trainer's part of every global batch of ``epoch``, in order.

        Args:
            epoch: the epoch.
            batches: this trainer's seeds per global batch (checked against
                what arrives).

        Raises:
            OperatorError: a unit arrived out of order or with other seeds.
            ChannelTimeout: a sampler sent nothing within the deadline.
        """
        for index, seeds in enumerate(batches):
            if seeds.size == 0:
                yield SampledBlocks(epoch, index, seeds, None, 0.0)
                continue
            sampler = self.layout.sampler_of(index, self.trainer)
            message = self.receivers[sampler].recv()
            got_seeds, blocks, sample_s = self._unpack(message, epoch, index, sampler)
            if not np.array_equal(got_seeds, seeds):
                raise OperatorError.build(
                    f"seeds of batch {index} of epoch {epoch}",
                    f"{_WHERE} trainer {self.trainer}",
                    f"the trainer's own {seeds.size} seeds",
                    f"{got_seeds.size} other seeds from sampler {sampler}",
                    "samplers and trainers must share train_ids, rank_of, seed "
                    "and batch_size",
                )
            self._batches += 1
            yield SampledBlocks(epoch, index, got_seeds, blocks, sample_s)

    def _unpack(
        self, message: Message, epoch: int, index: int, sampler: int
    ) -> tuple[np.ndarray, list[Block], float]:
        if message.kind is not Kind.DATA or message.tag != (epoch, index):
            raise OperatorError.build(
                "unit",
                f"{_WHERE} trainer {self.trainer}",
                f"batch {index} of epoch {epoch} from sampler {sampler}",
                f"{message.kind.name} tagged (epoch, batch) = {message.tag}",
                "each channel carries one trainer's units in (epoch, batch) order",
            )
        arrays = message.arrays
        if (len(arrays) - 2) % 3 or len(arrays) < 5:
            raise OperatorError.build(
                "unit arrays",
                f"{_WHERE} trainer {self.trainer}",
                "seeds, seconds and 3 arrays per block",
                f"{len(arrays)} arrays",
            )
        blocks = [
            Block(
                indptr=arrays[i],
                indices=arrays[i + 1],
                src_global_ids=arrays[i + 2],
                num_dst=int(arrays[i].shape[0]) - 1,
            )
            for i in range(2, len(arrays), 3)
        ]
        return arrays[0], blocks, float(arrays[1][0])

    def counters(self) -> dict[str, float]:
        """Since the last call: ``recv_wait_s``, ``batches``, ``recv_bytes``."""
        wait = sum(r.counters.wait_s for r in self.receivers.values())
        received = sum(r.counters.bytes for r in self.receivers.values())
        last_wait, last_batches, last_bytes = self._reported
        self._reported = (wait, self._batches, received)
        return {
            "recv_wait_s": wait - last_wait,
            "batches": self._batches - last_batches,
            "recv_bytes": received - last_bytes,
        }

    def close(self, *, drain: bool = True) -> None:
        """Read every sampler's end marker (``drain``), then close the channels.

        Raises:
            OperatorError: a sampler sent more units than the trainer read.
        """
        try:
            if drain:
                for sampler, receiver in self.receivers.items():
                    message = receiver.recv()
                    if message.kind is not Kind.END:
                        raise OperatorError.build(
                            "end of stream",
                            f"{_WHERE} trainer {self.trainer}",
                            f"sampler {sampler}'s end marker after the last epoch",
                            f"another unit tagged {message.tag}",
                        )
        finally:
            for receiver in self.receivers.values():
                receiver.close()


# ------------------------------------------------------------------ sampler side


def run_sampler(
    ctx: GangContext,
    plan: ArmadaPlan,
    sampler_index: int,
    structure: SamplerStructure,
    train_ids: np.ndarray,
    rank_of: np.ndarray,
    senders: dict[int, Sender],
) -> dict[str, Any]:
    """Sample and send every unit of this sampler, every epoch; then end.

    Returns:
        The sampler's counters (``batches``, ``sample_s``, ``send_blocked_s``,
        ``ship_bytes``, ``structure_bytes``, ``loop_s``: seconds of the epochs'
        loop, so ``loop_s - send_blocked_s`` is its busy time, ...).
    """
    layout = plan.layout
    sampler = structure.sampler(plan.sampler, plan.seed)
    steps = plan.steps(train_ids.size)
    batches, sample_s = 0, 0.0
    loop_start = time.perf_counter()
    for epoch in range(plan.epochs):
        for index, batch in enumerate(
            global_batches(train_ids, plan.seed, epoch, plan.batch_size)
        ):
            owners = rank_of[batch]
            for trainer in range(layout.trainers):
                if layout.sampler_of(index, trainer) != sampler_index:
                    continue
                seeds = batch[owners == trainer]
                if seeds.size == 0:
                    continue
                start = time.perf_counter()
                blocks = sampler.sample(seeds, epoch, index)
                took = time.perf_counter() - start
                sample_s += took
                if plan.prep_delay_s:
                    time.sleep(plan.prep_delay_s)
                senders[trainer].send((epoch, index), _unit(seeds, took, blocks))
                batches += 1
            ctx.heartbeat(
                f"sampler {sampler_index}: epoch {epoch} batch {index}/{steps}"
            )
    loop_s = time.perf_counter() - loop_start
    for sender in senders.values():
        sender.end((plan.epochs, 0))
    for sender in senders.values():
        sender.close()  # waits until the trainer read everything
    return {
        "sampler": sampler_index,
        "trainers": sorted(senders),
        "batches": batches,
        "sample_s": sample_s,
        "loop_s": loop_s,
        "send_blocked_s": sum(s.counters.blocked_s for s in senders.values()),
        "ship_bytes": sum(s.counters.bytes for s in senders.values()),
        "structure_bytes": structure.structure_bytes,
        "full_structure_bytes": structure.full_structure_bytes,
        "structure_vertices": int(structure.vertices.size),
        "structure_edges": structure.num_edges,
    }


def _unit(seeds: np.ndarray, sample_s: float, blocks: list[Block]) -> list[np.ndarray]:
    arrays = [seeds, np.array([sample_s])]
    for block in blocks:
        arrays += [block.indptr, block.indices, block.src_global_ids]
    return arrays


def build_structure(
    plan: ArmadaPlan, sampler_index: int, data: ArmadaArrays
) -> tuple[SamplerStructure, float]:
    """This sampler's structure (the in-closure of its trainers' seeds); seconds."""
    start = time.perf_counter()
    train_ids = data.array("train_ids")
    rank_of = data.array("rank_of")
    served = plan.layout.trainers_of(sampler_index, plan.steps(train_ids.size))
    seeds = train_ids[np.isin(rank_of[train_ids], served)]
    structure = sampler_structure(data.graph(), seeds, plan.sampler.num_layers)
    return structure, time.perf_counter() - start


# ------------------------------------------------------------------------ setup


def connect(
    ctx: GangContext, plan: ArmadaPlan, steps: int
) -> tuple[Any, dict[int, Sender], dict[int, Receiver]]:
    """Open this rank's channels and the trainers' process group (collective).

    Every rank calls it once, in the same order: trainers bind one receiver per
    sampler feeding them, every rank learns the endpoints (``all_gather_object``),
    samplers connect one sender per trainer they feed, and the trainers' group is
    created (``new_group`` is called on every rank).

    Returns:
        ``(group, senders, receivers)``: the trainers' group (a non-member's
        handle on samplers), a sampler's senders by trainer, a trainer's
        receivers by sampler (the other one empty).
    """
    import torch.distributed as dist

    layout = plan.layout
    receivers: dict[int, Receiver] = {}
    endpoints: dict[tuple[int, int], str] = {}
    if ctx.rank >= layout.samplers:
        trainer = ctx.rank - layout.samplers
        for s in layout.samplers_of(trainer, steps):
            name = f"armada sampler {s} -> trainer {trainer}"
            receivers[s] = Receiver(config=plan.channel, name=name)
            endpoints[(s, trainer)] = receivers[s].endpoint
    try:
        everyone = ctx.all_gather_object(endpoints)
        # On GPUs the trainers reduce over NCCL; the gang's own group may be
        # gloo (samplers need no GPU, and NCCL allows one rank per GPU).
        backend = "nccl" if ctx.device.type == "cuda" else None
        group = dist.new_group(ranks=layout.trainer_ranks, backend=backend)
    except BaseException:
        for receiver in receivers.values():
            receiver.close()
        raise
    if ctx.rank >= layout.samplers:
        return group, {}, receivers
    known = {pair: endpoint for ends in everyone for pair, endpoint in ends.items()}
    senders = {
        c: Sender(
            known[(ctx.rank, c)],
            config=plan.channel,
            name=f"armada sampler {ctx.rank} -> trainer {c}",
        )
        for c in layout.trainers_of(ctx.rank, steps)
    }
    return group, senders, {}


def armada_rank(
    ctx: GangContext,
    plan: ArmadaPlan,
    data: ArmadaArrays,
    train: Callable[[GangContext, ArmadaSource, Any], T],
) -> T | dict[str, Any]:
    """One rank of an Armada gang: sample and send, or receive and ``train``.

    Args:
        ctx: the gang context (``plan.layout.processes`` ranks).
        plan: the shared plan.
        data: the shared arrays (graph, ``train_ids``, ``rank_of``).
        train: what a trainer does with its source and the trainers' group
            (the lead's ``train_rank``; tests collect the blocks).

    Returns:
        ``train``'s result on trainers; the sampler's counters on samplers.
    """
    layout = plan.layout
    if ctx.world_size != layout.processes:
        raise OperatorError.build(
            "gang size",
            _WHERE,
            f"{layout.processes} ranks ({layout.samplers} samplers + "
            f"{layout.trainers} trainers)",
            str(ctx.world_size),
        )
    train_ids = data.array("train_ids")
    steps = plan.steps(train_ids.size)
    if ctx.rank < layout.samplers:
        # Structure first (before the collective setup): trainers set up meanwhile.
        structure, structure_s = build_structure(plan, ctx.rank, data)
        _, senders, _ = connect(ctx, plan, steps)
        try:
            counters = run_sampler(
                ctx,
                plan,
                ctx.rank,
                structure,
                train_ids,
                data.array("rank_of"),
                senders,
            )
        finally:
            for sender in senders.values():
                sender.close(0.0)  # no-op after a clean end (already closed)
        return {**counters, "structure_s": structure_s}
    group, _, receivers = connect(ctx, plan, steps)
    source = ArmadaSource(ctx.rank - layout.samplers, layout, receivers)
    try:
        result = train(ctx, source, group)
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to see
            source.close(drain=False)
        raise
    source.close()
    return result


# --------------------------------------------------------- the trainer's adapter


def plan_of(inputs: RankInputs) -> ArmadaPlan:
    """The Armada plan of a sampled gang's inputs."""
    gang, sampling, config = inputs.gang, inputs.sampling, inputs.config
    return ArmadaPlan(
        layout=ArmadaLayout(gang.samplers, gang.workers),
        epochs=config.epochs,
        batch_size=sampling.batch_size,
        seed=config.seed,
        sampler=SamplerConfig(sampling.fanouts, sampling.replace),
        channel=ChannelConfig(
            hwm=2,
            timeout_s=gang.collective_timeout_s,
            linger_s=gang.collective_timeout_s,
        ),
    )


def armada_worker(ctx: GangContext, inputs: RankInputs) -> RankResult | dict[str, Any]:
    """The gang function of the Armada mode (``SampledGangTrainer``).

    Samplers return their counters; trainers run
    :func:`~strata.operators.trainers.sampled.gang.train_rank` on an
    :class:`ArmadaSource` over the trainers' group and return its result.
    """
    from strata.operators.trainers.sampled.gang import train_rank

    def train(ctx: GangContext, source: ArmadaSource, group: Any) -> RankResult:
        return train_rank(ctx, inputs, source, group)

    return armada_rank(ctx, plan_of(inputs), inputs, train)
