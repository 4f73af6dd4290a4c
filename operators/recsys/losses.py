"""The three task losses of ``e2egrec.md`` §4.3 (Strata's choices).

* ``rank``: BPR, ``-log sigmoid(score(u, i+) - score(u, i-))``, one uniform
  negative per positive;
* ``long_view``: binary cross-entropy on the label, from logits;
* ``gfae``: masked feature reconstruction, the MSE between a decoder's output and
  the standardised features of the masked nodes only (GraphMAE-style; without the
  mask SAGE's self path makes reconstruction trivial).

Examples:
    >>> import torch
    >>> round(float(bpr_loss(torch.tensor([2.0]), torch.tensor([2.0]))), 4)
    0.6931
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["bce_loss", "bpr_loss", "masked_reconstruction_loss"]


def bpr_loss(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """Mean BPR loss ``softplus(neg - pos) = -log sigmoid(pos - neg)``."""
    return F.softplus(neg - pos).mean()


def bce_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of ``logits`` against 0/1 ``labels``."""
    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def masked_reconstruction_loss(
    decoded: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean squared error over the rows selected by the bool ``mask``.

    Shapes:
        decoded, target: ``[n, f]``; mask: ``[n]``.

    Returns:
        The mean over masked rows and columns (0 when no row is masked).
    """
    if not bool(mask.any()):
        return decoded.sum() * 0.0
    return F.mse_loss(decoded[mask], target[mask])
