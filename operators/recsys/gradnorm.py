"""GradNorm loss balancing exactly as ``e2egrec.md`` §4.4 (after Chen et al. 2018).

The task weights ``w`` live outside the model, start at 1 and sum to ``|T|``. Each
step measures every task's gradient norm on the shared layer ``W`` (the encoder's
final projection), ``g_t = ||dL_t/dW||``, and with ``G = w * g``:

```
ratio  = (L / L_base) / mean(L / L_base)      # L_base: mean loss of the first 10 steps
target = mean(G) * ratio ** alpha              # a constant
dw     = sign(G - target) * g                  # d/dw_t of sum_t |G_t - target_t|
w      = clamp(w - lr * dw, min=floor); w = w * |T| / sum(w)
```

Because ``G_t = w_t g_t``, ``dw`` is the exact derivative of the GradNorm objective
and no second-order (``create_graph=True``) pass is needed. During the first
``warmup`` steps ``L_base`` is the mean of the losses seen so far.

Under a gang, a :class:`Collective` all-reduces (means) each task's gradient of
``W`` **before** its norm (the norm of the mean is not the mean of the norms), and
the task losses, so every rank computes the same ``w``. The ``autograd.grad`` calls
only read gradients: they do not run ``AccumulateGrad``, so they neither trigger
nor double-count DDP's bucketed reduction, which happens in the later
``backward()`` of ``sum(w * L)``.

References:
    Zhao Chen, Vijay Badrinarayanan, Chen-Yu Lee, Andrew Rabinovich. *GradNorm:
    Gradient Normalization for Adaptive Loss Balancing in Deep Multitask
    Networks*. ICML 2018 (arXiv 1711.02257).

Examples:
    >>> import torch
    >>> W = torch.nn.Parameter(torch.ones(2, 2))
    >>> balancer = GradNorm(("a", "b"))
    >>> losses = [(W * 2).sum(), (W * 0.5).sum()]
    >>> total = balancer.balance(losses, W)
    >>> round(float(balancer.weights.sum()), 6)
    2.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from strata.operators.errors import check

__all__ = ["Collective", "GradNorm", "GradNormConfig", "IdentityCollective"]


class Collective(Protocol):
    """What GradNorm needs from a gang: a mean all-reduce of one tensor."""

    def allreduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """The element-wise mean of ``tensor`` over all workers (on every worker)."""
        ...


class IdentityCollective:
    """The collective of a single worker: the mean of one tensor is itself."""

    def allreduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """Return ``tensor`` unchanged."""
        return tensor


@dataclass(frozen=True, slots=True)
class GradNormConfig:
    """GradNorm settings (§4.4).

    Attributes:
        alpha: restoring-force exponent (1.5).
        lr: learning rate of the weights (0.025).
        floor: minimum weight before renormalising (0.05).
        warmup: steps whose mean loss is ``L_base`` (10).
        fixed: fixed weights instead of GradNorm (A2's 1 : 1 : 0.1), or ``None``.
    """

    alpha: float = 1.5
    lr: float = 0.025
    floor: float = 0.05
    warmup: int = 10
    fixed: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        check(self.lr >= 0, "lr", "GradNormConfig", ">= 0", self.lr)
        check(self.floor >= 0, "floor", "GradNormConfig", ">= 0", self.floor)
        check(self.warmup >= 1, "warmup", "GradNormConfig", ">= 1", self.warmup)


def weight_gradient(
    weights: torch.Tensor,
    grad_norms: torch.Tensor,
    losses: torch.Tensor,
    base: torch.Tensor,
    alpha: float,
) -> torch.Tensor:
    """The closed-form ``d/dw sum_t |w_t g_t - target_t|`` (target held constant).

    Examples:
        >>> w, g = torch.tensor([1.0, 1.0]), torch.tensor([2.0, 1.0])
        >>> weight_gradient(w, g, torch.ones(2), torch.ones(2), 1.5).tolist()
        [2.0, -1.0]
    """
    scaled = weights * grad_norms
    ratio = losses / base
    ratio = ratio / ratio.mean()
    target = scaled.mean() * ratio**alpha
    return torch.sign(scaled - target) * grad_norms


def renormalise(weights: torch.Tensor, floor: float) -> torch.Tensor:
    """Clamp to ``floor``, then rescale to sum ``|T|``, keeping floored weights.

    The plain ``w * |T| / sum(w)`` of §4.4 when no weight is below the floor after
    it (the usual case). When rescaling would push a clamped weight under the
    floor again, those weights stay at the floor and the others share the rest,
    so both invariants hold: ``min(w) >= floor`` and ``sum(w) == |T|``.

    Examples:
        >>> w = renormalise(torch.tensor([2.0, 1.5, -1.0], dtype=torch.float64), 0.05)
        >>> [round(x, 4) for x in w.tolist()]
        [1.6857, 1.2643, 0.05]
    """
    n = weights.shape[0]
    w = torch.clamp(weights, min=floor)
    w = w * n / w.sum()
    pinned = torch.zeros(n, dtype=torch.bool)
    while bool((w < floor).any()):
        pinned |= w < floor
        free = ~pinned
        w = torch.where(pinned, torch.full_like(w, floor), w)
        w[free] = w[free] * (n - floor * int(pinned.sum())) / w[free].sum()
    return w


class GradNorm:
    """The task weights and their update; one instance per training run.

    Args:
        tasks: task names, in the order of the losses passed to :meth:`balance`.
        config: the settings.
        collective: the gang's all-reduce (identity on one worker).
    """

    def __init__(
        self,
        tasks: Sequence[str],
        config: GradNormConfig | None = None,
        collective: Collective | None = None,
    ) -> None:
        self.tasks = tuple(tasks)
        self.config = config or GradNormConfig()
        self.collective: Collective = collective or IdentityCollective()
        n = len(self.tasks)
        fixed = self.config.fixed
        if fixed is not None:
            check(len(fixed) == n, "fixed", "GradNorm", f"{n} weights", fixed)
        start = torch.ones(n) if fixed is None else torch.tensor(fixed)
        self.weights = start.to(torch.float64)
        self.base_sum = torch.zeros(n, dtype=torch.float64)
        self.steps = 0
        self.last_grad_norms = torch.zeros(n, dtype=torch.float64)

    @property
    def adaptive(self) -> bool:
        """Whether the weights are updated (GradNorm) or fixed."""
        return self.config.fixed is None

    @property
    def base(self) -> torch.Tensor:
        """``L_base``: the mean loss over the first ``warmup`` steps (so far)."""
        return self.base_sum / max(min(self.steps, self.config.warmup), 1)

    def weighted(self, losses: Sequence[torch.Tensor]) -> torch.Tensor:
        """``sum(w * L)`` with the current weights as constants (no update)."""
        weights = self.weights.to(losses[0].dtype).to(losses[0].device)
        total = weights[0] * losses[0]
        for w, loss in zip(weights[1:], losses[1:], strict=True):
            total = total + w * loss
        return total

    def balance(
        self, losses: Sequence[torch.Tensor], shared: torch.Tensor
    ) -> torch.Tensor:
        """The weighted total loss to back-propagate; updates the weights.

        Args:
            losses: one scalar loss per task, in :attr:`tasks` order.
            shared: the shared layer's weight ``W`` (a leaf the losses depend on).

        Returns:
            ``sum(w * L)`` with the weights of this step (as constants).
        """
        total = self.weighted(losses)
        if not self.adaptive:
            return total
        norms = []
        for loss in losses:
            grads: tuple[torch.Tensor | None, ...] = torch.autograd.grad(
                loss, shared, retain_graph=True, allow_unused=True
            )
            found = grads[0]
            grad = torch.zeros_like(shared) if found is None else found.detach()
            grad = self.collective.allreduce_mean(grad)
            norms.append(grad.double().norm())
        g = torch.stack(norms).cpu()
        values = torch.stack([loss.detach().double() for loss in losses])
        values = self.collective.allreduce_mean(values).cpu()
        if self.steps < self.config.warmup:
            self.base_sum += values
        self.steps += 1
        dw = weight_gradient(self.weights, g, values, self.base, self.config.alpha)
        self.weights = renormalise(
            self.weights - self.config.lr * dw, self.config.floor
        )
        self.last_grad_norms = g
        return total

    def state_dict(self) -> dict[str, Any]:
        """The complete state (tensors and numbers) for a checkpoint."""
        return {
            "weights": self.weights.clone(),
            "base_sum": self.base_sum.clone(),
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.weights = state["weights"].clone().to(torch.float64)
        self.base_sum = state["base_sum"].clone().to(torch.float64)
        self.steps = int(state["steps"])
