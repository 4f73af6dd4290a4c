"""Errors raised by the operators package, in the project's one error template.

Every message reads
``<subject> in <where>: expected <expected>, got <got>. Hint: <hint>``
(see STYLE.md, Errors, and :func:`strata.storage.errors.format_error`).

Examples:
    >>> err = OperatorError.build("x", "GCNConv.forward", "4 rows", "3 rows")
    >>> print(err)
    x in GCNConv.forward: expected 4 rows, got 3 rows.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from strata.storage.errors import format_error

E = TypeVar("E", bound=enum.Enum)


class OperatorError(ValueError):
    """Bad input to a GNN kernel, layer or sampler (shapes, ids, configuration)."""

    @classmethod
    def build(
        cls, subject: str, where: str, expected: str, got: str, hint: str | None = None
    ) -> OperatorError:
        """Create the error from the template's parts."""
        return cls(format_error(subject, where, expected, got, hint))


def check(
    ok: bool,
    subject: str,
    where: str,
    expected: str,
    got: object,
    hint: str | None = None,
) -> None:
    """Raise :class:`OperatorError` from the template's parts unless ``ok``.

    Examples:
        >>> check(2 > 1, "k", "Config", "k > 1", 2)
    """
    if not ok:
        raise OperatorError.build(subject, where, expected, str(got), hint or None)


def as_enum(kind: type[E], value: Any, subject: str, where: str) -> E:
    """``value`` as a member of ``kind`` (a member, or its value, e.g. from text).

    Raises:
        OperatorError: naming the choices, for any other value.
    """
    try:
        return kind(value)
    except ValueError:
        choices = [m.value for m in kind]
        raise OperatorError.build(
            subject, where, f"one of {choices}", repr(value)
        ) from None
