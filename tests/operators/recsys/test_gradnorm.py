"""GradNorm (e2egrec.md §4.4): the closed form is the autograd derivative."""

from __future__ import annotations

import pytest
import torch

from strata.operators.recsys.gradnorm import (
    GradNorm,
    GradNormConfig,
    renormalise,
    weight_gradient,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _autograd_weight_gradient(
    w: torch.Tensor,
    g: torch.Tensor,
    losses: torch.Tensor,
    base: torch.Tensor,
    alpha: float,
) -> torch.Tensor:
    """d/dw of sum_t |w_t g_t - target_t|, target a constant (Chen et al. 2018)."""
    w = w.clone().requires_grad_(True)
    scaled = w * g
    ratio = losses / base
    ratio = ratio / ratio.mean()
    target = (scaled.mean() * ratio**alpha).detach()
    objective = (scaled - target).abs().sum()
    (grad,) = torch.autograd.grad(objective, w)
    return grad


@pytest.mark.parametrize("seed", range(5))
def test_closed_form_equals_autograd_of_the_objective(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    w = torch.rand(3, generator=gen, dtype=torch.float64) * 2 + 0.1
    g = torch.rand(3, generator=gen, dtype=torch.float64) * 5
    losses = torch.rand(3, generator=gen, dtype=torch.float64) + 0.1
    base = torch.rand(3, generator=gen, dtype=torch.float64) + 0.1
    closed = weight_gradient(w, g, losses, base, 1.5)
    torch.testing.assert_close(
        closed, _autograd_weight_gradient(w, g, losses, base, 1.5)
    )


def test_balance_measures_real_gradient_norms_on_the_shared_layer() -> None:
    torch.manual_seed(0)
    shared = torch.nn.Parameter(torch.randn(4, 4, dtype=torch.float64))
    x = torch.randn(8, 4, dtype=torch.float64)
    balancer = GradNorm(("a", "b", "c"))
    h = x @ shared
    losses = [h.pow(2).mean(), h.sum() * 0.01, (h - 1).abs().mean() * 3]
    total = balancer.balance(losses, shared)
    expected = torch.stack(
        [
            torch.autograd.grad(loss, shared, retain_graph=True)[0].norm()
            for loss in losses
        ]
    )
    torch.testing.assert_close(balancer.last_grad_norms, expected)
    torch.testing.assert_close(total, sum(losses))  # first step: weights all 1
    # The update is w - lr * closed form, renormalised (no floor binds here).
    dw = weight_gradient(
        torch.ones(3, dtype=torch.float64),
        expected,
        torch.stack([x.detach() for x in losses]),
        torch.stack([x.detach() for x in losses]),
        1.5,
    )
    step = torch.ones(3, dtype=torch.float64) - 0.025 * dw
    torch.testing.assert_close(balancer.weights, step * 3 / step.sum())


def test_weights_stay_above_floor_and_sum_to_task_count() -> None:
    torch.manual_seed(1)
    shared = torch.nn.Parameter(torch.randn(3, 3))
    # Aggressive learning rate: the floor must bind and survive renormalising.
    balancer = GradNorm(("big", "small"), GradNormConfig(lr=5.0, floor=0.05, warmup=2))
    for step in range(30):
        h = torch.randn(5, 3) @ shared
        losses = [h.pow(2).mean() * (10 + step), h.abs().mean() * 0.01]
        balancer.balance(losses, shared)
        assert float(balancer.weights.min()) >= 0.05 - 1e-12
        assert float(balancer.weights.max()) <= 2.0
        assert float(balancer.weights.sum()) == pytest.approx(2.0)
    assert balancer.steps == 30
    torch.testing.assert_close(balancer.base, balancer.base_sum / 2)


def test_renormalise_keeps_both_invariants() -> None:
    w = renormalise(torch.tensor([5.0, 0.0, -2.0, 0.01], dtype=torch.float64), 0.1)
    assert float(w.sum()) == pytest.approx(4.0)
    assert float(w.min()) >= 0.1 - 1e-12
    # No floor binding: plain w * |T| / sum(w), as in the spec.
    torch.testing.assert_close(
        renormalise(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), 0.05),
        torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64),
    )


def test_fixed_weights_do_not_move_and_state_round_trips() -> None:
    shared = torch.nn.Parameter(torch.ones(2, 2))
    fixed = GradNorm(("a", "b", "c"), GradNormConfig(fixed=(1.0, 1.0, 0.1)))
    losses = [shared.sum(), shared.sum() * 2, shared.sum() * 3]
    total = fixed.balance(losses, shared)
    assert float(total.detach()) == pytest.approx(4 + 8 + 1.2)
    assert fixed.weights.tolist() == pytest.approx([1.0, 1.0, 0.1])
    adaptive = GradNorm(("a", "b"))
    adaptive.balance([shared.sum(), (shared * 3).sum()], shared)
    clone = GradNorm(("a", "b"))
    clone.load_state_dict(adaptive.state_dict())
    torch.testing.assert_close(clone.weights, adaptive.weights)
    assert clone.steps == 1


class _Doubling:
    """A fake 2-worker gang whose other worker sent the same gradient times 3."""

    def allreduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        return (tensor + 3 * tensor) / 2


def test_collective_reduces_gradients_before_the_norm() -> None:
    shared = torch.nn.Parameter(torch.ones(2, 2, dtype=torch.float64))
    balancer = GradNorm(("a", "b"), collective=_Doubling())
    balancer.balance([shared.sum(), (shared * 2).sum()], shared)
    torch.testing.assert_close(
        balancer.last_grad_norms, torch.tensor([2.0 * 2, 4.0 * 2], dtype=torch.float64)
    )
