"""streaming_gnn: one pipeline step per model layer, each windowed and shardable.

:func:`streaming_gnn` adds the steps of incremental inference to a pipeline::

    source -> [gnn_fanout] -> gnn_layer1 -> gnn_layer2 -> ... -> (your sink)

Each ``gnn_layer{l}`` is a :class:`LayerStep`: a
:class:`~strata.operators.streaming.layer.StreamingLayer` behind a
:class:`~strata.operators.streaming.windows.WindowBuffer`. Layer 1 takes ``updates``
items (cutting batches at ``Count``/``Tumbling`` boundaries, so flush points depend only
on log offsets); every layer turns a flush into a ``delta`` item for the next layer (the
applied topology diff plus new outputs of its live dirty vertices), so one update
cascades through the layers. ``tick`` items drive the windows' latency caps.

With ``shards=k`` every layer runs as ``k`` keyed copies on the ``process`` executor.
Shard ``s`` owns the vertices hash placement gives it
(:class:`~strata.operators.streaming.items.Placement`); every shard applies every change
to its topology and inputs (they are small next to the aggregation work), but only
aggregates, re-reads and emits its own vertices, and each layer broadcasts its deltas to
every shard of the next. A ``gnn_fanout`` step copies the source's items to the shards
of layer 1 (a step, not the source, so that a checkpoint barrier never falls between the
copies of one item).

Every :class:`LayerStep` is ``Stateful``: its snapshot holds the layer arrays, the
topology (``DynamicGraph.state``), the window buffer and the model.

Examples:
    >>> import numpy as np, torch
    >>> from strata.engine import Pipeline
    >>> from strata.engine.testing import ListSink, ListSource, run
    >>> from strata.storage import CSRGraph, edge_updates
    >>> from strata.operators.layers import GraphSAGE
    >>> from strata.operators.streaming.setup import StaticSetup, init_item
    >>> _ = torch.manual_seed(0)
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]), num_nodes=3)
    >>> setup = StaticSetup(g, np.ones((3, 4), np.float32),
    ...                     StreamingModel.from_module(GraphSAGE(4, 8, 2)))
    >>> items = [init_item(setup.load()),
    ...          {"kind": "updates", "batch": edge_updates([2], [0], event_time=0),
    ...           "offset": 0, "arrival_ms": 0}]
    >>> p = Pipeline("gnn")
    >>> _ = p.step("source", ListSource(items))
    >>> last = streaming_gnn(p, "gnn", "source", num_layers=2)
    >>> _ = p.step("out", ListSink(), last)
    >>> kinds = [item["kind"] for item in run(p)["out"]]
    >>> kinds
    ['init', 'delta']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from strata.engine.operator import Operator, StepContext
from strata.engine.pipeline import Pipeline
from strata.operators.errors import OperatorError
from strata.operators.streaming.delta import LayerDelta
from strata.operators.streaming.items import (
    DELTA,
    INIT,
    TICK,
    UPDATES,
    Placement,
    fan_out,
    route_key,
)
from strata.operators.streaming.layer import StreamingLayer
from strata.operators.streaming.model import StreamingModel
from strata.operators.streaming.setup import graph_of
from strata.operators.streaming.windows import Immediate, Window, WindowBuffer, wall_ms

Item = dict[str, Any]


class FanOut(Operator[Item, Item]):
    """Copies every item to each of ``shards`` shards of the next step."""

    def __init__(self, shards: int) -> None:
        self.shards = shards

    def open(self, ctx: StepContext) -> None:
        """Nothing to prepare."""

    def process(self, item: Item) -> Iterable[Item]:
        """Return one routed copy per shard."""
        return fan_out(item, self.shards)


class LayerStep(Operator[Item, Item]):
    """Layer ``layer`` (0-based) of a streaming model, as a pipeline step.

    Args:
        layer: Which layer of the model (from the ``init`` item) this step runs.
        window: When to flush (default :class:`Immediate`).
        out_shards: Shards of the next step (deltas are copied to each).
        dtype: dtype of stored inputs and emitted outputs.
        placement_seed: Seed of the hash placement of vertices on shards.
    """

    def __init__(
        self,
        layer: int,
        window: Window | None = None,
        *,
        out_shards: int = 1,
        dtype: str = "float32",
        placement_seed: int = 0,
    ) -> None:
        self.layer_index = layer
        self.window = window or Immediate()
        self.out_shards = out_shards
        self.dtype = dtype
        self.placement_seed = placement_seed
        self.layer: StreamingLayer | None = None
        self.model: StreamingModel | None = None
        self.event_ms = 0

    def open(self, ctx: StepContext) -> None:
        """Create the window buffer; the layer itself starts at the ``init`` item."""
        self.ctx = ctx
        self.buffer = WindowBuffer(self.window)

    def _make_layer(self, model: StreamingModel) -> StreamingLayer:
        if self.layer_index >= model.num_layers:
            raise OperatorError.build(
                "layer",
                self.ctx.step_id,
                f"a layer index below {model.num_layers} (the model's layers)",
                str(self.layer_index),
            )
        self.model = model
        return StreamingLayer(
            model.rules[self.layer_index],
            last=self.layer_index == model.num_layers - 1,
            act=model.act,
            dtype=np.dtype(self.dtype),
            placement=Placement(self.ctx.shards, self.placement_seed),
            shard=self.ctx.shard,
        )

    # ------------------------------------------------------------------ items
    def process(self, item: Item) -> Iterator[Item]:
        """Handle one ``init``, ``updates``, ``delta`` or ``tick`` item."""
        kind = item["kind"]
        if kind == INIT:
            yield from self._init(item)
            return
        if self.layer is None:
            raise OperatorError.build(
                "item", self.ctx.step_id, "an init item first", f"a {kind!r} item"
            )
        if kind == UPDATES:
            yield from self._updates(item["batch"], int(item["offset"]), item)
        elif kind == DELTA:
            self.event_ms = max(self.event_ms, int(item.get("event_ms", 0)))
            delta = LayerDelta.from_wire(item["delta"])
            yield from self._flush(self.buffer.offer(delta, self.event_ms))
        elif kind == TICK:
            # A live source stamps event times from the wall clock, so its tick
            # also advances event time: idle sessions close without new events.
            self.event_ms = max(self.event_ms, int(item["now_ms"]))
            yield from self._flush(self.buffer.poll(self.event_ms))
            yield from fan_out(item, self.out_shards)

    def finish(self) -> Iterator[Item]:
        """Flush what is buffered."""
        if self.layer is not None and not self.buffer.empty:
            yield from self._flush([self.buffer.drain()])

    def _init(self, item: Item) -> Iterator[Item]:
        if self.layer is not None:  # restored from a checkpoint: already initialised
            return
        model = StreamingModel.from_arrays(item["model"])
        self.layer = self._make_layer(model)
        self.layer.initialize(graph_of(item), np.asarray(item["f"]), item["live"])
        # Every shard starts the next step: items of one channel arrive in order, so
        # a receiver sees an init (identical from every shard) before any delta,
        # whichever channel speaks first; it keeps the first and drops the others.
        n = self.layer.num_nodes
        nxt = {
            **item,
            "f": self.layer.outputs(np.arange(n)),
            "live": self.layer.live[:n],
        }
        nxt.pop("route", None)
        yield from fan_out(nxt, self.out_shards)

    def _updates(
        self, batch: pa.RecordBatch, offset: int, item: Item
    ) -> Iterator[Item]:
        times = batch.column("event_time").to_numpy(zero_copy_only=False)
        cuts = self.buffer.cut_points(batch.num_rows, offset, times)
        start = 0
        for end in [*cuts, batch.num_rows]:
            if end <= start:
                continue
            piece = batch.slice(start, end - start)
            delta = LayerDelta.from_updates(
                piece,
                first_offset=offset + start if offset >= 0 else -1,
                arrival_ms=int(item.get("arrival_ms", -1)),
            )
            self.event_ms = max(self.event_ms, int(times[start:end].max()))
            closing = end in cuts
            yield from self._flush(
                self.buffer.offer(delta, self.event_ms, close=closing)
            )
            start = end

    def _flush(self, deltas: list[LayerDelta]) -> Iterator[Item]:
        assert self.layer is not None
        for delta in deltas:
            before = dict(self.layer.stats)
            out = self.layer.apply(delta)
            for name, value in self.layer.stats.items():
                self.ctx.metrics.counter(name).inc(value - before[name])
            self.ctx.metrics.counter("updates").inc(delta.updates)
            if self.ctx.shard != 0:  # bookkeeping travels through shard 0 only
                out = LayerDelta(
                    src=out.src,
                    dst=out.dst,
                    count=out.count,
                    nodes=out.nodes,
                    values=out.values,
                    num_nodes=out.num_nodes,
                )
            item = {"kind": DELTA, "delta": out.to_wire(), "event_ms": self.event_ms}
            yield from fan_out(item, self.out_shards)

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """Layer arrays, topology, window buffer and model."""
        if self.layer is None or self.model is None:
            return {"initialized": False}
        return {
            "initialized": True,
            "model": self.model.to_arrays(),
            "layer": self.layer.snapshot(),
            "window": self.buffer.state(),
            "event_ms": self.event_ms,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`snapshot` (called after :meth:`open`)."""
        if not state["initialized"]:
            return
        self.layer = self._make_layer(StreamingModel.from_arrays(state["model"]))
        self.layer.restore(state["layer"])
        self.buffer.restore(state["window"])
        self.event_ms = int(state["event_ms"])

    def stats(self) -> dict[str, int]:
        """The layer's counters (flushes, aggregator rows, rows and pairs sent)."""
        return {} if self.layer is None else dict(self.layer.stats)

    def __repr__(self) -> str:
        return f"LayerStep(layer={self.layer_index}, window={self.window})"


def streaming_gnn(
    pipeline: Pipeline,
    step_id: str,
    source: str,
    *,
    num_layers: int,
    window: Window | None = None,
    layer_windows: tuple[Window, ...] | None = None,
    shards: int = 1,
    dtype: str = "float32",
) -> str:
    """Add the per-layer steps of incremental inference; return the last step's id.

    Args:
        pipeline: The pipeline to add to.
        step_id: Prefix of the step ids (``{step_id}_layer1``, ...).
        source: The step emitting ``init`` then ``updates`` items.
        num_layers: Layers of the model the source's ``init`` item carries.
        window: Layer 1's window (default :class:`Immediate`); later layers flush
            every record they receive unless ``layer_windows`` says otherwise.
        layer_windows: One window per layer (overrides ``window``).
        shards: Keyed copies of every layer (``process`` executor).
        dtype: dtype of inputs and embeddings between layers.

    Returns:
        The id of the last layer step; its items are ``init`` (every embedding at
        the start) and ``delta`` (changed embeddings) dicts.
    """
    if layer_windows is None:
        layer_windows = (window or Immediate(),) + (Immediate(),) * (num_layers - 1)
    if len(layer_windows) != num_layers:
        raise OperatorError.build(
            "layer_windows",
            step_id,
            f"{num_layers} windows (one per layer)",
            str(len(layer_windows)),
        )
    previous = source
    keyed: dict[str, Any] = {"shards": shards, "key": route_key} if shards > 1 else {}
    if shards > 1:
        previous = f"{step_id}_fanout"
        pipeline.step(previous, FanOut(shards), source)
    for layer, layer_window in enumerate(layer_windows):
        out_shards = shards if layer < num_layers - 1 else 1
        step = LayerStep(layer, layer_window, out_shards=out_shards, dtype=dtype)
        current = f"{step_id}_layer{layer + 1}"
        pipeline.step(current, step, previous, **keyed)
        previous = current
    return previous


def now_item() -> Item:
    """A ``tick`` item for the current wall clock."""
    return {"kind": TICK, "now_ms": wall_ms()}
