"""Streaming graph updates and incremental GNN inference (D3-GNN, d3gnn.md).

Users stream edge and feature updates into a running job; every node's GNN
embedding stays equal to a full forward pass over the current graph without
recomputing the graph:

* ingestion: :class:`ZmqIngest` (a pyzmq source that validates update batches,
  appends them to the :class:`strata.storage.UpdateLog`, then acknowledges them; its
  endpoint alone is :class:`IngestServer`), :class:`IngestClient` (what
  ``strata ingest ENDPOINT FILE`` uses, with :func:`read_update_file`), and
  :class:`LogSource` (replay / follow the log);
* incremental layers: :class:`StreamingLayer` keeps per-node aggregator state
  (:mod:`strata.operators.streaming.aggregators`: sum, mean, max with deletions) exact
  under edge and input changes, for GraphSAGE (mean, sum, max) and GCN
  (:class:`StreamingModel` takes a trained batch model apart);
* windows (:class:`Count`, :class:`Tumbling`, :class:`Session`, :class:`Adaptive`,
  each with ``max_latency_ms`` / ``max_pending``; :func:`parse_window`) batch
  updates per layer and node;
* :func:`streaming_gnn` builds one pipeline step per layer (keyed shards on the
  ``process`` executor); :class:`EmbeddingSink` keeps the current embeddings;
* :class:`StreamingGNN` chains the layers in-process; :func:`full_recompute` and
  :class:`AffectedRecompute` are the oracle and the DGL-style baseline.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph, edge_updates
    >>> from strata.operators.layers import GraphSAGE
    >>> _ = torch.manual_seed(0)
    >>> sage = GraphSAGE(4, 8, 2, num_layers=2)
    >>> gnn = StreamingGNN(StreamingModel.from_module(sage))
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]), num_nodes=3)
    >>> gnn.initialize(g, np.ones((3, 4), np.float32))
    >>> _ = gnn.apply_updates(edge_updates([2], [0], event_time=0))
    >>> gnn.embeddings(np.array([0])).shape
    (1, 2)
"""

from strata.operators.streaming.aggregators import (
    AggState,
    Contribution,
    MaxAggregator,
    MeanAggregator,
    SumAggregator,
)
from strata.operators.streaming.cascade import StreamingGNN
from strata.operators.streaming.client import IngestClient, IngestReport
from strata.operators.streaming.delta import LayerDelta
from strata.operators.streaming.generate import UpdateStream
from strata.operators.streaming.gnn import FanOut, LayerStep, streaming_gnn
from strata.operators.streaming.ingest import IngestServer, ZmqIngest
from strata.operators.streaming.items import Placement, route_key
from strata.operators.streaming.layer import StreamingLayer
from strata.operators.streaming.log_source import LogSource
from strata.operators.streaming.model import StreamingModel
from strata.operators.streaming.reference import AffectedRecompute, full_recompute
from strata.operators.streaming.rules import LayerRule
from strata.operators.streaming.setup import InitData, Setup, StaticSetup, init_item
from strata.operators.streaming.sinks import EmbeddingSink, summarize_stream
from strata.operators.streaming.update_files import (
    read_update_file,
    update_batches,
    write_update_file,
)
from strata.operators.streaming.windows import (
    Adaptive,
    Count,
    Immediate,
    Session,
    Tumbling,
    Window,
    WindowBuffer,
    parse_window,
)

__all__ = [
    "Adaptive",
    "AffectedRecompute",
    "AggState",
    "Contribution",
    "Count",
    "EmbeddingSink",
    "FanOut",
    "Immediate",
    "IngestClient",
    "IngestReport",
    "IngestServer",
    "InitData",
    "LayerDelta",
    "LayerRule",
    "LayerStep",
    "LogSource",
    "MaxAggregator",
    "MeanAggregator",
    "Placement",
    "Session",
    "Setup",
    "StaticSetup",
    "StreamingGNN",
    "StreamingLayer",
    "StreamingModel",
    "SumAggregator",
    "Tumbling",
    "UpdateStream",
    "Window",
    "WindowBuffer",
    "ZmqIngest",
    "full_recompute",
    "init_item",
    "parse_window",
    "read_update_file",
    "route_key",
    "streaming_gnn",
    "summarize_stream",
    "update_batches",
    "write_update_file",
]
