"""Errors raised by the partition package, in the project's one error template.

Examples:
    >>> err = PartitionError.build("k", "MultilevelPartitioner", "1 <= k <= 10", "0")
    >>> print(err)
    k in MultilevelPartitioner: expected 1 <= k <= 10, got 0.
"""

from __future__ import annotations

from strata.storage.errors import format_error


class PartitionError(ValueError):
    """Bad input to a partitioner: k out of range, empty graph, invalid weights."""

    @classmethod
    def build(
        cls, subject: str, where: str, expected: str, got: str, hint: str | None = None
    ) -> PartitionError:
        """Create the error from the template's parts."""
        return cls(format_error(subject, where, expected, got, hint))


class PartitionKeyError(KeyError):
    """A global id is neither owned nor a halo vertex of the asked part."""

    def __str__(self) -> str:
        # KeyError quotes its argument; the template reads better unquoted.
        return str(self.args[0]) if self.args else ""
