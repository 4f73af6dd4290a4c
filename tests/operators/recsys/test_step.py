"""RecTrainStep / train_variant and LightGCNStep / train_reference: checkpoint and
resume on the same trajectory, a gang of 2 workers against 1 (G4), refused
resumes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from strata.operators.errors import OperatorError
from strata.operators.recsys.features import RecFeatures, build_features
from strata.operators.recsys.graph import build_typed_graph
from strata.operators.recsys.job_payloads import (
    features_payload,
    graph_payload,
    split_payload,
)
from strata.operators.recsys.lightgcn import LightGCNConfig, train_lightgcn
from strata.operators.recsys.model import ModelDims
from strata.operators.recsys.split import Split, temporal_split
from strata.operators.recsys.step import (
    LightGCNStep,
    RecCheckpoint,
    RecTrainStep,
    train_reference,
    train_variant,
    trained_from_payload,
)
from strata.operators.recsys.synth import SynthConfig, synth_interactions
from strata.operators.recsys.train import RecConfig, RecMetrics, evaluate_topk
from strata.storage.hetero import TypedGraph

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DIMS = ModelDims(hidden=8, id_dim=4, tower_hidden=8, tower_out=8, fuse_dim=8)
TINY = SynthConfig(num_users=150, num_items=80, communities=4, max_per_user=30)

Data = tuple[TypedGraph, RecFeatures, Split]


@pytest.fixture(scope="module")
def data() -> Data:
    split = temporal_split(synth_interactions(TINY, seed=0))
    return build_typed_graph(split), build_features(split), split


def config(variant: str, **changes: object) -> RecConfig:
    base = RecConfig(
        variant=variant,
        dims=DIMS,
        fanouts=(4, 4),
        batch_size=256,
        epochs=4,
        patience=10,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def metrics(data: Data, trained: object) -> RecMetrics:
    graph, features, split = data
    return evaluate_topk(trained, graph, features, split, ks=(10,))  # type: ignore[arg-type]


class Interrupted(Exception):
    pass


@pytest.mark.parametrize(
    ("variant", "stage", "epochs"),
    [("E2E", 0, 2), ("B1", 1, 1), ("B1", 2, 3)],
    ids=["E2E-epoch2", "B1-stage1", "B1-stage2"],
)
def test_an_interrupted_run_resumes_on_the_same_trajectory(
    data: Data, tmp_path: Path, variant: str, stage: int, epochs: int
) -> None:
    graph, features, split = data
    cfg = config(variant)
    whole = train_variant(cfg, graph, features, split)

    def crash(at_stage: int, done: int) -> None:
        if at_stage == stage and done == epochs:
            raise Interrupted

    ckpt = RecCheckpoint(tmp_path, f"train-{variant}")
    with pytest.raises(Interrupted):
        train_variant(cfg, graph, features, split, checkpoint=ckpt, on_epoch=crash)
    saved = dataclasses.replace(ckpt, resume=True).load()
    assert saved is not None
    assert (saved["stage"], saved["loop"]["epoch"]) == (stage, epochs)
    assert saved["loop"]["gradnorm"]["weights"].shape[0] == len(whole.tasks)
    resumed = train_variant(
        cfg, graph, features, split, checkpoint=dataclasses.replace(ckpt, resume=True)
    )
    assert resumed.val_history == whole.val_history
    assert resumed.weight_log == whole.weight_log
    first, again = metrics(data, whole), metrics(data, resumed)
    assert (again.recall, again.ndcg) == (first.recall, first.ndcg)
    assert (again.top_items == first.top_items).all()


@pytest.mark.parametrize("epochs", [1, 3])
def test_an_interrupted_lightgcn_run_resumes_on_the_same_trajectory(
    data: Data, tmp_path: Path, epochs: int
) -> None:
    split = data[2]
    cfg = LightGCNConfig(dim=8, layers=2, epochs=5, patience=10, batch_size=256)
    whole = train_lightgcn(split, cfg)

    def crash(stage: int, done: int) -> None:
        if done == epochs:
            raise Interrupted

    ckpt = RecCheckpoint(tmp_path, "train-R")
    with pytest.raises(Interrupted):
        train_reference(cfg, split, checkpoint=ckpt, on_epoch=crash)
    resuming = dataclasses.replace(ckpt, resume=True)
    saved = resuming.load()
    assert saved is not None
    assert (saved["stage"], saved["loop"]["epoch"]) == (0, epochs)
    assert saved["loop"]["optimiser"]["state"]  # Adam's moments travel too
    resumed = train_reference(cfg, split, checkpoint=resuming)
    assert resumed.val_ndcg == whole.val_ndcg
    assert resumed.best_epoch == whole.best_epoch
    assert torch.equal(resumed.user, whole.user)
    assert torch.equal(resumed.item, whole.item)


def test_lightgcn_step_checkpoints_and_refuses_other_settings(
    data: Data, tmp_path: Path
) -> None:
    graph, features, split = data
    cfg = LightGCNConfig(dim=8, layers=1, epochs=2, batch_size=256)
    step = LightGCNStep(cfg, checkpoint_dir=str(tmp_path))
    result = step(
        graph_payload(graph), features_payload(features), split_payload(split)
    )
    saved = dataclasses.replace(step.checkpoint(), resume=True).load()
    assert saved is not None
    assert saved["loop"]["stopped"]
    assert saved["loop"]["val_history"] == result["val_history"]
    other = dataclasses.replace(cfg, lr=0.01)
    with pytest.raises(OperatorError, match="lr"):
        train_reference(
            other, split, checkpoint=dataclasses.replace(step.checkpoint(), resume=True)
        )
    with pytest.raises(OperatorError, match="checkpoint_dir"):
        LightGCNStep(cfg, resume=True)


def test_gradnorm_state_is_checkpointed(data: Data, tmp_path: Path) -> None:
    graph, features, split = data
    ckpt = RecCheckpoint(tmp_path, "e2e", every=2)
    trained = train_variant(config("E2E"), graph, features, split, checkpoint=ckpt)
    state = dataclasses.replace(ckpt, resume=True).load()
    assert state is not None
    gradnorm = state["loop"]["gradnorm"]
    assert gradnorm["steps"] == state["loop"]["step_count"] > 10
    assert float(gradnorm["weights"].sum()) == pytest.approx(3.0)
    assert gradnorm["weights"].tolist() == pytest.approx(
        trained.weight_log[-1][2:], abs=0.1
    )


def test_resuming_with_other_settings_is_refused(data: Data, tmp_path: Path) -> None:
    graph, features, split = data
    ckpt = RecCheckpoint(tmp_path, "train-B0")
    train_variant(config("B0", epochs=1), graph, features, split, checkpoint=ckpt)
    with pytest.raises(OperatorError, match="lr"):
        train_variant(
            config("B0", lr=0.01),
            graph,
            features,
            split,
            checkpoint=dataclasses.replace(ckpt, resume=True),
        )


def test_resume_needs_a_checkpoint_dir() -> None:
    with pytest.raises(OperatorError, match="checkpoint_dir"):
        RecTrainStep(config("B0"), resume=True)


def _step_metrics(data: Data, cfg: RecConfig, workers: int) -> RecMetrics:
    graph, features, split = data
    step = RecTrainStep(cfg, name=f"g4-{cfg.spec.variant.value}", workers=workers)
    result = step(
        graph_payload(graph), features_payload(features), split_payload(split)
    )
    assert result["workers"] == workers
    return metrics(data, trained_from_payload(cfg, result, graph, features))


@pytest.mark.slow  # two gang processes load torch and the kernels: ~17 s at load 14
@pytest.mark.multiprocess
def test_a_two_worker_gang_trains_as_one_worker_does(data: Data) -> None:
    # B0 has no encoder: its 2-worker gradients are the 1-worker ones, summed in
    # another order, so the metrics agree to float rounding.
    cfg = config("B0", epochs=2)
    one, two = _step_metrics(data, cfg, 1), _step_metrics(data, cfg, 2)
    assert two.recall[10] == pytest.approx(one.recall[10], rel=1e-4)
    assert two.ndcg[10] == pytest.approx(one.ndcg[10], rel=1e-4)


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("variant", ["E2E", "B1"])
def test_g4_two_workers_within_one_percent_on_the_smoke_config(variant: str) -> None:
    split = temporal_split(synth_interactions(SynthConfig.smoke(), seed=0))
    data = (build_typed_graph(split), build_features(split), split)
    cfg = RecConfig(variant=variant, epochs=3)
    one, two = _step_metrics(data, cfg, 1), _step_metrics(data, cfg, 2)
    for k in (10,):
        assert two.recall[k] == pytest.approx(one.recall[k], rel=0.01)
        assert two.ndcg[k] == pytest.approx(one.ndcg[k], rel=0.01)
