"""Sampled (mini-batch) training on one device, fed by a background prefetcher.

Each epoch shuffles the training nodes with the keyed order of
:func:`~strata.operators.trainers.prefetch.epoch_order` and cuts them into batches of
``batch_size`` seeds. For every batch a
:class:`~strata.operators.trainers.prefetch.Prefetcher` thread samples the blocks
(:class:`~strata.operators.samplers.NeighborSampler`, keyed by ``(seed, epoch,
batch)``), gathers the input rows from the :class:`~strata.storage.FeatureStore` (in
memory, or an Arrow dataset directory, memory mapped) into pinned memory when training
on CUDA, and queues the batch; the training loop only pops, so sampling and gathering
overlap the model's steps. For a layer stack the thread does more
(:class:`~strata.operators.trainers.block_batches.BlockBatches`): it computes the
first layer's aggregation of the raw features straight from an in-memory table, and
builds every later block's structures, so the step is the layers' dense work. The
next epoch's prefetcher starts as soon as the current epoch's last batch is taken, so
it also overlaps evaluation. Everything random is keyed by the seed and the epoch, so a
run is reproducible and resumable at any epoch boundary.

Evaluation (:class:`EvalMode`):

* ``LAYERWISE`` (default): exact outputs for every node by layer-wise
  full-neighbour inference
  (:func:`~strata.operators.trainers.inference.layerwise_inference`); for GraphSAGE, GAT
  and GIN this equals a full-graph forward pass.
* ``SAMPLED``: each split's nodes through sampled blocks with the training
  fan-outs, under a fixed evaluation key (the same neighbourhoods every epoch).
  Cheaper on large graphs when the splits are small; noisier.

Examples:
    >>> from strata.operators.io.datasets import community_dataset
    >>> from strata.operators.trainers import ModelConfig
    >>> data = community_dataset(1000, 4, num_features=8, seed=0)
    >>> config = TrainConfig(ModelConfig("sage", hidden=16), epochs=2, device="cpu")
    >>> sampling = SamplingConfig(fanouts=(5, 5), batch_size=64)
    >>> trainer = SampledTrainer(config, sampling)
    >>> result = trainer.fit(data)
    >>> result.epochs_run, result.test_accuracy > 0.5
    (2, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.layers import BasicGNN
from strata.operators.samplers import (
    Block,
    NeighborSampler,
    SamplerConfig,
    check_fanouts,
)
from strata.operators.trainers.base import EpochStats, Trainer
from strata.operators.trainers.block_batches import BlockBatch, BlockBatches
from strata.operators.trainers.config import TrainConfig
from strata.operators.trainers.data import FEATURES, TrainingData
from strata.operators.trainers.inference import layerwise_inference
from strata.operators.trainers.metrics import SplitMetrics
from strata.operators.trainers.optim import clip_gradients
from strata.operators.trainers.prefetch import Prefetcher, epoch_order
from strata.operators.trainers.tasks import TaskBatch, TaskState
from strata.storage import CSRGraph
from strata.storage.csr import DuplicatePolicy

__all__ = ["EvalMode", "SampledTrainer", "SamplingConfig"]

#: The task batch of an evaluation batch (no loss is computed).
_NO_BATCH = TaskBatch(None, torch.empty(0))

#: Epoch number of the sampler key used by sampled evaluation (never a training
#: epoch), so evaluation draws the same neighbourhoods every time.
_EVAL_EPOCH = 1 << 40


class EvalMode(enum.Enum):
    """How the sampled trainer evaluates (see the module docstring)."""

    LAYERWISE = "layerwise"
    SAMPLED = "sampled"


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """Mini-batch settings of :class:`SampledTrainer`.

    Attributes:
        fanouts: per-layer fan-outs in layer order (``fanouts[-1]`` is the seeds'
            layer, as :class:`~strata.operators.samplers.SamplerConfig`); one per model
            layer, ``-1`` for every in-neighbour.
        batch_size: seed nodes per batch (the last batch may be smaller).
        replace: sample with replacement.
        prefetch: batches the background thread may prepare ahead (queue depth);
            0 prepares each batch in the training thread when it is needed.
        eval_mode: layer-wise full-neighbour or sampled evaluation.
        eval_batch_size: destination nodes per block during evaluation.
    """

    fanouts: tuple[int, ...] = (10, 5)
    batch_size: int = 1024
    replace: bool = False
    prefetch: int = 4
    eval_mode: EvalMode = EvalMode.LAYERWISE
    eval_batch_size: int = 4096

    def __post_init__(self) -> None:
        where = "SamplingConfig"
        object.__setattr__(self, "fanouts", tuple(int(f) for f in self.fanouts))
        SamplerConfig(self.fanouts, self.replace)  # validates the fan-outs
        try:
            object.__setattr__(self, "eval_mode", EvalMode(self.eval_mode))
        except ValueError:
            choices = [m.value for m in EvalMode]
            raise OperatorError.build(
                "eval_mode", where, f"one of {choices}", repr(self.eval_mode)
            ) from None
        for name in ("batch_size", "eval_batch_size"):
            value = getattr(self, name)
            if value < 1:
                raise OperatorError.build(name, where, f"{name} >= 1", str(value))
        if self.prefetch < 0:
            raise OperatorError.build(
                "prefetch",
                where,
                "prefetch >= 0 (0: no background thread)",
                str(self.prefetch),
            )


class Batch(NamedTuple):
    """One prepared mini-batch: blocks, input rows, the task's batch, its costs.

    ``graph`` is the union of the blocks as one subgraph (see :func:`subgraph`),
    built only for a model that is not a layer stack; a layer stack's batch is
    ``prepared`` (its ``x`` is None when the first layer's aggregate was
    computed instead of the input rows).
    """

    blocks: list[Block]
    x: torch.Tensor | None
    task: TaskBatch
    sample_s: float
    gather_s: float
    graph: CSRGraph | None = None
    prepared: BlockBatch | None = None


def subgraph(blocks: Sequence[Block]) -> CSRGraph:
    """Every sampled edge of ``blocks`` as one graph over ``blocks[0]``'s sources.

    A block's local ids index a prefix of ``blocks[0].src_global_ids`` (each
    block's sources begin with its destinations, which are the next block's
    sources), so the union is a graph on those nodes whose first ``num_dst``
    nodes of the last block are the seeds: what PyG's ``NeighborLoader`` hands a
    model with ``forward(graph, x)``.
    """
    src, dst = [], []
    for block in blocks:
        counts = np.diff(block.indptr)
        dst.append(np.repeat(np.arange(block.num_dst, dtype=np.int64), counts))
        src.append(block.indices.astype(np.int64, copy=False))
    return CSRGraph.from_edges(
        np.concatenate(src),
        np.concatenate(dst),
        blocks[0].num_src,
        duplicates=DuplicatePolicy.REMOVE,
    )


@contextlib.contextmanager
def _step_threads(device: torch.device) -> Iterator[None]:
    """On the CPU, leave one core to the prefetch thread while an epoch trains.

    The prefetcher's kernels keep one core busy; torch's OpenMP team on every
    core beside it would oversubscribe them, and a team that waits at a barrier
    for a descheduled thread stalls each product (on the shared 2-core benchmark
    machine under load, a 2-thread torch beside the prefetcher ran the RMAT-18
    SAGE epoch 1.3x slower than 1 thread with passive OpenMP waits, 15x with
    the default spinning ones).
    """
    before = torch.get_num_threads()
    if device.type != "cpu" or before < 2:
        yield
        return
    torch.set_num_threads(before - 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class SampledTrainer(Trainer):
    """Trains a GNN on sampled mini-batches, one device, prefetching in a thread.

    Args:
        config: model, optimiser, epochs, early stopping and checkpoint settings.
        sampling: fan-outs, batch size, prefetch depth and evaluation mode.
    """

    def __init__(
        self, config: TrainConfig, sampling: SamplingConfig | None = None
    ) -> None:
        super().__init__(config)
        self.sampling = sampling or SamplingConfig()
        self._next: tuple[int, Prefetcher[Batch]] | None = None

    def check(self, data: TrainingData) -> None:
        """Fail early unless there is one fan-out per layer of a layer stack."""
        if self.config.model.module is not None:
            return  # a user's module: the fan-outs give the subgraph's hops
        sampler = SamplerConfig(self.sampling.fanouts, self.sampling.replace)
        check_fanouts(sampler, self.config.model.num_layers, self.where)

    def prepare(
        self, data: TrainingData, model: nn.Module, device: torch.device
    ) -> None:
        """Build the sampler on the task's graph; keep the task's data on the CPU."""
        assert self.task_state is not None
        sampling = self.sampling
        self._task: TaskState = self.task_state
        self._data = data
        self._device = device
        self._pin = device.type == "cuda"
        self._stack = isinstance(model, BasicGNN)
        config = SamplerConfig(sampling.fanouts, sampling.replace)
        graph = self._task.graph
        self._sampler = NeighborSampler(graph, config, seed=self.config.seed)
        self._batches = BlockBatches(
            self._sampler,
            data.features,
            model,
            device,
            key=FEATURES,
            pin_memory=self._pin,
        )
        self._train_ids = self._task.train_examples()
        self._num_batches = math.ceil(len(self._train_ids) / sampling.batch_size)

    # ------------------------------------------------------------------ batches
    def _produce(self, epoch: int, order: np.ndarray, index: int) -> Batch:
        size = self.sampling.batch_size
        examples = order[index * size : (index + 1) * size]
        start = time.perf_counter()
        task = self._task.batch(examples, epoch, index)
        assert task.nodes is not None
        if self._stack:
            prepared = self._batches.prepare(task.nodes.numpy(), epoch, index)
            return Batch(
                prepared.blocks,
                prepared.x,
                task,
                prepared.sample_s,
                prepared.gather_s,
                prepared=prepared,
            )
        blocks = self._sampler.sample(task.nodes.numpy(), epoch, index)
        graph = subgraph(blocks)
        sampled = time.perf_counter()
        x = self._data.features.get(
            FEATURES, blocks[0].src_global_ids, pin_memory=self._pin
        )
        gathered = time.perf_counter()
        return Batch(blocks, x, task, sampled - start, gathered - sampled, graph)

    def _forward(self, model: nn.Module, batch: Batch, x: torch.Tensor) -> torch.Tensor:
        """The seeds' outputs: by blocks for a layer stack, else on the subgraph."""
        x = x.reshape(x.shape[0], -1)
        if batch.graph is None:
            return model(batch.blocks, x)
        return model(batch.graph, x)[: batch.blocks[-1].num_dst]

    def _prefetcher(self, epoch: int) -> Prefetcher[Batch]:
        order = epoch_order(self._train_ids, self.config.seed, epoch)

        def produce(index: int) -> Batch:
            return self._produce(epoch, order, index)

        depth = self.sampling.prefetch
        return Prefetcher(produce, self._num_batches, depth, f"prefetch-e{epoch}")

    def train_epoch(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int
    ) -> EpochStats:
        """One pass over the shuffled training examples, one step per batch."""
        if self._next is not None and self._next[0] == epoch:
            prefetcher = self._next[1]
        else:
            prefetcher = self._prefetcher(epoch)
        self._next = None
        model.train()
        device = self._device
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        seeds = sample_s = gather_s = 0.0
        with prefetcher, _step_threads(device):
            for index, batch in enumerate(prefetcher):
                if index == self._num_batches - 1 and epoch + 1 < self.config.epochs:
                    self._next = (epoch + 1, self._prefetcher(epoch + 1).start())
                task = self._to_device(batch.task)
                optimizer.zero_grad(set_to_none=True)
                if batch.prepared is not None:
                    out = self._batches.forward(model, batch.prepared)
                else:
                    assert batch.x is not None
                    x = batch.x.to(device, torch.float32, non_blocking=self._pin)
                    out = self._forward(model, batch, x)
                loss = self._task.loss(out, task)
                loss.backward()
                clip_gradients(model.parameters(), self.config.clip_grad_norm)
                optimizer.step()
                loss_sum += loss.detach().double() * task.size
                seeds += task.size
                sample_s += batch.sample_s
                gather_s += batch.gather_s
        return EpochStats(
            loss=(loss_sum / max(seeds, 1)).item(),
            seeds=int(seeds),
            batches=self._num_batches,
            sample_s=sample_s,
            gather_s=gather_s,
            stall_s=prefetcher.stall_s,
        )

    def _to_device(self, task: TaskBatch) -> TaskBatch:
        pin, device = self._pin, self._device
        target = task.target.to(device, non_blocking=pin)
        pairs = None if task.pairs is None else task.pairs.to(device)
        return dataclasses.replace(task, target=target, pairs=pairs)

    # --------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(
        self, model: nn.Module, splits: tuple[str, ...]
    ) -> Mapping[str, SplitMetrics]:
        """Metrics on each split, by layer-wise or sampled inference.

        A model that is not a layer stack is evaluated by one full-graph forward
        pass in ``LAYERWISE`` mode.
        """
        model.eval()
        data = self._data
        graph = self._task.graph
        if self.sampling.eval_mode is EvalMode.SAMPLED:
            return {split: self._sampled_metrics(model, split) for split in splits}
        if self._stack:
            out = layerwise_inference(
                model,  # type: ignore[arg-type]
                graph,
                data.features,
                FEATURES,
                batch_size=self.sampling.eval_batch_size,
                device=self._device,
            )
        else:
            x = data.features.get(FEATURES).to(self._device, torch.float32)
            out = model(graph, x.reshape(x.shape[0], -1)).cpu()
        return {split: self._task.metrics(out, split) for split in splits}

    def _sampled_metrics(self, model: nn.Module, split: str) -> SplitMetrics:
        ids = self._task.eval_nodes(split).numpy()
        size = self.sampling.eval_batch_size
        out: torch.Tensor | None = None
        for index, start in enumerate(range(0, len(ids), size)):
            seeds = ids[start : start + size]
            blocks = self._sampler.sample(seeds, _EVAL_EPOCH, index)
            x = self._data.features.get(FEATURES, blocks[0].src_global_ids)
            x = x.to(self._device, torch.float32)
            graph = None if self._stack else subgraph(blocks)
            rows = self._forward(model, Batch(blocks, x, _NO_BATCH, 0, 0, graph), x)
            if out is None:
                out = torch.zeros(self._task.graph.num_nodes, rows.shape[1])
            out[torch.from_numpy(seeds)] = rows.cpu()
        if out is None:
            out = torch.zeros(self._task.graph.num_nodes, 1)
        return self._task.metrics(out, split)

    def release(self) -> None:
        """Stop a prefetcher started for an epoch that will not run."""
        if self._next is not None:
            self._next[1].close()
            self._next = None

    def __repr__(self) -> str:
        model, sampling = self.config.model, self.sampling
        return (
            f"SampledTrainer({model.name}, hidden={model.hidden}, "
            f"fanouts={list(sampling.fanouts)}, batch_size={sampling.batch_size})"
        )
