"""jobs/link_prediction: Cora and a featureless community graph, every executor."""

from __future__ import annotations

import pytest

from strata.engine import execute
from strata.engine.job import JobError, job_config
from strata.jobs import link_prediction
from strata.operators.cli.main import main
from strata.operators.trainers import TIMING_KEYS

FAST = {"device": "cpu", "threads": 1}


def untimed(outputs: dict) -> dict:
    return {k: v for k, v in outputs.items() if k not in TIMING_KEYS}


def run(values: dict[str, str] | None = None, **named: object) -> dict[str, object]:
    config = job_config(link_prediction, values, **named)
    return execute(link_prediction.build(config)).outputs


def test_a_short_run_reports_auc_mrr_and_hits() -> None:
    outputs = run(epochs=5, **FAST)
    assert outputs["epochs_run"] == 5
    for key in ("test_auc", "test_mrr", "test_hits@20", "val_auc"):
        assert 0.0 <= outputs[key] <= 1.0
    assert outputs["test_accuracy"] == outputs["test_auc"]


def test_outputs_identical_on_every_executor(other_executor: str) -> None:
    config = job_config(link_prediction, epochs=3, **FAST)
    local = execute(link_prediction.build(config), "local").outputs
    other = execute(link_prediction.build(config), other_executor).outputs
    assert untimed(other) == untimed(local)
    assert local["epochs_run"] == 3


def test_a_featureless_graph_gets_seeded_features() -> None:
    spec = "sbm:n=300,blocks=10,degree=10,intra=0.95,features=0"
    first = run({"graph": spec}, epochs=3, **FAST)
    again = run({"graph": spec}, epochs=3, **FAST)
    assert first["loss_curve"] == again["loss_curve"]


def test_the_job_predicts_links_only() -> None:
    with pytest.raises(JobError, match="linkprediction"):
        job_config(link_prediction, {"train.task": "nodeclassification"})


def test_help_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "jobs/link_prediction.py", "--help"]) == 0
    text = capsys.readouterr().out
    assert "train.task.val_fraction" in text
    argv = ["run", "jobs/link_prediction.py", "--quiet", "--set", "epochs=2"]
    assert main([*argv, "--set", "device=cpu"]) == 0
    assert "test_hits@20" in capsys.readouterr().out


@pytest.mark.slow
def test_cora_reaches_the_gae_auc() -> None:
    outputs = run(**FAST)
    assert outputs["test_auc"] >= 0.90


@pytest.mark.slow
def test_a_featureless_community_graph_reaches_a_high_auc() -> None:
    spec = "sbm:n=3000,blocks=30,degree=20,intra=0.95,features=0"
    outputs = run({"graph": spec}, **FAST)
    assert outputs["test_auc"] >= 0.95
