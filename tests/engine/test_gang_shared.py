"""SharedTensors: one shared-memory segment, mapped by every rank, always unlinked."""

from __future__ import annotations

import gc
import glob
import os
import pickle
import subprocess
import sys
import time

import gang_workers as gw
import numpy as np
import pytest
import torch

from strata.engine.gang import GangSpec, SharedTensors, run_gang
from strata.engine.gang.shared import PREFIX


def segments(pid: int | None = None) -> set[str]:
    return set(glob.glob(f"/dev/shm/{PREFIX}{pid or os.getpid()}-*"))


def test_arrays_round_trip_and_handles_map_the_same_memory() -> None:
    arrays = {
        "ids": np.arange(5, dtype=np.int64),
        "x": torch.randn(3, 4),
        "h": torch.ones(2, 2, dtype=torch.bfloat16),
        "none": np.zeros((0, 3), dtype=np.float32),
    }
    with SharedTensors.from_arrays(arrays) as shared:
        assert len(segments()) >= 1
        assert list(shared) == ["ids", "x", "h", "none"]
        assert torch.equal(shared["ids"], torch.arange(5))
        assert torch.equal(shared["x"], arrays["x"])
        assert shared["h"].dtype == torch.bfloat16
        assert shared["none"].shape == (0, 3)
        handle = pickle.loads(pickle.dumps(shared))
        assert len(pickle.dumps(shared)) < 1000  # a name and a layout, not data
        handle["x"][0, 0] = 42.0
        assert shared["x"][0, 0].item() == 42.0
        view = shared["ids"]
    assert not segments()  # unlinked on exit ...
    assert view.sum().item() == 10  # ... while views stay valid


def test_zeros_allocates_aligned_outputs() -> None:
    shared = SharedTensors.zeros(
        {"a": ((3,), torch.int8), "b": ((2, 2), torch.float64)}
    )
    try:
        assert shared["a"].data_ptr() % 64 == 0
        assert shared["b"].data_ptr() % 64 == 0
        assert shared["b"].sum().item() == 0.0
        assert shared.nbytes == 3 + 32
    finally:
        shared.close()
    shared.close()  # idempotent
    assert not segments()


@pytest.mark.multiprocess
@pytest.mark.parametrize("world", [1, 2])
def test_workers_read_inputs_and_fill_outputs(world: int) -> None:
    with SharedTensors.from_arrays(
        {"x": np.arange(10.0), "out": np.zeros(world)}
    ) as shared:
        sums = run_gang(gw.fill_rows, GangSpec(workers=world), shared)
        assert sums == [45.0] * world
        assert shared["out"].tolist() == [float(r + 1) for r in range(world)]


_OWNER_KILLED = """
import os, signal, sys
from strata.engine.gang import SharedTensors
shared = SharedTensors.zeros({"x": ((1000,), __import__("torch").float32)})
print(shared.path, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.multiprocess
@pytest.mark.slow  # a fresh interpreter imports torch: seconds
def test_segment_of_a_killed_owner_is_unlinked_by_the_resource_tracker() -> None:
    owner = subprocess.run(
        [sys.executable, "-c", _OWNER_KILLED], capture_output=True, text=True
    )
    assert owner.returncode == -9
    path = owner.stdout.strip()
    assert path.startswith(f"/dev/shm/{PREFIX}")
    deadline = time.monotonic() + 10
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(path)
    assert "leaked shared_memory" in owner.stderr


def test_an_owner_dropped_without_close_unlinks_its_segment() -> None:
    shared = SharedTensors.zeros({"x": ((8,), torch.float32)})
    path = shared.path
    assert os.path.exists(path)
    del shared
    gc.collect()
    assert not os.path.exists(path)
