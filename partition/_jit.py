"""A typed front for ``numba.njit`` so mypy --strict keeps kernel signatures.

``numba`` ships no type hints, so a bare ``@numba.njit`` makes every kernel untyped
for mypy. :func:`njit` has the same behaviour and declares itself as returning the
function unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])


def njit(**options: Any) -> Callable[[F], F]:
    """``numba.njit(**options)``, typed as an identity decorator."""
    decorator: Callable[[F], F] = numba.njit(**options)
    return decorator
