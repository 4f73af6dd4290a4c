"""The Emma option's settings, :class:`EmmaConfig`, and the combinations it rejects.

Emma (``emma.md``) trains partition-parallel with *source chunking*: iteration
``t`` refreshes the messages of the sources in chunk ``t mod S`` only, and every
destination keeps a moving (stale) aggregate for the rest. It is approximate;
evaluation is always exact.

Three combinations are rejected when a run is built, each by an error that names
both settings (:func:`check_emma`):

* Emma with HongTu (``mode='hongtu'``): Emma's chunks are *source* sets and
  HongTu's *destination* sets; combining them needs its own plan and buffers.
* Emma with max (or min) aggregation: a maximum has no decayed running form.
* Emma with BatchNorm anywhere in the model: per-worker batch statistics make
  the result depend on the worker count (breaking K-invariance); use LayerNorm.

Examples:
    >>> EmmaConfig(splits=5)
    EmmaConfig(splits=5, redraw_every=5, refresh_every=25, warm_start=False, seed=0)
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

from dataclasses import dataclass
from typing import Any

import torch

from strata.operators.errors import OperatorError

_WHERE = "EmmaConfig"


@dataclass(frozen=True, slots=True)
class EmmaConfig:
    """Source chunking with moving aggregation (see the module docstring).

    Attributes:
        splits: S, the number of source chunks; iteration ``t`` refreshes chunk
            ``t mod S``. 1 is exact training.
        redraw_every: iterations between redraws of the chunk ids (None: S, so
            each cycle aggregates every edge exactly once). Must be a multiple
            of S: a redraw inside a cycle would skip some edges and repeat others.
        refresh_every: iterations between exact passes that overwrite every
            moving buffer (None: S * S, the reference's cadence; 0: never).
        warm_start: fill the buffers with one exact pass before the first
            iteration (our addition; the reference starts from zeros).
        seed: seeds the chunk ids, ``chunk(v, cycle) = mix64(seed, cycle, v) mod S``.
    """

    splits: int = 10
    redraw_every: int | None = None
    refresh_every: int | None = None
    warm_start: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        def need(
            ok: bool, subject: str, expected: str, got: Any, hint: str = ""
        ) -> None:
            if not ok:
                raise OperatorError.build(subject, _WHERE, expected, got, hint or None)

        s = self.splits
        need(isinstance(s, int) and s >= 1, "splits", "splits >= 1", f"splits={s}")
        if self.redraw_every is None:
            object.__setattr__(self, "redraw_every", s)
        if self.refresh_every is None:
            object.__setattr__(self, "refresh_every", s * s)
        r = self.redraw_every
        need(
            isinstance(r, int) and r >= 1 and r % s == 0,
            "redraw_every",
            f"a positive multiple of splits ({s})",
            f"redraw_every={r}",
            "chunk ids are drawn once per cycle of S iterations (emma.md pitfall 3); "
            "leave it None for S",
        )
        f = self.refresh_every
        need(
            isinstance(f, int) and f >= 0,
            "refresh_every",
            "refresh_every >= 0 (0: never)",
            f"refresh_every={f}",
        )
        need(self.seed >= 0, "seed", "seed >= 0", f"seed={self.seed}")

    def cycle_of(self, iteration: int) -> int:
        """The chunk-id draw iteration ``iteration`` uses."""
        assert self.redraw_every is not None
        return iteration // self.redraw_every

    def chunk_of(self, iteration: int) -> int:
        """The chunk iteration ``iteration`` refreshes (``iteration mod S``)."""
        return iteration % self.splits

    def refreshes_before(self, iteration: int) -> bool:
        """Whether an exact refresh runs before ``iteration``.

        One runs after every ``refresh_every`` completed iterations (none before
        the first; ``refresh_every = 0`` never refreshes).
        """
        f = self.refresh_every
        return bool(f) and iteration > 0 and iteration % f == 0  # type: ignore[operator]


def check_emma(
    emma: EmmaConfig | None,
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
