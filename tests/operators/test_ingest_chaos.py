"""Exactly-once ingestion under kills, delays, reordering and drops (chaos trials).

Each trial (``strata.operators.streaming.chaos``) streams numbered rows from one or two
producers through a delaying, reordering, lossy link into a checkpointed job that
serves the ingestion endpoint, SIGKILLs the job and the producers at random
moments, restarts them (the job with resume, producers with the same id), and
checks that the rows the job applied are exactly the rows sent: none lost, none
doubled, each producer's in seq order, every acknowledged batch logged once.
"""

from __future__ import annotations

import socket

import pytest

from strata.operators.streaming.chaos import (
    Trial,
    TrialError,
    TrialPlan,
    check_trial,
    ephemeral_ports,
    free_endpoint,
    run_trials,
    summary,
)

pytestmark = pytest.mark.multiprocess


def test_issue_scenario_window_8_three_job_kills(tmp_path) -> None:
    """The reported loss: default window 8, 1,500 batches of 10 rows, kill -9 at
    225, 675 and 1,200 acknowledged batches, resume each time."""
    plan = TrialPlan(
        seed=12,
        batches=(1500,),
        batch_rows=10,
        window=8,
        timeout_s=2.0,  # the client's default resend timeout
        kill_after_acks=((225, "job"), (675, "job"), (1200, "job")),
        restart_delay_s=0.2,
        checkpoint_every=50,
    )
    result = Trial(plan, str(tmp_path)).run()
    check = check_trial(plan, result)
    assert result.kills == {"job": 3}
    assert check.ok, check
    assert result.applied.size == 15_000
    assert result.applied.tolist() == list(range(15_000))  # the uninterrupted order


def test_a_late_batch_after_a_kill_is_refused_not_called_a_duplicate(tmp_path) -> None:
    """Messages overtaking each other (a 10 ms reordering link), window 32."""
    plan = TrialPlan(
        seed=3,
        batches=(300,),
        batch_rows=2,
        window=32,
        timeout_s=0.2,
        max_delay_ms=10.0,
        kills=((0.3, "job"), (0.6, "producer:0"), (0.9, "job")),
    )
    result = Trial(plan, str(tmp_path)).run()
    check = check_trial(plan, result)
    assert check.ok, check
    assert sum(result.kills.values()) >= 2


@pytest.mark.parametrize("seeds", [range(0, 4)])
def test_seeded_chaos_subset(tmp_path, seeds) -> None:
    checks = list(run_trials(seeds, str(tmp_path)))
    totals = summary(checks)
    assert totals["failed_runs"] == 0, [c for _, _, c in checks if not c.ok]
    assert totals["lost"] == totals["doubled"] == 0


@pytest.mark.slow
def test_two_hundred_randomized_trials(tmp_path) -> None:
    checks = list(run_trials(range(100, 300), str(tmp_path)))
    totals = summary(checks)
    assert totals["runs"] == 200
    assert totals["failed_runs"] == 0, [(p, c) for p, _, c in checks if not c.ok]
    assert totals["windows"] == [1, 2, 8, 32]
    assert sum(totals["kills"].values()) >= 200


def test_the_job_port_is_never_an_ephemeral_one() -> None:
    """While a killed job is down, the kernel may hand an ephemeral port to any
    process's outgoing connection, and the restarted job could not bind it."""
    ports = [int(free_endpoint().rsplit(":", 1)[1]) for _ in range(20)]
    assert not set(ports) & set(ephemeral_ports())


class _PortTakenAfterKill(Trial):
    """Another socket holds the job's port once the job is killed."""

    taken: list[socket.socket]

    def _kill(self, target: str, now: float) -> None:
        super()._kill(target, now)
        if target == "job" and not hasattr(self, "taken"):
            thief = socket.socket()
            thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAITs
            thief.bind(("127.0.0.1", int(self.endpoint.rsplit(":", 1)[1])))
            thief.listen(1)
            self.taken = [thief]


def test_a_job_that_fails_by_itself_reports_its_traceback(tmp_path) -> None:
    plan = TrialPlan(seed=5, batches=(2000,), batch_rows=2, kills=((0.3, "job"),))
    trial = _PortTakenAfterKill(plan, str(tmp_path))
    try:
        with pytest.raises(TrialError, match="failed by itself") as failure:
            trial.run()
    finally:
        for thief in getattr(trial, "taken", []):
            thief.close()
    assert "Address already in use" in str(failure.value)
    assert "ZmqIngest.finish" in str(failure.value)  # the job's own traceback
