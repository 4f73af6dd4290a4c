"""Checks of partitioner settings, run by every config's ``__post_init__``.

A config that cannot work (``k = 0``, a negative imbalance, zero passes) fails
when it is built, naming the field, not deep inside the algorithm (a negative
imbalance used to end in a ``ZeroDivisionError`` in the initial bisection).

Examples:
    >>> check_settings("LDGPartitioner", ints={"k": 2, "passes": 1})
    >>> check_settings("LDGPartitioner", floats={"imbalance": -1.0})
    Traceback (most recent call last):
    ...
    strata.partition.errors.PartitionError: imbalance in LDGPartitioner: expected imbalance >= 0 (a finite number), got -1.0.
"""  # noqa: E501

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

from strata.partition.errors import PartitionError

#: The smallest value of each setting, by field name; names not listed need >= 1.
_MINIMUM: dict[str, float] = {
    "seed": 0,
    "imbalance": 0,
    "edge_imbalance": 0,
    "fm_passes": 0,
    "fm_limit": 0,
    "fm_max_nodes": 0,
    "vcycles": 0,
    "halo_hops": 0,
    "decay": 0,
    "lam": 0,
    "eps": 0,
    "gamma": 0,
    "alpha_growth": 0,
}


def check_settings(
    where: str,
    *,
    ints: Mapping[str, object] | None = None,
    floats: Mapping[str, object] | None = None,
) -> None:
    """Raise :class:`PartitionError` naming the first setting out of range.

    Integer settings must be integers (``bool`` is refused) and floats finite
    numbers; each is at least its ``_MINIMUM`` (1 unless listed). ``None`` means
    "use the default" and is skipped.
    """
    for name, value in (ints or {}).items():
        if value is None:
            continue
        low = int(_MINIMUM.get(name, 1))
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or value < low
        ):
            raise PartitionError.build(
                name, where, f"{name} >= {low} (an integer)", repr(value)
            )
    for name, number in (floats or {}).items():
        if number is None:
            continue
        low_f = _MINIMUM.get(name, 1)
        if (
            isinstance(number, bool)
            or not isinstance(number, numbers.Real)
            or not math.isfinite(float(number))
            or number < low_f
        ):
            bound = int(low_f) if float(low_f).is_integer() else low_f
            raise PartitionError.build(
                name, where, f"{name} >= {bound} (a finite number)", repr(number)
            )
