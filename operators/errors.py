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

from strata.storage.errors import format_error


class OperatorError(ValueError):
    """Bad input to a GNN kernel, layer or sampler (shapes, ids, configuration)."""

    @classmethod
    def build(
        cls, subject: str, where: str, expected: str, got: str, hint: str | None = None
    ) -> OperatorError:
        """Create the error from the template's parts."""
        return cls(format_error(subject, where, expected, got, hint))
