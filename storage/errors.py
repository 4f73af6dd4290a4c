"""Errors raised by the storage package, in the project's one error template.

Every message reads
``<subject> in <where>: expected <expected>, got <got>. Hint: <hint>``, so users can
scan errors from every layer the same way (see STYLE.md, Errors).

Examples:
    >>> print(format_error("src", "CSRGraph.from_edges", "ids >= 0", "-1 at 3"))
    src in CSRGraph.from_edges: expected ids >= 0, got -1 at 3.
"""

from __future__ import annotations


def format_error(
    subject: str, where: str, expected: str, got: str, hint: str | None = None
) -> str:
    """Render one error message in the project template."""
    message = f"{subject} in {where}: expected {expected}, got {got}."
    if hint:
        message += f" Hint: {hint}"
    return message


class StorageError(ValueError):
    """Base class of storage errors: bad input or damaged stored data."""

    @classmethod
    def build(
        cls, subject: str, where: str, expected: str, got: str, hint: str | None = None
    ) -> StorageError:
        """Create the error from the template's parts."""
        return cls(format_error(subject, where, expected, got, hint))


class GraphError(StorageError):
    """A graph's arrays are invalid (ids out of range, mismatched lengths, dtypes)."""


class DatasetError(StorageError):
    """A dataset directory is missing, truncated, tampered with or malformed."""


class FeatureError(StorageError):
    """A feature tensor or id array does not fit the store's schema."""


class FormatError(StorageError):
    """An input file (edge list, Planetoid, Parquet) cannot be parsed."""
