"""moving_sum: the decayed running sum, its fixed point and its gradient."""

from __future__ import annotations

import pytest
import torch

from strata.operators.errors import OperatorError
from strata.operators.kernels.moving_aggr import decay_factor, moving_sum


def inputs(seed: int = 0, n: int = 7, d: int = 3):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    degree = torch.randint(0, 5, (n,), generator=g).to(torch.float64)
    degree[0] = 0.0  # a destination without in-edges
    refreshed = torch.floor(
        torch.rand(n, generator=g, dtype=torch.float64) * (degree + 1)
    )
    partial = torch.randn(n, d, generator=g, dtype=torch.float64)
    carried = torch.randn(n, d, generator=g, dtype=torch.float64)
    return partial, carried, refreshed, degree


def test_formula_against_a_loop() -> None:
    partial, carried, refreshed, degree = inputs()
    out = moving_sum(partial, carried, refreshed, degree)
    for v in range(partial.shape[0]):
        if degree[v] == 0:
            decay = 0.0
        else:
            decay = min(max(1.0 - float(refreshed[v] / degree[v]), 0.0), 1.0)
        torch.testing.assert_close(out[v], decay * carried[v] + partial[v])


def test_decay_is_clamped_and_zero_without_in_edges() -> None:
    decay = decay_factor(
        torch.tensor([0.0, 2.0, 5.0, 0.0]), torch.tensor([4.0, 4.0, 4.0, 0.0])
    )
    assert decay.tolist() == [1.0, 0.5, 0.0, 0.0]


def test_full_refresh_is_the_partial_sum() -> None:
    partial, carried, _, degree = inputs(1)
    out = moving_sum(partial, carried, degree.clone(), degree)
    assert torch.equal(out, partial)  # S = 1: decay 0, h = the full sum


def test_fixed_point_of_the_true_sum() -> None:
    """Feeding p_t = (n_t / deg) * true keeps h at the true sum, from any cycle."""
    g = torch.Generator().manual_seed(2)
    n, d, s = 20, 4, 5
    degree = torch.randint(1, 9, (n,), generator=g).to(torch.float64)
    true = torch.randn(n, d, generator=g, dtype=torch.float64)
    h = true.clone()
    for t in range(3 * s):
        refreshed = torch.floor(degree * ((t % s) + 1) / (s + 1))
        h = moving_sum((refreshed / degree).unsqueeze(1) * true, h, refreshed, degree)
        torch.testing.assert_close(h, true, rtol=1e-12, atol=1e-12)


def test_converges_to_the_true_sum_from_zero() -> None:
    g = torch.Generator().manual_seed(3)
    n, d = 10, 2
    degree = torch.randint(2, 6, (n,), generator=g).to(torch.float64)
    refreshed = torch.ones(n, dtype=torch.float64)
    true = torch.randn(n, d, generator=g, dtype=torch.float64)
    h = torch.zeros(n, d, dtype=torch.float64)
    for _ in range(400):
        h = moving_sum((refreshed / degree).unsqueeze(1) * true, h, refreshed, degree)
    torch.testing.assert_close(h, true, rtol=1e-9, atol=1e-9)


def test_gradcheck_straight_through_to_the_partial_sum() -> None:
    partial, carried, refreshed, degree = inputs(4)
    partial.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda p: moving_sum(p, carried, refreshed, degree), (partial,)
    )
    assert torch.autograd.gradgradcheck(
        lambda p: moving_sum(p, carried, refreshed, degree), (partial,)
    )


def test_carried_part_gets_no_gradient() -> None:
    partial, carried, refreshed, degree = inputs(5)
    carried.requires_grad_(True)
    partial.requires_grad_(True)
    moving_sum(partial, carried, refreshed, degree).sum().backward()
    assert carried.grad is None
    assert torch.equal(partial.grad, torch.ones_like(partial))


def test_three_dimensional_rows() -> None:
    partial, carried, refreshed, degree = inputs(6, d=6)
    flat = moving_sum(partial, carried, refreshed, degree)
    heads = moving_sum(
        partial.reshape(-1, 2, 3), carried.reshape(-1, 2, 3), refreshed, degree
    )
    torch.testing.assert_close(heads.reshape(flat.shape), flat)


def test_shape_mismatch_names_the_argument() -> None:
    partial, carried, refreshed, degree = inputs(7)
    with pytest.raises(OperatorError, match="carried in moving_sum"):
        moving_sum(partial, carried[1:], refreshed, degree)
    with pytest.raises(OperatorError, match="degree in moving_sum"):
        moving_sum(partial, carried, refreshed, degree[1:])
