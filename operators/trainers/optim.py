"""Optimisers, learning-rate schedules and gradient clipping of a training run.

The optimiser is one value of a tagged union, :data:`Optimizer` (``Adam``
(default), ``AdamW`` or ``SGD``), and so is the schedule, :data:`Schedule`
(``Constant`` (default), ``StepDecay`` or ``Cosine``): on a command line
``--set train.optimizer=sgd --set train.optimizer.momentum=0.9`` and
``--set train.schedule=cosine``. The learning rate and weight decay stay
:class:`~strata.operators.trainers.TrainConfig` fields (``lr``, ``weight_decay``).

A schedule is a pure function of the epoch (:meth:`Cosine.factor`), applied by
:func:`set_epoch_lr` before each epoch: a resumed run needs no scheduler state,
and every trainer (single device or gang) applies the same rates.

Examples:
    >>> from torch import nn
    >>> model = nn.Linear(4, 2)
    >>> opt = make_optimizer(model, lr=0.1, weight_decay=0.0, optimizer=SGD(0.9))
    >>> type(opt).__name__, opt.param_groups[0]["momentum"]
    ('SGD', 0.9)
    >>> set_epoch_lr(opt, 0.1, StepDecay(step=10, gamma=0.5), epoch=25)
    >>> opt.param_groups[0]["lr"]
    0.025
    >>> round(Cosine(min_factor=0.0).factor(epoch=50, epochs=100), 6)
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from strata.operators.errors import check

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "Constant",
    "Cosine",
    "Optimizer",
    "Schedule",
    "StepDecay",
    "clip_gradients",
    "first_layer",
    "make_optimizer",
    "set_epoch_lr",
]


@dataclass(frozen=True, slots=True)
class Adam:
    """Adam (Kingma & Ba, ICLR 2015, arXiv:1412.6980); weight decay is L2.

    Attributes:
        beta1: decay of the first-moment average.
        beta2: decay of the second-moment average.
        eps: added to the denominator.
    """

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    #: The torch optimiser these settings configure.
    torch_class: ClassVar[type[torch.optim.Optimizer]] = torch.optim.Adam

    def __post_init__(self) -> None:
        _check_betas(self.beta1, self.beta2, self.eps, type(self).__name__)

    def build(self, groups: list[dict[str, Any]], lr: float) -> torch.optim.Optimizer:
        """The torch optimiser over parameter ``groups``."""
        return self.torch_class(  # type: ignore[call-arg]
            groups, lr=lr, betas=(self.beta1, self.beta2), eps=self.eps
        )


@dataclass(frozen=True, slots=True)
class AdamW(Adam):
    """AdamW: decoupled weight decay (Loshchilov & Hutter, ICLR 2019, arXiv:1711.05101).

    Attributes:
        beta1: decay of the first-moment average.
        beta2: decay of the second-moment average.
        eps: added to the denominator.
    """

    torch_class: ClassVar[type[torch.optim.Optimizer]] = torch.optim.AdamW


@dataclass(frozen=True, slots=True)
class SGD:
    """Stochastic gradient descent, with optional (Nesterov) momentum.

    Attributes:
        momentum: momentum factor (0: plain SGD).
        nesterov: use Nesterov momentum (needs momentum > 0).
    """

    momentum: float = 0.0
    nesterov: bool = False

    def __post_init__(self) -> None:
        check(0 <= self.momentum < 1, "momentum", "SGD", "0 <= m < 1", self.momentum)
        check(
            not self.nesterov or self.momentum > 0,
            "nesterov",
            "SGD",
            "momentum > 0 with nesterov",
            f"momentum={self.momentum}",
        )

    def build(self, groups: list[dict[str, Any]], lr: float) -> torch.optim.Optimizer:
        """The torch optimiser over parameter ``groups``."""
        return torch.optim.SGD(
            groups, lr=lr, momentum=self.momentum, nesterov=self.nesterov
        )


Optimizer = Adam | AdamW | SGD


@dataclass(frozen=True, slots=True)
class Constant:
    """The learning rate ``lr`` at every epoch."""

    def factor(self, epoch: int, epochs: int) -> float:
        """Multiplier of ``lr`` at ``epoch`` (of ``epochs``)."""
        return 1.0


@dataclass(frozen=True, slots=True)
class StepDecay:
    """``lr * gamma ** (epoch // step)`` (torch's ``StepLR``).

    Attributes:
        step: epochs between decays.
        gamma: multiplier per decay.
    """

    step: int = 50
    gamma: float = 0.5

    def __post_init__(self) -> None:
        check(self.step >= 1, "step", "StepDecay", "step >= 1", self.step)
        check(0 < self.gamma <= 1, "gamma", "StepDecay", "0 < gamma <= 1", self.gamma)

    def factor(self, epoch: int, epochs: int) -> float:
        """Multiplier of ``lr`` at ``epoch`` (of ``epochs``)."""
        return float(self.gamma ** (epoch // self.step))


@dataclass(frozen=True, slots=True)
class Cosine:
    """Cosine annealing from ``lr`` to ``lr * min_factor`` over the run's epochs.

    Attributes:
        min_factor: the last epoch's rate as a fraction of ``lr``.
        warmup: epochs of linear warm-up from ``lr / (warmup + 1)`` first.
    """

    min_factor: float = 0.0
    warmup: int = 0

    def __post_init__(self) -> None:
        where = "Cosine"
        factor = self.min_factor
        check(0 <= factor <= 1, "min_factor", where, "in [0, 1]", factor)
        check(self.warmup >= 0, "warmup", where, "warmup >= 0", self.warmup)

    def factor(self, epoch: int, epochs: int) -> float:
        """Multiplier of ``lr`` at ``epoch`` (of ``epochs``)."""
        if epoch < self.warmup:
            return (epoch + 1) / (self.warmup + 1)
        span = max(epochs - self.warmup, 1)
        progress = min((epoch - self.warmup) / span, 1.0)
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return self.min_factor + (1 - self.min_factor) * cosine


Schedule = Constant | StepDecay | Cosine


def first_layer(model: nn.Module) -> nn.Module:
    """The model's first layer: ``convs[0]``, else its first child with parameters.

    Wrappers with one child (an adapter, a ``ModuleList``) are looked through.
    """
    while True:
        convs = getattr(model, "convs", None)
        if isinstance(convs, nn.ModuleList) and len(convs) > 0:
            return convs[0]
        children = [c for c in model.children() if any(True for _ in c.parameters())]
        if not children:
            return model
        if len(children) > 1 and not isinstance(model, nn.ModuleList):
            return children[0]
        model = children[0]


def make_optimizer(
    model: nn.Module,
    *,
    lr: float,
    weight_decay: float,
    optimizer: Optimizer | None = None,
    first_only: bool = False,
) -> torch.optim.Optimizer:
    """The optimiser, with weight decay on every parameter or the first layer only.

    Args:
        model: the model to optimise.
        lr: the (initial) learning rate.
        weight_decay: L2 (Adam, SGD) or decoupled (AdamW) weight decay.
        optimizer: which optimiser, with its settings (None: Adam).
        first_only: decay only :func:`first_layer`'s parameters.
    """
    groups: list[dict[str, Any]]
    if first_only:
        first = list(first_layer(model).parameters())
        seen = {id(p) for p in first}
        rest = [p for p in model.parameters() if id(p) not in seen]
        groups = [
            {"params": first, "weight_decay": weight_decay},
            {"params": rest, "weight_decay": 0.0},
        ]
    else:
        groups = [{"params": list(model.parameters()), "weight_decay": weight_decay}]
    return (optimizer or Adam()).build(groups, lr)


def set_epoch_lr(
    optimizer: torch.optim.Optimizer,
    lr: float,
    schedule: Schedule,
    epoch: int,
    epochs: int = 0,
) -> None:
    """Set every parameter group's rate to ``lr * schedule.factor(epoch, epochs)``."""
    rate = lr * schedule.factor(epoch, epochs)
    for group in optimizer.param_groups:
        group["lr"] = rate


def clip_gradients(parameters: Iterable[torch.Tensor], max_norm: float | None) -> None:
    """Scale gradients to a total 2-norm of at most ``max_norm`` (None: no clipping)."""
    if max_norm is not None:
        torch.nn.utils.clip_grad_norm_(parameters, max_norm)


def _check_betas(beta1: float, beta2: float, eps: float, where: str) -> None:
    check(0 <= beta1 < 1, "beta1", where, "0 <= beta1 < 1", beta1)
    check(0 <= beta2 < 1, "beta2", where, "0 <= beta2 < 1", beta2)
    check(eps > 0, "eps", where, "eps > 0", eps)
