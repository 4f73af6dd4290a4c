"""Sampled GraphSAGE on a community graph: both executors, both feature stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.engine import Pipeline, execute
from strata.engine.job import JobError, job_config
from strata.jobs import sampled_sage
from strata.operators.trainers import TIMING_KEYS

SMALL = {
    "num_nodes": 3000,
    "num_classes": 4,
    "num_features": 16,
    "hidden": 32,
    "batch_size": 256,
    "epochs": 2,
    "device": "cpu",
    "threads": 1,
}


def sage_job(**params: object) -> Pipeline:
    """The job built from flat parameters (its aliases), as ``--set`` would."""
    return sampled_sage.build(job_config(sampled_sage, **params))


def untimed(outputs: dict) -> dict:
    return {k: v for k, v in outputs.items() if k not in TIMING_KEYS}


@pytest.mark.multiprocess
def test_outputs_identical_on_both_executors_and_stores(tmp_path: Path) -> None:
    local = execute(sage_job(**SMALL), "local").outputs
    arrow = sage_job(**SMALL, store="arrow", data_dir=str(tmp_path / "ds"))
    process = execute(arrow, "process").outputs
    assert process.pop("store") == "arrow"
    assert local.pop("store") == "memory"
    assert untimed(process) == untimed(local)
    assert local["seeds_per_s"] > 0
    assert local["gather_s"] > 0


def test_accuracy_is_well_above_chance() -> None:
    outputs = execute(sage_job(**{**SMALL, "epochs": 5})).outputs
    assert outputs["chance"] == 0.25
    assert outputs["test_accuracy"] > 0.75
    assert outputs["epochs_run"] == 5


def test_a_bad_store_is_a_clear_error() -> None:
    with pytest.raises(JobError, match=r"store.*memory.*arrow"):
        sage_job(store="disk")


def test_dotted_keys_equal_the_flat_aliases() -> None:
    flat = job_config(sampled_sage, hidden=8, fanouts=(4, 2), epochs=1, seed=3)
    dotted = job_config(
        sampled_sage,
        {
            "train.model.hidden": 8,
            "sampling.fanouts": (4, 2),
            "train.epochs": 1,
            "train.seed": 3,
        },
    )
    assert flat == dotted
    assert flat.sampling.fanouts == (4, 2)
