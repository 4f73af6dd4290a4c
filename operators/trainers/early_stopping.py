"""Early stopping on a validation metric, with the best epoch remembered.

An epoch *improves* when its metric is strictly better than every earlier one (lower
for a loss, higher for an accuracy); ties keep the earlier epoch. After ``patience``
epochs in a row without improvement the run should stop (``patience=0``: never). A
NaN metric (e.g. no validation nodes) never improves, so it never stops a run either
way: with no validation nodes, training runs all its epochs and the last one counts.

The state is three numbers, saved in checkpoints, so a resumed run stops exactly
where an uninterrupted one would.

Examples:
    >>> stopper = EarlyStopping(patience=2, mode="min")
    >>> [stopper.update(e, v) for e, v in enumerate([0.9, 0.7, 0.8, 0.7, 0.75])]
    [True, True, False, False, False]
    >>> stopper.should_stop, stopper.best_epoch, stopper.best_value
    (True, 1, 0.7)
"""

from __future__ import annotations

import math
from typing import Any, Literal


class EarlyStopping:
    """Tracks the best value of a metric and the epochs since it last improved.

    Args:
        patience: epochs without improvement before :attr:`should_stop` (0: never).
        mode: ``min`` for losses, ``max`` for accuracies.
    """

    def __init__(self, patience: int, mode: Literal["min", "max"]) -> None:
        self.patience = patience
        self.mode = mode
        self.best_value = math.nan
        self.best_epoch = -1
        self.bad_epochs = 0

    def update(self, epoch: int, value: float) -> bool:
        """Record ``epoch``'s metric; return whether it improved on the best."""
        if math.isnan(self.best_value):
            improved = not math.isnan(value)
        elif self.mode == "min":
            improved = value < self.best_value
        else:
            improved = value > self.best_value
        if improved:
            self.best_value = value
            self.best_epoch = epoch
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        return improved

    @property
    def should_stop(self) -> bool:
        """Whether ``patience`` epochs passed without improvement."""
        return self.patience > 0 and self.bad_epochs >= self.patience

    def state_dict(self) -> dict[str, Any]:
        """The state, for a checkpoint."""
        return {
            "best_value": self.best_value,
            "best_epoch": self.best_epoch,
            "bad_epochs": self.bad_epochs,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the state saved by :meth:`state_dict`."""
        self.best_value = float(state["best_value"])
        self.best_epoch = int(state["best_epoch"])
        self.bad_epochs = int(state["bad_epochs"])
