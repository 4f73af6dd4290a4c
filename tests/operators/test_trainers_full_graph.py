"""FullGraphTrainer: reproducibility, resume, early stopping, checkpoints, configs."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from strata.operators.errors import OperatorError
from strata.operators.io.datasets import community_dataset, save_dataset_dir
from strata.operators.trainers import (
    TIMING_KEYS,
    FullGraphTrainer,
    ModelConfig,
    TrainConfig,
)
from strata.operators.trainers.base import build_optimizer
from strata.operators.trainers.checkpoint import load_checkpoint, save_checkpoint


@pytest.fixture(scope="module")
def data() -> dict:
    # 400 nodes in 4 communities, 16 noisy features: trains in milliseconds.
    return community_dataset(400, 4, avg_degree=8, num_features=16, seed=1)


def config(**changes) -> TrainConfig:
    base = TrainConfig(
        ModelConfig("gcn", hidden=16, dropout=0.5),
        lr=0.01,
        epochs=20,
        seed=0,
        device="cpu",
        threads=1,
    )
    return dataclasses.replace(base, **changes)


def run(config: TrainConfig, data) -> tuple[list[dict], dict]:
    records = []
    result = FullGraphTrainer(config).fit(data, lambda r: records.append(r.to_dict()))
    return [untimed(r) for r in records], untimed(result.to_dict())


def untimed(values: dict) -> dict:
    return {k: v for k, v in values.items() if k not in TIMING_KEYS}


def test_same_seed_gives_identical_losses_and_leaves_global_rng_alone(data) -> None:
    before = torch.get_rng_state()
    first = run(config(), data)
    assert torch.equal(torch.get_rng_state(), before)  # trained in fork_rng
    assert run(config(), data) == first
    other_records, _ = run(config(seed=1), data)
    assert [r["loss"] for r in other_records] != [r["loss"] for r in first[0]]


def test_a_dataset_directory_trains_like_the_payload(data, tmp_path) -> None:
    directory = save_dataset_dir(data, str(tmp_path / "community"))
    assert run(config(epochs=3), directory) == run(config(epochs=3), data)


def test_learns_the_communities(data) -> None:
    _, result = run(config(epochs=100, lr=0.02), data)
    assert result["test_accuracy"] > 0.75  # chance is 0.25; seeds 0-9: 0.78-0.85


def test_resume_continues_the_uninterrupted_trajectory(data, tmp_path) -> None:
    straight_records, straight = run(config(epochs=20), data)
    ckpt = str(tmp_path)
    first_records, _ = run(config(epochs=10, checkpoint_dir=ckpt), data)
    assert first_records == straight_records[:10]
    resumed_records, resumed = run(
        config(epochs=20, checkpoint_dir=ckpt, resume=True), data
    )
    # The whole run's epochs: those in the checkpoint, then this run's, with
    # bit-identical losses.
    assert resumed_records == straight_records
    assert resumed.pop("resumed_from") == 10
    straight.pop("resumed_from")
    assert resumed == straight


class CrashAt(FullGraphTrainer):
    """Fails at the start of epoch ``at``: a run interrupted mid-way."""

    def __init__(self, config: TrainConfig, at: int) -> None:
        super().__init__(config)
        self.at = at

    def train_epoch(self, model, optimizer, epoch):
        if epoch == self.at:
            raise RuntimeError(f"interrupted at epoch {epoch}")
        return super().train_epoch(model, optimizer, epoch)


@pytest.mark.parametrize("monitor", ["val_loss", "val_accuracy"])
def test_a_run_interrupted_mid_way_resumes_with_the_whole_history(
    data, tmp_path, monitor
) -> None:
    # Early stopping on: the resumed run must stop where the uninterrupted one did.
    settings = {"epochs": 60, "patience": 5, "lr": 0.05, "monitor": monitor}
    straight_records, straight = run(config(**settings), data)
    ckpt = config(**settings, checkpoint_dir=str(tmp_path), checkpoint_every=4)
    seen = []
    with pytest.raises(RuntimeError, match="interrupted at epoch 10"):
        CrashAt(ckpt, at=10).fit(data, lambda r: seen.append(untimed(r.to_dict())))
    assert seen == straight_records[:10]  # epochs 8 and 9 are not in the checkpoint
    records, resumed = run(dataclasses.replace(ckpt, resume=True), data)
    assert records == straight_records
    assert resumed.pop("resumed_from") == 8
    straight.pop("resumed_from")
    assert resumed == straight  # best epoch, stopped early, final accuracies
    assert straight["epochs_run"] == len(straight_records)


def test_resume_refuses_a_checkpoint_of_other_settings(data, tmp_path) -> None:
    run(config(epochs=2, checkpoint_dir=str(tmp_path)), data)
    changed = config(epochs=4, lr=0.05, checkpoint_dir=str(tmp_path), resume=True)
    with pytest.raises(OperatorError, match=r"resume in FullGraphTrainer.*lr differ"):
        run(changed, data)


def test_resume_without_a_checkpoint_starts_fresh(data, tmp_path) -> None:
    fresh = config(epochs=3, checkpoint_dir=str(tmp_path), resume=True)
    assert run(fresh, data) == run(config(epochs=3), data)


def test_checkpoints_are_replaced_atomically(data, tmp_path, monkeypatch) -> None:
    run(config(epochs=4, checkpoint_dir=str(tmp_path), checkpoint_every=2), data)
    assert os.listdir(tmp_path) == ["trainer.pt"]  # no temporary files left
    path = tmp_path / "trainer.pt"
    saved = load_checkpoint(path)
    assert saved["epoch"] == 4
    assert len(saved["history"]) == 4

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"epoch": 99})
    assert load_checkpoint(path)["epoch"] == 4  # the old checkpoint is intact
    assert os.listdir(tmp_path) == ["trainer.pt"]


def test_a_damaged_checkpoint_is_a_clear_error(tmp_path) -> None:
    path = tmp_path / "trainer.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(OperatorError, match="checkpoint in load_checkpoint"):
        load_checkpoint(path)


def test_early_stopping_stops_after_patience_epochs(data) -> None:
    # With lr=0 the validation loss never improves after epoch 0.
    records, result = run(config(lr=0.0, epochs=50, patience=5), data)
    assert len(records) == 6
    assert result["stopped_early"]
    assert result["best_epoch"] == 0
    assert [r["improved"] for r in records] == [True] + [False] * 5


def test_early_stopping_on_a_learning_run(data) -> None:
    records, result = run(
        config(epochs=300, lr=0.05, patience=10, monitor="val_accuracy"), data
    )
    assert result["stopped_early"]
    assert len(records) < 300
    best = max(r["val_accuracy"] for r in records)
    assert records[result["best_epoch"]]["val_accuracy"] == best
    assert all(not r["improved"] for r in records[-10:])


def test_restore_best_reports_the_best_epochs_weights(data) -> None:
    records, result = run(config(epochs=40), data)
    best = min(records, key=lambda r: r["val_loss"])
    assert result["best_epoch"] == best["epoch"]
    assert result["val_loss"] == pytest.approx(best["val_loss"], rel=1e-6)
    _, last = run(config(epochs=40, restore_best=False), data)
    assert last["val_loss"] == pytest.approx(records[-1]["val_loss"], rel=1e-6)


@pytest.mark.parametrize("name", ["gcn", "sage", "gat", "gin"])
def test_every_model_trains(data, name) -> None:
    records, result = run(config(model=ModelConfig(name, hidden=8), epochs=3), data)
    assert len(records) == 3
    assert 0.0 <= result["test_accuracy"] <= 1.0


def test_weight_decay_scope() -> None:
    model = ModelConfig("gcn").build(10, 3)
    first = build_optimizer(model, config(decay_scope="first", weight_decay=0.1))
    decays = [(len(g["params"]), g["weight_decay"]) for g in first.param_groups]
    assert decays == [(2, 0.1), (2, 0.0)]  # conv1 weight and bias; conv2's
    every = build_optimizer(model, config(decay_scope="all", weight_decay=0.1))
    assert [g["weight_decay"] for g in every.param_groups] == [0.1]


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"lr": -0.1}, "lr in TrainConfig: expected lr >= 0"),
        ({"monitor": "val_f1"}, "monitor in TrainConfig: expected one of"),
        ({"resume": True}, "resume in TrainConfig: expected a checkpoint_dir"),
        ({"device": "tpu"}, "device in TrainConfig"),
        ({"epochs": -1}, "epochs in TrainConfig"),
    ],
)
def test_bad_settings_fail_on_construction(changes, match) -> None:
    with pytest.raises(OperatorError, match=match):
        config(**changes)


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(OperatorError, match=r"name in ModelConfig: expected one of"):
        ModelConfig("transformer")
