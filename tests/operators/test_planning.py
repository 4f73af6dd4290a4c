"""The planner: operation counts, the memory budget, plan=auto, ``strata plan``.

No timing here: the calibration is a fixed, hand-written one (written into a
temporary cache so the CLI finds it), and the counts are checked against what
the layers actually execute: every SpMM the kernels run (counted at the kernel
primitive) and every dense multiply-add torch dispatches outside it.
"""

import contextlib
import importlib
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from strata.engine.executors import execute
from strata.engine.job import job_config, load_job
from strata.operators.cli.main import main
from strata.operators.errors import OperatorError
from strata.operators.kernels import as_device_graph
from strata.operators.layers import MessagePassing
from strata.operators.layers.message_passing import Mean, Sum
from strata.operators.planning import (
    Candidate,
    JobKind,
    LayerSizes,
    PlanKind,
    PlannerConfig,
    Prediction,
    epoch_counts,
    layer_counts,
    plan_training,
)
from strata.operators.planning.calibration import (
    Calibration,
    GangRates,
    KernelRates,
    load_calibration,
    machine_key,
)
from strata.operators.planning.planner import choose
from strata.operators.planning.shapes import model_shape
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.dropout import counter_dropout
from strata.storage import CSRGraph, load_planetoid

JOBS = Path(__file__).resolve().parents[2] / "jobs"
# the module, not the function of the same name the package re-exports
spmm_module = importlib.import_module("strata.operators.kernels.spmm")

RATES = KernelRates(
    spmm_fwd={8: 2e-9, 128: 3e-8},
    spmm_bwd={8: 3e-9, 128: 4e-8},
    spmm_small_fwd={8: 1e-9, 128: 1e-8},
    spmm_small_bwd={8: 1e-9, 128: 1e-8},
    linear_fwd={"16x8": 1e-10, "128x8": 4e-11, "128x128": 2e-11, "1024x16": 2e-11},
    linear_bwd={"16x8": 1e-10, "128x8": 4e-11, "128x128": 2e-11, "1024x16": 2e-11},
    dropout=2e-10,
    elementwise=2e-10,
    gather=1e-10,
    sample=1e-8,
    fresh=2e-11,
)


def fake_calibration() -> Calibration:
    """Fixed rates; a slow gang, so one process wins on this machine."""
    return Calibration(
        key=machine_key(),
        cores=2,
        rates={1: RATES, 2: RATES},
        epoch_fixed_s={1: 1e-3, 2: 1e-3},
        eval_fixed_s={1: 5e-4, 2: 5e-4},
        base_rss_bytes=300 << 20,
        gang=GangRates(
            latency_s=0.5,
            per_byte_s=1e-9,
            worker_rss_bytes=400 << 20,
            epoch_fixed_s=0.5,
            eval_fixed_s=0.5,
            moved_s=1e-8,
            moved_eval_s=1e-8,
        ),
    )


@pytest.fixture
def cached_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Calibration:
    """The fake calibration, in a temporary cache the planner reads."""
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    cal = fake_calibration()
    path = tmp_path / "cache" / "calibration.json"
    path.parent.mkdir()
    path.write_text(json.dumps({cal.key: cal.to_dict()}))
    assert load_calibration() == cal  # read back, not measured
    return cal


# ----------------------------------------------------------- operation counts
def small_graph(n: int = 60, e: int = 400, seed: int = 0) -> CSRGraph:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    return CSRGraph.from_edges(src, dst, num_nodes=n)


class KernelCount(TorchDispatchMode):
    # counting starts when the mode is entered (the second epoch)
    """Counts (edge x feature) products of every SpMM the kernels run, and the
    multiply-adds of every dense product outside them (a kernel may run a
    small graph's SpMM as a dense product: that is SpMM work)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()
        self.forward = self.backward = self.macs = 0
        self.inside = self.active = False
        real = spmm_module.spmm_raw

        def counting(dg, x, values=None, *, transpose=False, reuse_values=False):
            products = dg.num_edges * int(np.prod(x.shape[1:]))
            if not self.active:
                products = 0
            if transpose:
                self.backward += products
            else:
                self.forward += products
            self.inside = True
            try:
                return real(
                    dg, x, values, transpose=transpose, reuse_values=reuse_values
                )
            finally:
                self.inside = False

        monkeypatch.setattr(spmm_module, "spmm_raw", counting)

    def __enter__(self):
        self.active = True
        return super().__enter__()

    def __exit__(self, *exc):
        self.active = False
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not self.inside and name in ("mm", "addmm"):
            a, b = args[-2], args[-1]
            self.macs += a.shape[0] * a.shape[1] * b.shape[1]
        return func(*args, **(kwargs or {}))


def run_model(
    model_config: ModelConfig, graph: CSRGraph, f: int, c: int, train: bool, count
) -> None:
    """Two epochs of the model as FullGraphTrainer runs them; the second counted.

    Training: counter dropout before every layer, forward and backward;
    evaluation: the model's own forward without gradients.
    """
    torch.manual_seed(0)
    model = model_config.build(f, c)
    x = torch.randn(graph.num_nodes, f)
    ids = torch.arange(graph.num_nodes)
    graph = as_device_graph(graph, torch.device("cpu"))  # the trainer's, kept
    model.train(train)
    for epoch in range(2):
        with count if epoch == 1 else contextlib.nullcontext():
            if not train:
                with torch.no_grad():
                    model(graph, x)
                continue
            h = x
            for i, conv in enumerate(model.convs):
                p = model.dropout
                h = counter_dropout(h, ids, p=p, seed=0, epoch=epoch, layer=i)
                h = conv(graph, h)
                h = model.act(h) if i < len(model.convs) - 1 else h
            h.sum().backward()


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("dropout", [0.0, 0.5])  # 0: layer 1 reuses A.x
@pytest.mark.parametrize(
    ("name", "hidden", "features", "layers"),
    [
        ("gcn", 16, 40, 2),  # narrowing: projects first in layer 2
        ("gcn", 64, 8, 3),  # widening: aggregates first
        ("sage", 16, 12, 2),
        ("gin", 8, 6, 2),
    ],
)
def test_counts_match_what_the_layers_execute(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    hidden: int,
    features: int,
    layers: int,
    dropout: float,
    train: bool,
) -> None:
    graph = small_graph()
    classes = 5
    model = ModelConfig(name, hidden=hidden, num_layers=layers, dropout=dropout)
    count = KernelCount(monkeypatch)
    run_model(model, graph, features, classes, train, count)
    loops = int(np.count_nonzero(graph.to_coo()[0] == graph.indices))
    n = graph.num_nodes
    sizes = [LayerSizes(n, n, graph.num_edges, loops)] * layers
    counts = layer_counts(model, features, classes, sizes, training=train)
    assert sum(c.spmm_products for c in counts) == count.forward
    backward = sum(c.spmm_products for c in counts if c.spmm_backward)
    assert backward == (count.backward if train else 0)
    macs = sum(c.macs + (c.backward_macs if train else 0) for c in counts)
    assert macs == count.macs


def test_counts_brute_force_from_the_config() -> None:
    # GCN 2 layers, 100 -> 16 -> 4 on 50 nodes, 300 edges, no loops, dropout
    # 0.5: layer 1's input needs no gradient, so it aggregates first (its A.x
    # could be reused, but dropout makes a new input every epoch); layer 2
    # narrows, so it projects first. Counted by hand:
    model = ModelConfig("gcn", hidden=16, num_layers=2)
    size = LayerSizes(50, 50, 300, 0)
    first, second = layer_counts(model, 100, 4, [size, size])
    assert (first.aggregate_first, second.aggregate_first) == (True, False)
    assert first.spmm_products == (300 + 50) * 100
    assert not first.spmm_backward
    assert second.spmm_products == (300 + 50) * 4
    assert first.macs == 50 * 100 * 16
    assert second.macs == 50 * 16 * 4
    # layer 1's input needs no gradient: only the weight's; layer 2: both
    assert first.backward_macs == first.macs
    assert second.backward_macs == 2 * second.macs
    assert first.dropout_elements == 50 * 100


def test_gang_programs_aggregate_first() -> None:
    model = ModelConfig("gcn", hidden=16)
    size = LayerSizes(50, 40, 300)
    counts = layer_counts(model, 100, 4, [size, size], aggregate_first_only=True)
    assert all(c.aggregate_first for c in counts)
    assert counts[0].spmm_width == 100


class GatedSum(MessagePassing):
    """A user's layer nothing in strata knows: a gated sum with a root term."""

    aggregation = Sum()

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(in_channels, 1)
        self.lin = torch.nn.Linear(in_channels, out_channels)
        self.lin_root = torch.nn.Linear(in_channels, out_channels, bias=False)

    def message(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.gate(x)) * x

    def transform(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.lin.weight, self.lin.bias

    def root(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin_root(x)


class MeanMLP(MessagePassing):
    """A user's layer without a transform: ``mlp(mean_j x_j + x_i)``."""

    aggregation = Mean()

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(in_channels, 2 * out_channels),
            torch.nn.ReLU(),
            torch.nn.Linear(2 * out_channels, out_channels),
        )

    def root(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def update(self, h: torch.Tensor, root: torch.Tensor | None) -> torch.Tensor:
        return self.mlp(h if root is None else h + root)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("dropout", [0.0, 0.5])
@pytest.mark.parametrize(
    ("name", "hidden", "features", "layers"),
    [
        ("gated", 16, 40, 2),  # a user's layer, narrowing
        ("gated", 64, 8, 3),  # widening
        ("mean-mlp", 8, 6, 2),  # a user's layer without a transform
        ("gcn", 64, 8, 2),  # evaluation reuses layer 1's A.x (no later evicts it)
        ("sage", 16, 12, 3),  # evaluation: layer 2 evicts layer 1's A.x
    ],
)
def test_user_layers_are_counted_as_they_execute(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    hidden: int,
    features: int,
    layers: int,
    dropout: float,
    train: bool,
) -> None:
    user = {"gated": GatedSum, "mean-mlp": MeanMLP}.get(name)
    model = ModelConfig(
        name, hidden=hidden, num_layers=layers, dropout=dropout, layer=user
    )
    graph = small_graph()
    classes = 5
    count = KernelCount(monkeypatch)
    run_model(model, graph, features, classes, train, count)
    n = graph.num_nodes
    loops = int(np.count_nonzero(graph.to_coo()[0] == graph.indices))
    sizes = [LayerSizes(n, n, graph.num_edges, loops)] * layers
    counts = layer_counts(model, features, classes, sizes, training=train)
    assert sum(c.spmm_products for c in counts) == count.forward
    backward = sum(c.spmm_products for c in counts if c.spmm_backward)
    assert backward == (count.backward if train else 0)
    macs = sum(c.macs + (c.backward_macs if train else 0) for c in counts)
    assert macs == count.macs


@pytest.mark.parametrize("dropout", [0.0, 0.5])
@pytest.mark.parametrize(
    ("name", "hidden", "features"),
    [("gcn", 64, 8), ("sage", 16, 12), ("gin", 8, 6), ("gated", 16, 40)],
)
def test_an_epoch_of_training_and_evaluation_is_counted_as_it_executes(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    hidden: int,
    features: int,
    dropout: float,
) -> None:
    # a training step, then an evaluation pass, sharing the graph's reuse cache
    user = GatedSum if name == "gated" else None
    model = ModelConfig(name, hidden=hidden, dropout=dropout, layer=user)
    graph = small_graph()
    count = KernelCount(monkeypatch)
    torch.manual_seed(0)
    built = model.build(features, 5)
    x = torch.randn(graph.num_nodes, features)
    ids = torch.arange(graph.num_nodes)
    device_graph = as_device_graph(graph, torch.device("cpu"))
    spmm = []
    for epoch in range(3):
        before = count.forward
        with count if epoch == 2 else contextlib.nullcontext():
            built.train()
            h = x
            for i, conv in enumerate(built.convs):
                h = counter_dropout(h, ids, p=dropout, seed=0, epoch=epoch, layer=i)
                h = conv(device_graph, h)
                h = built.act(h) if i < len(built.convs) - 1 else h
            h.sum().backward()
            spmm.append(count.forward - before)
            built.eval()
            with torch.no_grad():
                built(device_graph, x)
            spmm.append(count.forward - before - spmm[-1])
    n = graph.num_nodes
    loops = int(np.count_nonzero(graph.to_coo()[0] == graph.indices))
    sizes = [LayerSizes(n, n, graph.num_edges, loops)] * 2
    train, evals = epoch_counts(model, features, 5, sizes)
    assert sum(c.spmm_products for c in train) == spmm[-2]
    assert sum(c.spmm_products for c in evals) == spmm[-1]


def test_user_layer_shape_comes_from_its_definition() -> None:
    model = ModelConfig("gated", hidden=16, layer=GatedSum)
    (first, second) = model_shape(model, 40, 5).layers
    assert (first.in_width, first.out_width, second.out_width) == (40, 16, 5)
    assert first.transform == (40, 16)
    assert first.root == ((40, 16),)
    assert first.message == ((40, 1),)
    assert first.message_params
    assert not first.sends_features  # the gate: no reuse of A.x


def test_user_modules_that_are_not_layer_stacks_are_refused() -> None:
    model = ModelConfig("mine", module=lambda i, o: torch.nn.Linear(i, o))
    with pytest.raises(OperatorError, match="stack of MessagePassing layers"):
        layer_counts(model, 4, 2, [LayerSizes(3, 3, 3)] * 2)


# ------------------------------------------------------------- the budget
def prediction(label: str, kind: PlanKind, epoch_s: float, peak_mb: int) -> Prediction:
    workers = 2 if kind is PlanKind.EXACT else 1
    return Prediction(
        Candidate(kind, workers=workers), epoch_s, 0.0, peak_mb << 20, {}, {}
    )


def test_choose_rejects_plans_over_the_budget_with_a_reason() -> None:
    fast = prediction("full", PlanKind.FULL, 0.1, 900)
    slow = prediction("exact", PlanKind.EXACT, 0.3, 400)
    chosen, rejected = choose([fast, slow], 500 << 20, JobKind.FULL_GRAPH)
    assert chosen is slow
    assert rejected["full"].startswith("over budget: 900 MB > 500 MB")


def test_choose_names_the_smallest_peak_when_nothing_fits() -> None:
    fast = prediction("full", PlanKind.FULL, 0.1, 900)
    with pytest.raises(OperatorError, match="full at 900 MB"):
        choose([fast], 100 << 20, JobKind.FULL_GRAPH)


def test_sampled_plans_wait_until_no_full_graph_plan_fits() -> None:
    full = prediction("full", PlanKind.FULL, 0.5, 900)
    sampled = Prediction(
        Candidate(PlanKind.SAMPLED, batch_size=64, fanouts=(5, 5)),
        0.1,
        0.0,
        200 << 20,
        {},
        {},
    )
    chosen, rejected = choose([full, sampled], 1 << 30, JobKind.FULL_GRAPH)
    assert chosen is full
    assert "gradient estimator" in rejected[sampled.candidate.label]
    chosen, _ = choose([full, sampled], 500 << 20, JobKind.FULL_GRAPH)
    assert chosen is sampled


def test_planner_on_cora_respects_the_budget(cached_calibration: Calibration) -> None:
    data = load_planetoid("cora")
    train = TrainConfig(ModelConfig("gcn"), device="cpu", threads=1)
    planner = PlannerConfig(max_workers=2, chunks=(2,))
    free = plan_training(
        data, train, planner=planner, calibration=cached_calibration, rss_bytes=0
    )
    assert free.chosen.candidate.kind is PlanKind.FULL  # the gang is slow here
    labels = [p.candidate.label for p in free.predictions]
    assert labels[:2] == ["full", "exact K=2"]
    assert "hongtu K=2 M=2" in labels
    # a budget just under one process's peak: the full plan is rejected, and
    # the plan chosen fits
    tight = free.chosen.peak_bytes - 1
    smaller = [p for p in free.predictions if p.feasible and p.peak_bytes <= tight]
    limited = PlannerConfig(memory_budget=tight, max_workers=2, chunks=(2,))
    if smaller:
        report = plan_training(
            data, train, planner=limited, calibration=cached_calibration, rss_bytes=0
        )
        assert report.rejected["full"].startswith("over budget")
        assert report.chosen.peak_bytes <= tight
    with pytest.raises(OperatorError, match="memory_budget"):
        plan_training(
            data,
            train,
            planner=PlannerConfig(memory_budget=1, max_workers=2, chunks=(2,)),
            calibration=cached_calibration,
            rss_bytes=0,
        )


# ------------------------------------------------------- plan=auto and the CLI
def test_plan_auto_picks_a_valid_plan_and_the_job_runs(
    cached_calibration: Calibration, caplog: pytest.LogCaptureFixture
) -> None:
    module = load_job(str(JOBS / "cora_gcn.py"))
    config = job_config(module, {"plan": "auto", "epochs": "3", "patience": "0"})
    assert config.train.plan == "auto"
    with caplog.at_level(logging.INFO, logger="strata"):
        result = execute(module.build(config), "local")
    assert result.error is None
    outputs = result.outputs
    assert outputs["epochs_run"] == 3
    assert 0.0 <= outputs["test_accuracy"] <= 1.0
    assert any("plan=auto chose full" in r.getMessage() for r in caplog.records)


def test_plan_is_not_part_of_the_trajectory() -> None:
    fixed = TrainConfig(ModelConfig("gcn"))
    auto = TrainConfig(ModelConfig("gcn"), plan="auto")
    assert fixed.trajectory() == auto.trajectory()
    with pytest.raises(OperatorError, match="plan"):
        TrainConfig(ModelConfig("gcn"), plan="sometimes")  # type: ignore[arg-type]


def test_strata_plan_cora_prints_the_table_and_why(
    cached_calibration: Calibration, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "plan.json"
    argv = ["plan", str(JOBS / "cora_gcn.py"), "--chunks", "2", "--json", str(out_json)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "cora: 2,708 nodes" in out
    assert "<- chosen" in out
    assert "Chose full" in out
    for label in ("full", "exact K=2", "hongtu K=1 M=2", "sampled b=1024 f=10,5"):
        assert label in out
    data = json.loads(out_json.read_text())
    assert data["chosen"] == "full"
    assert {p["plan"]["label"] for p in data["predictions"]} >= {"full", "exact K=2"}


def test_strata_plan_refuses_a_budget_nothing_fits(
    cached_calibration: Calibration, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", str(JOBS / "cora_gcn.py"), "--memory-budget", "1MiB"]
    assert main(argv) == 2
    assert "memory_budget" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name",
    [
        "strata.operators.planning.calibration",
        "strata.operators.planning.candidates",
        "strata.operators.planning.cost_model",
        "strata.operators.planning.workload",
        "strata.operators.planning.shapes",
        "strata.operators.planning.auto",
    ],
)
def test_doctests(name: str) -> None:
    import doctest

    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS
    )
    assert result.failed == 0
