"""A worker of a distributed training run that dies mid-epoch fails the run.

The fault is injected on the :class:`DistributedTrainer` path itself
(:class:`Fault`): the rank SIGKILLs itself inside the backward pass of an epoch,
after the forward pass's exchanges, while its peers wait for it in a backward
collective. The run must fail within the configured timeout with a
:class:`GangError` naming the dead rank and its pid, never hang.
"""

from __future__ import annotations

import time

import pytest

from strata.engine.gang import FailureKind, GangError
from strata.operators.errors import OperatorError
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.distributed import (
    DistributedConfig,
    DistributedTrainer,
    Fault,
)
from strata.storage import load_planetoid

pytestmark = pytest.mark.multiprocess

TIMEOUT_S = 120.0


MODES = [("exact", {}), ("hongtu", {"chunks": 2})]


@pytest.mark.parametrize(("mode", "extra"), MODES, ids=["exact", "hongtu"])
def test_killed_mid_epoch_fails_the_run_naming_the_worker(
    mode: str, extra: dict
) -> None:
    config = TrainConfig(
        ModelConfig("gcn", hidden=16), epochs=6, patience=0, device="cpu", threads=1
    )
    dist = DistributedConfig(
        workers=2,
        mode=mode,
        timeout_s=TIMEOUT_S,
        collective_timeout_s=TIMEOUT_S,
        fault=Fault(rank=1, epoch=2, how="kill", stage="backward"),
        **extra,
    )
    start = time.monotonic()
    with pytest.raises(GangError) as caught:
        DistributedTrainer(config, dist).fit(load_planetoid("cora"))
    elapsed = time.monotonic() - start
    error = caught.value
    assert elapsed < TIMEOUT_S, f"failed after {elapsed:.0f} s, limit {TIMEOUT_S}"
    assert error.rank == 1
    assert error.failures[0].kind is FailureKind.DIED
    message = str(error)
    assert f"rank 1 (pid {error.pid})" in message
    assert "SIGKILL" in message
    assert "distributed-train" in message  # the gang (the step) is named


def test_fault_stage_is_validated() -> None:
    with pytest.raises(OperatorError, match=r"fault\.stage"):
        DistributedConfig(fault=Fault(rank=0, epoch=0, stage="middle"))
