"""What a round costs on the wire, the same for every mesh; and rank-order folds.

Every implementation counts a round the way :class:`ZmqMesh` sends it, so modelled
(``SimMesh``) and real counts match. A rank's arrays for one peer in one round
travel as messages of :mod:`strata.engine.net.frames`:

* ``n // CHUNK`` DATA messages of ``CHUNK`` arrays each, then
* one END message carrying a ``uint64[1]`` meta array (how many DATA messages came
  before it: the end-of-round marker with the frame count) and the remaining
  ``n % CHUNK`` arrays.

So a round with up to ``CHUNK - 1`` arrays for a peer is exactly one message, and
an empty one is one bare END marker of :data:`END_BYTES` bytes. A message's bytes
are those of its frames: a 24-byte fixed header, per array a 2-byte descriptor,
8 bytes per dimension and its ``nbytes`` (see :func:`message_bytes`). Traffic to
oneself is not counted. ``allreduce`` and ``barrier`` are exchanges (of the value
to every peer, and of nothing), so they are counted the same way.

Examples:
    >>> import numpy as np
    >>> END_BYTES
    42
    >>> round_cost([np.arange(4), np.zeros((2, 3), "f4")])  # (messages, bytes)
    (1, 126)
    >>> fold([np.array([1.0, 5.0]), np.array([2.0, 3.0])], "max").tolist()
    [2.0, 5.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from strata.engine.errors import format_where
from strata.engine.mesh.base import MeshOp, Tag

#: Most arrays in one message (the END message: meta + ``CHUNK - 1`` arrays).
CHUNK = 1024
#: The fixed header of every message.
HEADER_BYTES = 24
#: Bytes of a bare end-of-round marker (header + the ``uint64[1]`` meta array).
END_BYTES = HEADER_BYTES + 2 + 8 + 8
_KINDS = {"b": (1,), "u": (1, 2, 4, 8), "i": (1, 2, 4, 8), "f": (2, 4, 8), "c": (8, 16)}


def array_bytes(array: np.ndarray) -> int:
    """Bytes one array adds to a message: descriptor, dimensions, data."""
    return 2 + 8 * array.ndim + array.nbytes


def message_bytes(arrays: Sequence[np.ndarray]) -> int:
    """Bytes of one message carrying ``arrays`` (header included)."""
    return HEADER_BYTES + sum(2 + 8 * a.ndim + a.nbytes for a in arrays)


def round_cost(arrays: Sequence[np.ndarray]) -> tuple[int, int]:
    """``(messages, bytes)`` of sending ``arrays`` to one peer in one round."""
    if not arrays:
        return 1, END_BYTES
    full = len(arrays) // CHUNK
    return full + 1, full * HEADER_BYTES + END_BYTES + sum(
        2 + 8 * a.ndim + a.nbytes for a in arrays
    )


def chunks(arrays: Sequence[np.ndarray]) -> tuple[list[Sequence[np.ndarray]], int]:
    """Split ``arrays`` into the DATA messages' groups and the END message's rest.

    Returns:
        ``(data_groups, start)``: the END message carries ``arrays[start:]``.
    """
    full = len(arrays) // CHUNK
    groups = [arrays[i * CHUNK : (i + 1) * CHUNK] for i in range(full)]
    return groups, full * CHUNK


def check_outgoing(
    outgoing: Sequence[Sequence[np.ndarray]], size: int, rank: int, tag: Tag
) -> None:
    """Raise ``ValueError``/``TypeError`` unless ``outgoing`` fits the wire.

    One list per rank, of numpy arrays whose dtypes the frames carry (bool,
    fixed-width integers, float16/32/64, complex64/128).
    """
    where = f"mesh rank {rank}, round {tuple(tag)}"
    if len(outgoing) != size:
        raise ValueError(
            format_where(
                "outgoing", where, f"one list per rank ({size})", str(len(outgoing))
            )
        )
    for peer, arrays in enumerate(outgoing):
        for i, array in enumerate(arrays):
            if not isinstance(array, np.ndarray):
                raise TypeError(
                    format_where(
                        f"outgoing[{peer}][{i}]",
                        where,
                        "a numpy array",
                        type(array).__name__,
                    )
                )
            dtype = array.dtype
            if dtype.itemsize not in _KINDS.get(dtype.kind, ()):
                raise TypeError(
                    format_where(
                        f"outgoing[{peer}][{i}].dtype",
                        where,
                        "bool, a fixed-width integer, float or complex",
                        str(dtype),
                        "objects and strings never cross the mesh; encode them",
                    )
                )


def check_tag(tag: Tag, last: Tag | None, rank: int) -> Tag:
    """Return ``tag`` as a :class:`Tag`; raise unless it follows ``last``."""
    tag = Tag(int(tag[0]), int(tag[1]))
    if tag[0] < 0 or tag[1] < 0 or (last is not None and tag <= last):
        raise ValueError(
            format_where(
                "tag",
                f"mesh rank {rank}",
                f"non-negative and after the last round {tuple(last or (0, 0))}",
                str(tuple(tag)),
                "tags increase (superstep, round) and are the same on every rank",
            )
        )
    return tag


def fold(values: Sequence[np.ndarray], op: MeshOp) -> np.ndarray:
    """Combine ``values`` left to right (rank order): the same bits on every rank."""
    ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}.get(op)
    if ufunc is None:
        raise ValueError(
            format_where("op", "mesh allreduce", "'sum', 'min' or 'max'", repr(op))
        )
    result = np.array(values[0], copy=True)
    for value in values[1:]:
        if value.shape != result.shape or value.dtype != result.dtype:
            raise ValueError(
                format_where(
                    "allreduce value",
                    "mesh allreduce",
                    f"{result.dtype}{list(result.shape)} on every rank",
                    f"{value.dtype}{list(value.shape)}",
                )
            )
        ufunc(result, value, out=result)
    return result


class _Exchanging(Protocol):
    """What :class:`ExchangeCollectives` needs of the mesh it is mixed into."""

    @property
    def size(self) -> int: ...

    def exchange(
        self, outgoing: Sequence[Sequence[np.ndarray]], tag: Tag
    ) -> list[list[np.ndarray]]: ...


class ExchangeCollectives:
    """``allreduce`` and ``barrier`` as exchanges, for every mesh that has one.

    An allreduce sends the value to every peer and folds what came back in rank
    order (so the bits are the same on every rank and every mesh); a barrier is
    an exchange of nothing. Both are counted as the exchanges they are.
    """

    def allreduce(
        self: _Exchanging, value: np.ndarray, op: MeshOp, tag: Tag
    ) -> np.ndarray:
        """Combine ``value`` over ranks, folded in rank order (identical everywhere)."""
        value = np.asarray(value)
        got = self.exchange([[value]] * self.size, tag)
        return fold([arrays[0] for arrays in got], op)

    def barrier(self: _Exchanging, tag: Tag) -> None:
        """Return once every rank reached the barrier ``tag``."""
        self.exchange([[] for _ in range(self.size)], tag)
