"""GradientAllReducer (exact and compressed with error feedback), broadcast_module."""

from __future__ import annotations

import gang_workers as gw
import pytest
import torch

from strata.engine.gang import GangSpec, GradientAllReducer, rank_seed, run_gang

pytestmark = pytest.mark.multiprocess


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_exact_reduction_equals_one_process(world: int, op: str) -> None:
    grads = torch.randn(world, 22, generator=torch.Generator().manual_seed(world))
    expected = grads.sum(0) if op == "sum" else grads.sum(0) / world
    for reduced in run_gang(gw.reduce_grads, GangSpec(workers=world), grads, op):
        flat = torch.cat([g.reshape(-1) for g in reduced])
        if world <= 2:  # one addition: the same rounding as in one process
            assert torch.equal(flat, expected)
        else:
            torch.testing.assert_close(flat, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("compression", ["bf16", "fp16"])
def test_error_feedback_converges_to_the_uncompressed_sum(compression: str) -> None:
    checkpoints = [10, 30, 100]
    spec = GangSpec(workers=2)
    result = run_gang(gw.accumulate_compressed, spec, 100, checkpoints, compression)[0]
    feedback, rounding = result["errors"]["feedback"], result["errors"]["rounding"]
    # The residuals account for the whole gap (the errors telescope) ...
    assert result["identity_gap"] <= 1e-5 * result["scale"]
    # ... so the relative gap shrinks like 1/steps, while rounding alone does not.
    # (bf16, seeded: 2.3e-4 after 10 steps, 2.3e-5 after 100; rounding alone 3.5e-4)
    assert feedback[100] < feedback[30] < feedback[10]
    assert feedback[100] < feedback[10] / 5
    assert feedback[100] < rounding[100] / 5
    # Half the bytes of the fp32 all-reduce.
    assert result["payload_bytes"] == result["exact_payload_bytes"] // 2


def test_compressed_reduction_on_one_rank_is_just_rounding() -> None:
    (result,) = run_gang(
        gw.accumulate_compressed, GangSpec(workers=1), 20, [20], "bf16"
    )
    assert result["identity_gap"] <= 1e-5 * result["scale"]
    assert result["payload_bytes"] == 0  # nothing leaves a lone rank


@pytest.mark.parametrize("world", [1, 2])
def test_broadcast_module_gives_every_rank_rank0_weights(world: int) -> None:
    states = run_gang(gw.broadcast_weights, GangSpec(workers=world))
    torch.manual_seed(rank_seed(0, 0))  # what rank 0 initialised
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    for state in states:
        assert state.keys() == model.state_dict().keys()
        assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def test_reducer_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="compression"):
        GradientAllReducer([], compression="int8")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="op"):
        GradientAllReducer([], op="max")  # type: ignore[arg-type]
