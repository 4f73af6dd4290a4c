"""ZmqMesh and TorchMesh across processes (run_mesh): same results as SimMesh."""

from __future__ import annotations

import mesh_workers as mw
import numpy as np
import pytest

from strata.engine.gang import GangError
from strata.engine.mesh import MeshKind, run_mesh, run_sim

pytestmark = pytest.mark.multiprocess


@pytest.mark.parametrize("kind", ["zmq", "torch"])
@pytest.mark.parametrize("size", [1, 2, 4])
def test_processes_match_sim(kind: MeshKind, size: int, no_leftovers: None) -> None:
    real = run_mesh(mw.spmd, size, 4, 5, kind=kind, timeout_s=60)
    modelled = run_sim(mw.spmd, size, 4, 5)
    for a, b in zip(real, modelled, strict=True):
        assert a["stats"] == b["stats"]  # messages and bytes, by peer
        assert a["sums"] == b["sums"]  # the same float bits: folded in rank order
        assert (a["low"], a["high"]) == (b["low"], b["high"])
        for got, want in zip(a["received"], b["received"], strict=True):
            for x, y in zip(got, want, strict=True):
                assert [(u.dtype, u.shape) for u in x] == [
                    (v.dtype, v.shape) for v in y
                ]
                assert all(np.array_equal(u, v) for u, v in zip(x, y, strict=True))


@pytest.mark.parametrize("kind", ["zmq", "torch"])
def test_staggered_ranks(kind: MeshKind, no_leftovers: None) -> None:
    got = run_mesh(mw.staggered, 4, 10, kind=kind, timeout_s=60)
    assert got == [[[r] * 4 for r in range(10)]] * 4


@pytest.mark.parametrize("kind", ["zmq", "torch"])
@pytest.mark.parametrize("fn", [mw.raises_on, mw.dies_on])
def test_a_failing_rank_is_named(
    kind: MeshKind, fn: object, no_leftovers: None
) -> None:
    with pytest.raises(GangError, match=r"rank 2 \(pid") as info:
        run_mesh(fn, 3, 2, kind=kind, timeout_s=20)  # type: ignore[arg-type]
    assert info.value.rank == 2
