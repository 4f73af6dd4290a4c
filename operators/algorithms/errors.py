"""The error graph algorithms raise on bad input (a leaf of OperatorError).

Examples:
    >>> print(AlgorithmError.build("source", "bfs", "0 <= source < 3", "7"))
    source in bfs: expected 0 <= source < 3, got 7.
"""

from __future__ import annotations

from strata.operators.errors import OperatorError


class AlgorithmError(OperatorError):
    """Bad input to a graph algorithm: a source not in the graph, negative weights."""
