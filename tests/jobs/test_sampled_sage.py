"""Sampled GraphSAGE on a community graph: every executor, both feature stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.engine import Pipeline, execute
from strata.engine.job import JobError, job_config
from strata.jobs import sampled_sage
from strata.operators.trainers import TIMING_KEYS
from tests.engine.conftest import ray_actors_of

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


def test_outputs_identical_on_every_executor_and_store(
    other_executor: str, tmp_path: Path
) -> None:
    local = execute(sage_job(**SMALL), "local").outputs
    arrow = sage_job(**SMALL, store="arrow", data_dir=str(tmp_path / "ds"))
    other = execute(arrow, other_executor).outputs
    assert other.pop("store") == "arrow"
    assert local.pop("store") == "memory"
    assert untimed(other) == untimed(local)
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


GANG = {**SMALL, "workers": 2, "cache": 0.5, "epochs": 2}


def test_gang_outputs_identical_on_every_executor(other_executor: str) -> None:
    # On Ray the gang's ranks are Ray actors (the executor's workers launch gangs
    # on Ray); on the other executors, local processes.
    local = execute(sage_job(**GANG), "local").outputs
    ranks = ray_actors_of("RankActor")
    other = execute(sage_job(**GANG), other_executor).outputs
    assert untimed(other) == untimed(local)
    started = ray_actors_of("RankActor") - ranks
    assert len(started) == (GANG["workers"] if other_executor == "ray" else 0)
    assert local["mode"] == "colocated"
    assert local["traffic_agrees"] is True
    assert local["remote_rows"] == local["miss_rows"] + local["fill_rows"] > 0


@pytest.mark.multiprocess
def test_armada_and_colocated_train_the_same_model() -> None:
    colocated = execute(sage_job(**{**GANG, "cache": 0.0})).outputs
    armada = execute(sage_job(**{**GANG, "cache": 0.0, "samplers": 1})).outputs
    assert armada["mode"] == "armada"
    assert armada["partition"] == "grem"
    assert armada["final_loss"] == pytest.approx(colocated["final_loss"], rel=1e-5)
    assert armada["test_accuracy"] == pytest.approx(
        colocated["test_accuracy"], abs=1e-3
    )


def test_the_job_runs_on_planetoid_a_graph_spec_and_a_dataset_dir(
    tmp_path: Path,
) -> None:
    from strata.operators.io.datasets import community_dataset, save_dataset_dir

    quick = {"hidden": 16, "epochs": 1, "device": "cpu", "threads": 1}
    cora = execute(sage_job(dataset="cora", **quick)).outputs
    assert cora["graph"] == "planetoid:cora"
    assert cora["chance"] is None
    spec = "sbm:n=600,blocks=3,features=8,seed=1"
    assert execute(sage_job(dataset=spec, **quick)).outputs["graph"] == spec
    mine = save_dataset_dir(
        community_dataset(500, 3, num_features=8, seed=2), str(tmp_path / "mine")
    )
    outputs = execute(sage_job(dataset=mine, **quick)).outputs
    assert outputs["graph"] == mine
    assert outputs["epochs_run"] == 1


def test_a_frequency_cache_with_samplers_is_refused() -> None:
    with pytest.raises(JobError, match=r"cache_policy.*'degree' or 'none'"):
        sage_job(workers=2, samplers=1, cache=0.5)
