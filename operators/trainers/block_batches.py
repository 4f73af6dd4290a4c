"""Sampled mini-batches for a layer stack, built off the training thread.

:class:`BlockBatches` turns a batch of seeds into what one training step of a
:class:`~strata.operators.layers.BasicGNN` needs, and does all of it in the thread
that calls :meth:`BlockBatches.prepare` (the trainer's prefetch thread):

1. sample the blocks (:class:`~strata.operators.samplers.NeighborSampler`);
2. **the first layer's aggregation, fused with sampling and the gather.** The first
   layer aggregates raw input features, which carry no gradient and no parameter:
   when its messages are the features themselves and its aggregation is a plain
   mean or sum, its in-edges are sampled in global ids
   (:meth:`~strata.operators.samplers.NeighborSampler.sample_hop`, the same draws)
   and ``agg[i] = mean_{j -> i} x_j`` and the root rows ``x_i`` are computed
   straight from the feature table
   (:func:`~strata.operators.kernels.gather_aggregate.gather_aggregate`). Neither
   the first block's local numbering nor the ``[num_src, F]`` input gather (17.8k
   rows per RMAT-18 batch) is built, and the step starts at the layer's dense part
   (``layer.finish(agg, x_root)``), whose backward needs no aggregation either;
3. **block structures built once, off the step.** Every later block's
   :class:`~strata.operators.kernels.DeviceGraph` is built on the training device
   with what its layer reads: the aggregation's coefficients and the transposed
   CSR its backward pass uses.

On the CPU, :meth:`BlockBatches.forward` runs the layers' dense products on oneDNN
(:func:`~strata.operators.kernels.onednn_linear.dense_on_onednn`; 1.6 to 2.4 times
MKL's speed on AMD CPUs, where MKL takes its AVX2 path).

Otherwise (input dropout, a max or attention first layer, a store that is not in
memory) the batch carries the gathered input rows and the step runs the model as
usual. Either way the step computes the same function of the same parameters: the
fused path changes where, not what (losses agree to float rounding; see
``tests/operators/test_block_batches.py``).

Examples:
    >>> import numpy as np, torch
    >>> from strata.operators.layers import GraphSAGE
    >>> from strata.operators.samplers import NeighborSampler, SamplerConfig
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))
    >>> model = GraphSAGE(8, 16, 3)
    >>> sampler = NeighborSampler(g, SamplerConfig((5, 5)), seed=0)
    >>> batches = BlockBatches(sampler, torch.randn(4, 8), model)
    >>> batch = batches.prepare(np.array([0, 2]), epoch=0, index=0)
    >>> batches.fused, batches.forward(model, batch).shape
    (True, torch.Size([2, 3]))
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.kernels.device_graph import as_device_graph
from strata.operators.kernels.gather_aggregate import gather_aggregate
from strata.operators.kernels.onednn_linear import dense_on_onednn, onednn_available
from strata.operators.layers import BasicGNN, MessagePassing
from strata.operators.layers.message_passing import Mean, Sum
from strata.operators.samplers import Block, Hop, NeighborSampler
from strata.storage import FeatureStore, InMemoryFeatureStore, Key
from strata.storage.features.gather import alloc_rows

__all__ = ["BlockBatch", "BlockBatches", "fusable_first_layer"]

#: The trainers' feature key (``strata.operators.trainers.data.FEATURES``).
_FEATURES = Key("node", "x")


@dataclass(frozen=True, slots=True, eq=False)
class BlockBatch:
    """One prepared batch of a layer stack.

    Attributes:
        blocks: the blocks of the layers the step runs, in layer order: every
            layer's, or, when fused, every layer's but the first (whose
            aggregate stands for its block).
        x: the input rows of ``blocks[0]``'s sources, or None when fused.
        agg: the first layer's aggregate of its inputs (fused), else None.
        root: the first layer's destination rows (fused, with a root term).
        sample_s: seconds spent sampling.
        gather_s: seconds spent gathering (and, fused, aggregating) inputs.
    """

    blocks: list[Block]
    x: torch.Tensor | None
    agg: torch.Tensor | None = None
    root: torch.Tensor | None = None
    sample_s: float = 0.0
    gather_s: float = 0.0

    @property
    def fused(self) -> bool:
        """Whether the first layer's aggregation was computed ahead."""
        return self.agg is not None


def fusable_first_layer(model: nn.Module) -> MessagePassing | None:
    """The first layer, if its input aggregation can be computed from the table.

    That holds for a :class:`~strata.operators.layers.BasicGNN` without input
    dropout (a dropout mask would have to be drawn per gathered row), whose
    ``forward`` is the stack's own, and whose first layer sends its input
    features unchanged (:attr:`MessagePassing.sends_features`) through a plain
    :class:`Mean` or :class:`Sum` (no per-edge coefficients).
    """
    if not isinstance(model, BasicGNN) or model.dropout != 0.0:
        return None
    if type(model).forward is not BasicGNN.forward:
        return None
    first = model.convs[0]
    if not isinstance(first, MessagePassing) or not first.sends_features:
        return None
    if type(first.aggregation) not in (Mean, Sum):
        return None
    return first


class BlockBatches:
    """Prepares sampled batches of a layer stack (see the module docs).

    Args:
        sampler: samples the blocks of a batch of seeds.
        features: the node features: a store (read under ``key``), or one
            ``[num_nodes, ...]`` tensor or array.
        model: the model the batches feed (it decides whether to fuse).
        device: the training device.
        key: the feature key in a store.
        pin_memory: gather into pinned memory (for CUDA).
        onednn: run the forward's ``F.linear`` calls on oneDNN (None: on the
            CPU when torch has it).

    :meth:`prepare` is safe to call from a background thread: it releases the
    GIL in its kernels and touches no model parameter.
    """

    def __init__(
        self,
        sampler: NeighborSampler,
        features: FeatureStore | torch.Tensor | np.ndarray,
        model: nn.Module,
        device: torch.device | str = "cpu",
        *,
        key: Key = _FEATURES,
        pin_memory: bool = False,
        onednn: bool | None = None,
    ) -> None:
        self.sampler = sampler
        self.device = torch.device(device)
        if onednn is None:
            onednn = self.device.type == "cpu" and onednn_available()
        self.onednn = onednn
        self.key = key
        self.pin_memory = pin_memory
        self._features = features
        self._layers: list[nn.Module] = (
            list(model.convs) if isinstance(model, BasicGNN) else []
        )
        self._first = fusable_first_layer(model)
        self._table = self._float_table(features) if self._first is not None else None

    @property
    def fused(self) -> bool:
        """Whether batches carry the first layer's aggregate instead of inputs."""
        return self._table is not None

    def _float_table(
        self, features: FeatureStore | torch.Tensor | np.ndarray
    ) -> np.ndarray | None:
        """The whole feature table as float32 ``[N, F]`` numpy, when in memory."""
        if isinstance(features, FeatureStore):
            if not isinstance(features, InMemoryFeatureStore):
                return None  # on disk: gather rows through the store's own reads
            features = features.get(self.key)
        array = (
            features.detach().numpy()
            if isinstance(features, torch.Tensor)
            else np.asarray(features)
        )
        if array.dtype != np.float32 or not array.flags.c_contiguous:
            return None
        return array.reshape(array.shape[0], -1)

    def prepare(self, seeds: np.ndarray, epoch: int, index: int) -> BlockBatch:
        """Sample, gather or aggregate, and build the block structures of a batch.

        Args:
            seeds: distinct global ids of the batch's output nodes.
            epoch: epoch number (sampler key).
            index: the batch's position in its epoch (sampler key).
        """
        start = time.perf_counter()
        if self._table is None:
            blocks = self.sampler.sample(seeds, epoch, index)
            sampled = time.perf_counter()
            x = self._gather(blocks[0].src_global_ids)
            self._build_structures(blocks, self._layers)
            return BlockBatch(
                blocks,
                x,
                sample_s=sampled - start,
                gather_s=time.perf_counter() - sampled,
            )
        hop, blocks = self.sampler.sample_hop(seeds, epoch, index)
        sampled = time.perf_counter()
        agg, root = self._aggregate(hop)
        self._build_structures(blocks, self._layers[1:])
        return BlockBatch(
            blocks,
            None,
            agg,
            root,
            sample_s=sampled - start,
            gather_s=time.perf_counter() - sampled,
        )

    def _gather(self, ids: np.ndarray) -> torch.Tensor:
        features = self._features
        if isinstance(features, FeatureStore):
            return features.get(self.key, ids, pin_memory=self.pin_memory)
        table = torch.as_tensor(features)
        return table.index_select(0, torch.from_numpy(ids))

    def _aggregate(self, hop: Hop) -> tuple[torch.Tensor, torch.Tensor | None]:
        assert self._table is not None
        assert self._first is not None
        width = self._table.shape[1]
        with_root = self._first.uses_root
        agg = alloc_rows(hop.num_dst, (width,), np.float32, pin_memory=self.pin_memory)
        rows = hop.num_dst if with_root else 0
        root = alloc_rows(rows, (width,), np.float32, pin_memory=self.pin_memory)
        gather_aggregate(
            self._table,
            hop.indptr,
            hop.sources,
            hop.dst_global_ids,
            mean=isinstance(self._first.aggregation, Mean),
            with_root=with_root,
            out=(agg.numpy(), root.numpy()),
        )
        return agg, root if with_root else None

    def _build_structures(self, blocks: list[Block], layers: list[nn.Module]) -> None:
        """Build the blocks' device graphs, coefficients and transposes."""
        for block, layer in zip(blocks, layers, strict=False):
            graph = as_device_graph(block, self.device)
            aggregation = getattr(layer, "aggregation", None)
            if aggregation is not None:
                aggregation.propagate(graph).graph.transpose()

    def forward(self, model: nn.Module, batch: BlockBatch) -> torch.Tensor:
        """The seeds' outputs of ``model`` on ``batch`` (the stack's own maths).

        Fused, this is :meth:`BasicGNN.forward` from the first layer's aggregate:
        ``finish(agg, x_root)``, then activation and the remaining layers on
        their blocks.
        """
        with dense_on_onednn() if self.onednn else contextlib.nullcontext():
            return self._forward(model, batch)

    def _forward(self, model: nn.Module, batch: BlockBatch) -> torch.Tensor:
        if batch.agg is None:
            assert batch.x is not None
            x = batch.x.to(self.device, torch.float32, non_blocking=self.pin_memory)
            out: torch.Tensor = model(batch.blocks, x.reshape(x.shape[0], -1))
            return out
        assert isinstance(model, BasicGNN)
        assert self._first is model.convs[0]
        agg = batch.agg.to(self.device, non_blocking=self.pin_memory)
        root = batch.root
        if root is not None:
            root = root.to(self.device, non_blocking=self.pin_memory)
        h = self._first.finish(agg, root)
        for conv, block in zip(model.convs[1:], batch.blocks, strict=True):
            h = F.relu(h, inplace=True) if model.act is F.relu else model.act(h)
            h = conv(block, h)
        return h
