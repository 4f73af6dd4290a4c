"""The combinations the Emma mode rejects (:func:`check_emma`).

The settings are the mode value
:class:`~strata.operators.trainers.distributed.modes.Emma` (``EmmaConfig`` is
its earlier name, kept as an alias). Emma (``emma.md``) trains partition-parallel
with *source chunking*: iteration
``t`` refreshes the messages of the sources in chunk ``t mod S`` only, and every
destination keeps a moving (stale) aggregate for the rest. It is approximate;
evaluation is always exact.

Three combinations are rejected when a run is built, each by an error that names
both settings (:func:`check_emma`):

* Emma with HongTu: Emma's chunks are *source* sets and HongTu's *destination*
  sets; combining them needs its own plan and buffers. With the mode one typed
  value this cannot be written; the check remains for the old
  ``EmmaTrainer(config, dist, emma)`` form.
* Emma with max (or min) aggregation: a maximum has no decayed running form.
* Emma with BatchNorm anywhere in the model: per-worker batch statistics make
  the result depend on the worker count (breaking K-invariance); use LayerNorm.

Examples:
    >>> EmmaConfig(splits=5)
    Emma(splits=5, redraw_every=5, refresh_every=25, warm_start=False, seed=0)
    >>> EmmaConfig(splits=4, refresh_every=0).refresh_every   # 0: never refresh
    0
    >>> EmmaConfig(splits=4, redraw_every=6)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.operators.errors.OperatorError: redraw_every in EmmaConfig: expected \
a positive \
multiple of splits (4), got redraw_every=6. Hint: ...
"""

from __future__ import annotations

import torch

from strata.operators.errors import OperatorError
from strata.operators.trainers.distributed.modes import Emma

#: The Emma mode's settings under their earlier name (a compatibility alias).
EmmaConfig = Emma


def check_emma(
    emma: Emma | None,
    *,
    mode: str,
    aggregation: str,
    model: torch.nn.Module | None = None,
    where: str = "EmmaTrainer",
) -> None:
    """Reject the combinations Emma does not support (see the module docstring).

    Args:
        emma: the Emma settings (None: nothing to check).
        mode: the distributed mode (``exact``, ``hongtu``).
        aggregation: the model's propagation kind (``gcn``, ``mean``, ``sum``,
            ``max``, ``min``).
        model: the built model, searched for BatchNorm layers.
        where: the component named in errors.

    Raises:
        OperatorError: naming both settings of a rejected combination.
    """
    if emma is None:
        return
    if mode != "exact":
        raise OperatorError.build(
            "mode",
            where,
            "mode='exact' with emma (Emma builds on partition-parallel training)",
            f"mode={mode!r} with emma=EmmaConfig(splits={emma.splits})",
            "Emma's chunks are source sets and HongTu's destination sets; run one "
            "of them",
        )
    if aggregation in ("max", "min"):
        raise OperatorError.build(
            "aggr",
            where,
            "a sum-like aggregation (gcn, mean, sum) with emma",
            f"aggr={aggregation!r} with emma=EmmaConfig(splits={emma.splits})",
            "a maximum has no decayed running form; use aggr='mean' or drop emma",
        )
    if model is not None:
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                raise OperatorError.build(
                    "norm",
                    where,
                    "no BatchNorm with emma (per-worker statistics break K-invariance)",
                    f"{type(module).__name__} at {name!r} with "
                    f"emma=EmmaConfig(splits={emma.splits})",
                    "use LayerNorm, as the reference does, or drop emma",
                )
