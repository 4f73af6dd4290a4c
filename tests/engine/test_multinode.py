"""Gangs across nodes without Ray (issue 17 item 3): two launches on loopback.

Two "nodes" are two processes on 127.0.0.1 with the same job and a free master
port: ``--nnodes 2 --node-rank 0/1``. The job's result must equal the one-node
result (and single-device training, for the full-graph GCN) to 1e-5, a node whose
launch is killed must fail the other node's gang naming the rank, and nothing may
be left running.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gang_workers as gw
import multinode_fit
import psutil
import pytest
import torch

from strata.engine.cli import main as engine_main
from strata.engine.gang import GangSpec, run_gang
from strata.engine.gang.cluster import NodeGroup, current, launched_as
from strata.operators.cli.main import main
from strata.operators.errors import OperatorError
from strata.operators.trainers import TIMING_KEYS, FullGraphTrainer, ModelConfig
from strata.operators.trainers.data import TrainingData
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer
from strata.operators.trainers.sampled import SampledGangConfig, SampledGangTrainer
from strata.storage import load_planetoid

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
STRATA = str(Path(PYTHON).with_name("strata"))
TOL = 1e-5
#: A small full-graph job: 2 workers, exact mode, a few epochs.
SMALL = [
    "--set=graph=sbm:n=2000,blocks=4,degree=8,features=16",
    "--set=workers=2",
    "--set=epochs=5",
    "--set=hidden=16",
]
SAGE = ModelConfig("sage", hidden=16)
#: Outputs that measure the machine, not the model.
MEASURED = {*TIMING_KEYS, "peak_rss_bytes", "gang_startup_s"}


def free_port() -> int:
    """A free port below the ephemeral range (32768+), where the gloo links of
    other tests pick theirs: the master port stays free until node 0 binds it."""
    for port in random.sample(range(20000, 32000), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 20000..32000")


def finish(
    nodes: list[subprocess.Popen[bytes]], logs: Path, within: float
) -> list[int]:
    """Every node's exit status; a node still running after ``within`` seconds
    fails the test with every node's output."""
    deadline = time.monotonic() + within
    try:
        return [node.wait(max(0.1, deadline - time.monotonic())) for node in nodes]
    except subprocess.TimeoutExpired:
        text = [p.read_text() for p in sorted(logs.glob("node*.log"))]
        raise AssertionError(f"a node still runs after {within} s: {text}") from None


def node_args(rank: int, port: int) -> list[str]:
    return [
        "--nnodes=2",
        f"--node-rank={rank}",
        "--master-addr=127.0.0.1",
        f"--master-port={port}",
    ]


def child_env(**extra: str) -> dict[str, str]:
    """The test's environment for a node's process, with the test modules on the
    import path and no node variables of this process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def launch(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start a node in its own session (so a test can kill all of it at once)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def session_processes(sid: int) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == sid and process.status() != "zombie":
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


def stop(nodes: list[subprocess.Popen[bytes]]) -> None:
    for node in nodes:
        if node.poll() is None:
            os.killpg(node.pid, signal.SIGKILL)
        node.wait(10)


def comparable(outputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs without what measures the machine (times, memory)."""
    kept = {k: v for k, v in outputs.items() if k not in MEASURED}
    for worker in kept.get("counters", []):
        worker.pop("peak_rss_bytes", None)
    return kept


@pytest.fixture
def warm_gang() -> None:
    """Start this process's fork server before any node variable is set: the
    server's environment is what every later worker of the session inherits."""
    assert run_gang(gw.describe, GangSpec(workers=1, device="cpu"))[0]["rank"] == 0


# ----------------------------------------------------------- the node group
def test_node_group_from_strata_variables() -> None:
    env = {
        "STRATA_NNODES": "3",
        "STRATA_NODE_RANK": "2",
        "STRATA_MASTER_ADDR": "node0",
        "STRATA_MASTER_PORT": "29400",
    }
    group = NodeGroup.from_env(env)
    assert group == NodeGroup(3, 2, "node0", 29400)
    assert group is not None
    assert group.to_env() == env
    assert not group.hosts_store
    assert [group.share(6, "g"), group.node_of(5, 6)] == [range(4, 6), 2]
    assert NodeGroup.from_env({}) is None


def test_node_group_from_torchrun_variables() -> None:
    env = {
        "TORCHELASTIC_RUN_ID": "none",
        "RANK": "1",
        "GROUP_RANK": "1",
        "LOCAL_WORLD_SIZE": "1",
        "WORLD_SIZE": "2",
        "GROUP_WORLD_SIZE": "2",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_USE_AGENT_STORE": "True",
    }
    group = NodeGroup.from_env(env)
    assert group == NodeGroup(2, 1, "10.0.0.1", 29500, agent_store=True)
    # No GROUP_* (older launchers): RANK, and WORLD_SIZE / LOCAL_WORLD_SIZE.
    del env["GROUP_RANK"], env["GROUP_WORLD_SIZE"], env["TORCHELASTIC_USE_AGENT_STORE"]
    env["RANK"] = "0"
    group = NodeGroup.from_env(env)
    assert group == NodeGroup(2, 0, "10.0.0.1", 29500)
    assert group is not None
    assert group.hosts_store


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"STRATA_NNODES": "two"}, r"STRATA_NNODES.*an integer.*'two'"),
        ({"STRATA_NNODES": "2", "STRATA_NODE_RANK": "0"}, r"STRATA_MASTER_ADDR"),
        (
            {
                "STRATA_NNODES": "2",
                "STRATA_NODE_RANK": "2",
                "STRATA_MASTER_ADDR": "h",
                "STRATA_MASTER_PORT": "1",
            },
            r"node_rank.*0 <= node_rank < nnodes \(2\).*got 2",
        ),
        (
            {
                "STRATA_NNODES": "2",
                "STRATA_NODE_RANK": "1",
                "STRATA_MASTER_ADDR": "h",
                "STRATA_MASTER_PORT": "0",
            },
            r"master_port.*1\.\.65535.*got 0",
        ),
        (
            {
                "STRATA_NNODES": "0",
                "STRATA_NODE_RANK": "0",
                "STRATA_MASTER_ADDR": "h",
                "STRATA_MASTER_PORT": "1",
            },
            r"nnodes >= 1",
        ),
        (
            {
                "TORCHELASTIC_RUN_ID": "x",
                "GROUP_RANK": "0",
                "LOCAL_WORLD_SIZE": "2",
                "WORLD_SIZE": "4",
                "MASTER_ADDR": "h",
                "MASTER_PORT": "1",
            },
            r"LOCAL_WORLD_SIZE.*--nproc-per-node 1.*got 2",
        ),
        (
            {
                "TORCHELASTIC_RUN_ID": "x",
                "GROUP_RANK": "0",
                "WORLD_SIZE": "2",
                "MASTER_PORT": "1",
            },
            r"MASTER_ADDR",
        ),
    ],
)
def test_bad_node_variables_are_clear_errors(env: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NodeGroup.from_env(env)


def test_a_gang_takes_this_nodes_share(monkeypatch: pytest.MonkeyPatch) -> None:
    node_one_of_two(monkeypatch)
    assert current() == NodeGroup(2, 1, "127.0.0.1", 29999)
    spec = GangSpec(workers=4, device="cpu", threads_per_worker=1)
    assert spec.local_workers() == 2
    assert spec.placement().devices == ("cpu", "cpu")
    # A Ray gang places its ranks itself: the node group does not split it.
    assert GangSpec(workers=4, launcher="ray").local_workers() == 4
    with pytest.raises(ValueError, match=r"workers in step 'odd'.*multiple of nnodes"):
        GangSpec(workers=3, name="odd").placement()
    monkeypatch.setenv("STRATA_NNODES", "1")
    monkeypatch.setenv("STRATA_NODE_RANK", "0")
    assert current() is None


def node_one_of_two(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in NodeGroup(2, 1, "127.0.0.1", 29999).to_env().items():
        monkeypatch.setenv(name, value)


def test_hongtu_and_armada_refuse_a_gang_across_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both trade data through one machine (HongTu's host store in shared
    memory, Armada's loopback channels): a clear error before any gang starts."""
    data = TrainingData.from_dataset(load_planetoid("cora"))
    node_one_of_two(monkeypatch)
    hongtu = DistributedConfig(workers=2, mode="hongtu")
    with pytest.raises(OperatorError, match=r"mode in DistributedTrainer.*exact"):
        DistributedTrainer(multinode_fit.train_config(), hongtu).fit(data)
    config = dataclasses.replace(multinode_fit.train_config(), model=SAGE)
    armada = SampledGangConfig(workers=2, samplers=2)
    with pytest.raises(OperatorError, match=r"samplers in SampledGangTrainer"):
        SampledGangTrainer(config, gang=armada).fit(data)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (
            ["--nnodes=2", "--master-addr=h"],
            r"--node-rank.*0 <= --node-rank < --nnodes \(2\).*none",
        ),
        (["--nnodes=2", "--node-rank=2", "--master-addr=h"], r"--node-rank.*got 2"),
        (["--nnodes=2", "--node-rank=1"], r"--master-addr.*node 0's address"),
        (
            ["--nnodes=2", "--node-rank=1", "--master-addr=h", "--master-port=70000"],
            r"--master-port.*1\.\.65535",
        ),
        (["--node-rank=1"], r"--node-rank.*--nnodes with it"),
        (["--nnodes=0"], r"--nnodes >= 1"),
        (
            ["--nnodes=2", "--node-rank=0", "--master-addr=h", "--executor=ray"],
            r"--nnodes.*no --nnodes with --executor ray",
        ),
        (
            ["--ray-address=auto"],
            r"--ray-address.*--executor ray.*got --executor local",
        ),
    ],
)
def test_bad_multinode_options_are_usage_errors(
    argv: list[str], match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert engine_main(["run", "strata.engine._example_job", *argv]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_a_master_port_in_use_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["run", "strata.engine._example_job", *node_args(0, port)]
        assert engine_main(argv) == 2
    error = capsys.readouterr().err
    assert re.search(r"master_port.*listen on 127\.0\.0\.1.*EADDRINUSE", error)
    assert current() is None


# ------------------------------------------------------------- two nodes
@pytest.mark.multiprocess
def test_two_nodes_train_the_single_device_model(
    warm_gang: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Node 0 is this process, node 1 a child: both equal single-device training.

    The issue's bar (a full-graph GCN on a 2-node launch equals single-device
    training to 1e-5): every epoch's loss and every final weight, on both nodes.
    """
    group = NodeGroup(2, 0, "127.0.0.1", free_port())
    out = tmp_path / "node1.pt"
    node1 = launch(  # first: it imports torch while this process trains the oracle
        [PYTHON, str(HERE / "multinode_fit.py"), str(out)],
        child_env(**{**group.to_env(), "STRATA_NODE_RANK": "1"}),
        tmp_path / "node1.log",
    )
    try:
        trainer = FullGraphTrainer(multinode_fit.train_config())
        oracle: list[float] = []
        trainer.fit(
            TrainingData.from_dataset(load_planetoid("cora")),
            on_epoch=lambda r: oracle.append(r.loss),
        )
        expected = trainer.trained_state
        assert expected is not None
        with launched_as(group):
            mine = multinode_fit.fit()
        assert finish([node1], tmp_path, 60) == [0]
    finally:
        stop([node1])
    theirs = torch.load(out)
    for label, run in (("node 0", mine), ("node 1", theirs)):
        losses = run["losses"]
        assert len(losses) == multinode_fit.EPOCHS
        loss_err = max(abs(a - b) for a, b in zip(losses, oracle, strict=True))
        weight_err = max(
            float((run["state"][k] - v).abs().max()) for k, v in expected.items()
        )
        print(
            f"{label}: max |loss diff| {loss_err:.1e}, |weight diff| {weight_err:.1e}"
        )
        assert loss_err <= TOL
        assert weight_err <= TOL
    assert current() is None  # launched_as put the environment back


def one_node(tmp_path: Path, job: str, settings: list[str]) -> dict[str, Any]:
    """The comparable outputs of ``strata run JOB`` on one node (this process)."""
    report = tmp_path / "single.json"
    assert main(["run", job, *settings, "--quiet", "--report", str(report)]) == 0
    return comparable(json.loads(report.read_text())["outputs"])


def two_nodes(
    tmp_path: Path,
    argv: Callable[[int, int], list[str]],
    env: dict[str, str] | None = None,
    within: float = 120,
) -> tuple[list[int], list[str]]:
    """Launch ``argv(rank, port)`` for nodes 0 and 1; their statuses and output."""
    port = free_port()
    nodes = [
        launch(argv(rank, port), env or child_env(), tmp_path / f"node{rank}.log")
        for rank in (0, 1)
    ]
    try:
        codes = finish(nodes, tmp_path, within)
    finally:
        stop(nodes)
    return codes, [(tmp_path / f"node{r}.log").read_text() for r in (0, 1)]


def strata_run(job: str, *settings: str) -> Callable[[int, int], list[str]]:
    """``strata run JOB`` as node ``rank``, reporting to ``node<rank>.json``."""

    def argv(rank: int, port: int) -> list[str]:
        return [STRATA, "run", job, *settings, "--quiet", *node_args(rank, port)]

    return argv


def node_outputs(tmp_path: Path, rank: int) -> dict[str, Any]:
    report = tmp_path / f"node{rank}.json"
    return comparable(json.loads(report.read_text())["outputs"])


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "process"])
def test_two_strata_run_launches_equal_one(tmp_path: Path, executor: str) -> None:
    """``strata run jobs/fullgraph_dist.py`` on 2 nodes prints and reports what one
    node does (the report of each node: ``{node_rank}`` in the path). On the
    process executor the gang step runs in a worker process, which finds the job
    store through the variables ``strata run`` set."""
    expected = one_node(tmp_path, "jobs/fullgraph_dist.py", SMALL)
    report = f"--report={tmp_path / 'node{node_rank}.json'}"
    argv = strata_run(
        "jobs/fullgraph_dist.py", *SMALL, f"--executor={executor}", report
    )
    codes, logs = two_nodes(tmp_path, argv)
    assert codes == [0, 0], logs
    assert node_outputs(tmp_path, 0) == node_outputs(tmp_path, 1) == expected
    assert logs[0].splitlines()[0] == logs[1].splitlines()[0]  # same summary


SAMPLED = [
    f"--set={k}={v}"
    for k, v in {
        "num_nodes": 3000,
        "num_classes": 4,
        "num_features": 16,
        "hidden": 32,
        "batch_size": 256,
        "epochs": 2,
        "device": "cpu",
        "threads": 1,
        "workers": 2,
        "cache": 0.5,
    }.items()
]


@pytest.mark.multiprocess
@pytest.mark.slow
def test_two_nodes_train_the_sampled_sage_of_one(tmp_path: Path) -> None:
    """A colocated sampled gang: each node runs the feature servers for its own
    ranks (every node has the features); the outputs equal one node's."""
    expected = one_node(tmp_path, "jobs/sampled_sage.py", SAMPLED)
    assert expected["traffic_agrees"] is True
    report = f"--report={tmp_path / 'node{node_rank}.json'}"
    codes, logs = two_nodes(
        tmp_path, strata_run("jobs/sampled_sage.py", *SAMPLED, report)
    )
    assert codes == [0, 0], logs
    assert node_outputs(tmp_path, 0) == node_outputs(tmp_path, 1) == expected


TORCHRUN = Path(PYTHON).with_name("torchrun")


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN.exists(), reason="no torchrun next to python")
def test_two_torchrun_launches_equal_one(tmp_path: Path) -> None:
    """``torchrun --nnodes 2 --nproc-per-node 1 ... strata run JOB``: the same."""
    expected = one_node(tmp_path, "jobs/fullgraph_dist.py", SMALL)

    def argv(rank: int, port: int) -> list[str]:
        report = f"--report={tmp_path / f'node{rank}.json'}"
        return [
            str(TORCHRUN),
            "--nnodes=2",
            "--nproc-per-node=1",
            f"--node-rank={rank}",
            "--master-addr=127.0.0.1",
            f"--master-port={port}",
            *[STRATA, "run", "jobs/fullgraph_dist.py", *SMALL, "--quiet", report],
        ]

    codes, logs = two_nodes(tmp_path, argv, within=150)
    assert codes == [0, 0], logs
    assert node_outputs(tmp_path, 0) == node_outputs(tmp_path, 1) == expected


# ------------------------------------------------------------- failures
JOB = str(HERE / "multinode_job.py")


def hold_nodes(tmp_path: Path, *sets: str) -> list[subprocess.Popen[bytes]]:
    """Both nodes of ``multinode_job`` (its ranks mark ``tmp_path`` once running)."""
    port = free_port()
    argv = strata_run(JOB, f"--set=marker={tmp_path}", *sets)
    return [
        launch(argv(rank, port), child_env(), tmp_path / f"node{rank}.log")
        for rank in (0, 1)
    ]


@pytest.mark.multiprocess
@pytest.mark.slow
def test_a_killed_node_fails_the_other_nodes_gang_naming_the_rank(
    tmp_path: Path,
) -> None:
    nodes = hold_nodes(tmp_path, "--set=seconds=120", "--set=timeout_s=100")
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"rank{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline, "the gang never ran"
            assert all(node.poll() is None for node in nodes)
            time.sleep(0.1)
        killed = time.monotonic()
        os.killpg(nodes[1].pid, signal.SIGKILL)  # node 1's whole launch
        assert nodes[0].wait(30) == 1
        seconds = time.monotonic() - killed
    finally:
        stop(nodes)
    log = (tmp_path / "node0.log").read_text()
    print(f"node 0 failed {seconds:.1f} s after node 1 was killed")
    assert "worker rank 1 in step 'hold'" in log
    assert "node 1 (ranks 1..1) stopped" in log
    assert seconds < 15  # well within the gang's timeout_s (100 s)
    for node in nodes:  # nothing of either node is left running
        deadline = time.monotonic() + 5
        while session_processes(node.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not session_processes(node.pid)


@pytest.mark.multiprocess
@pytest.mark.slow
def test_a_remote_rank_that_raises_is_named_on_both_nodes(tmp_path: Path) -> None:
    argv = strata_run(JOB, "--set=seconds=60", "--set=fail_rank=1")
    codes, logs = two_nodes(tmp_path, argv, within=60)
    assert codes == [1, 1], logs
    for log in logs:
        assert "worker rank 1" in log
        assert "ValueError: rank 1 fails on purpose" in log
    assert "(on node 1)" in logs[0]  # node 0 learnt it from node 1


@pytest.mark.multiprocess
@pytest.mark.slow
def test_two_nodes_agree_on_every_rank_result(tmp_path: Path) -> None:
    """Every node gets every rank's result, in rank order (4 ranks, 2 each)."""
    codes, logs = two_nodes(tmp_path, strata_run(JOB, "--set=workers=4"), within=60)
    assert codes == [0, 0], logs
    for log in logs:
        assert "results    = [4.0, 4.0, 4.0, 4.0]\nworld_size = 4" in log


@pytest.mark.multiprocess
@pytest.mark.slow
def test_a_failed_join_is_retried_on_every_node_in_step(tmp_path: Path) -> None:
    """Every rank fails to join (no such gloo interface): both nodes retry the
    same attempts (their keys meet) and report the same first failure."""
    env = child_env(GLOO_SOCKET_IFNAME="no-such-interface0")
    codes, logs = two_nodes(tmp_path, strata_run(JOB), env, within=90)
    assert codes == [1, 1], logs
    leads = [re.search(r"GangError: (worker rank \d+)", log) for log in logs]
    names = [lead.group(1) if lead else None for lead in leads]
    assert names[0] is not None, logs
    assert names[0] == names[1]  # the same first failure on both nodes
    for log in logs:
        assert "(start-up attempt 3)" in log  # GangSpec.startup_retries = 2
        assert "no-such-interface0" in log
