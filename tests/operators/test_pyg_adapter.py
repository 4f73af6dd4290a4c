"""A PyG model (forward(x, edge_index)) trains through PyGAdapter."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.io.datasets import community_dataset, load_dataset
from strata.operators.layers import pyg_adapter
from strata.operators.layers.pyg_adapter import PyGAdapter, edge_index, pyg_module
from strata.operators.trainers import (
    DecayScope,
    FullGraphTrainer,
    ModelConfig,
    SampledTrainer,
    SamplingConfig,
    TrainConfig,
)
from strata.operators.trainers.optim import first_layer
from strata.storage import CSRGraph

pyg_nn = pytest.importorskip("torch_geometric.nn")

FAST = {"device": "cpu", "threads": 1}


class PyGNet(nn.Module):
    """PyG's gcn.py model: two GCNConv layers, dropout 0.5."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = pyg_nn.GCNConv(in_channels, 16)
        self.conv2 = pyg_nn.GCNConv(16, out_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, 0.5, self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, 0.5, self.training)
        return self.conv2(x, edge_index)


def test_doctests() -> None:
    result = doctest.testmod(pyg_adapter, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_the_adapter_equals_the_pyg_model_on_its_edge_index() -> None:
    # 0 ──▶ 1 ──▶ 2      TINY: 5 nodes, 5 edges, every in-degree 1
    # ▲     │
    # │     ▼
    # 3 ◀── 4
    src, dst = np.array([0, 1, 1, 4, 3]), np.array([1, 2, 4, 3, 0])
    graph = CSRGraph.from_edges(src, dst)
    index = edge_index(graph)
    assert sorted(zip(*index.tolist(), strict=True)) == sorted(
        zip(src.tolist(), dst.tolist(), strict=True)
    )
    torch.manual_seed(0)
    model = PyGNet(3, 2).eval()
    x = torch.randn(5, 3)
    want = model(x, torch.from_numpy(np.stack([src, dst])))
    assert torch.allclose(PyGAdapter(model)(graph, x), want, atol=1e-6)
    assert first_layer(PyGAdapter(model)) is model.conv1


@pytest.mark.parametrize("sampled", [False, True])
def test_a_pyg_model_trains_full_graph_and_sampled(sampled: bool) -> None:
    data = community_dataset(600, 4, num_features=8, seed=0)
    config = TrainConfig(
        ModelConfig("pyg", module=pyg_module(PyGNet)), epochs=60, **FAST
    )
    trainer = (
        SampledTrainer(config, SamplingConfig(fanouts=(-1, -1), batch_size=128))
        if sampled
        else FullGraphTrainer(config)
    )
    assert trainer.fit(data).test_accuracy > 0.75


@pytest.mark.slow
def test_pyg_gcnconv_through_the_adapter_reaches_cora_accuracy() -> None:
    data = load_dataset("planetoid:cora", normalize_features=True)
    config = TrainConfig(
        ModelConfig("pyg-gcn", module=pyg_module(PyGNet)),
        decay_scope=DecayScope.FIRST,  # PyG's gcn.py: decay on conv1 only
        epochs=200,
        patience=10,
        **FAST,
    )
    trainer = FullGraphTrainer(config)
    result = trainer.fit(data)
    assert result.test_accuracy >= 0.80
    predictions = trainer.predict(data)
    ids = torch.from_numpy(np.flatnonzero(data["node"]["test_mask"]))
    labels = torch.from_numpy(np.asarray(data["node"]["y"]))
    accuracy = (predictions[ids] == labels[ids]).double().mean().item()
    assert accuracy == pytest.approx(result.test_accuracy)


def test_the_readme_example_runs() -> None:
    """README "Your model, your task": a PyG model, a user's loss, AdamW, cosine."""
    readme = Path(__file__).resolve().parents[2] / "README.md"
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.DOTALL)
    (code,) = [b for b in blocks if "pyg_module(" in b]
    assert "epochs=100" in code
    scope: dict[str, object] = {"__name__": "readme_pyg"}
    exec(compile(code.replace("epochs=100", "epochs=3"), "README.md", "exec"), scope)
    result = scope["result"]
    assert result.epochs_run == 3  # type: ignore[attr-defined]
