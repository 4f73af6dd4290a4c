"""``run_mesh``: run an SPMD function on a mesh of any kind; results in rank order.

``kind="sim"`` runs the ranks as threads of this process (:func:`run_sim`);
``"zmq"`` and ``"torch"`` start a gang of CPU processes
(:func:`strata.engine.gang.run_gang`) and build a :class:`ZmqMesh` or
:class:`TorchMesh` in each. ``fn`` gets the rank's mesh first and must be defined
at module level (processes receive it by reference).

Examples:
    >>> import numpy as np
    >>> from strata.engine.mesh.base import Tag
    >>> run_mesh(_demo_total, 2, kind="sim")
    [1, 1]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from strata.engine.errors import format_where
from strata.engine.mesh.base import Mesh, Tag
from strata.engine.mesh.sim import DEFAULT_TIMEOUT_S, run_sim

if TYPE_CHECKING:
    from strata.engine.gang import GangContext, GangSpec

MeshKind = Literal["sim", "zmq", "torch"]
_KINDS = ("sim", "zmq", "torch")


def run_mesh(
    fn: Callable[..., Any],
    workers: int,
    /,
    *args: Any,
    kind: MeshKind = "sim",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    gang: GangSpec | None = None,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(mesh, *args, **kwargs)`` on ``workers`` ranks of a ``kind`` mesh.

    Args:
        fn: A module-level function taking the rank's :class:`Mesh` first.
        workers: Number of ranks.
        *args: Positional arguments, the same for every rank.
        kind: ``"sim"`` (threads of this process), ``"zmq"`` or ``"torch"``
            (one process per rank).
        timeout_s: Deadline of one round (a dead or stuck peer fails it).
        gang: The gang to start for ``"zmq"`` and ``"torch"`` (its ``workers``
            and ``device`` are replaced); by default CPU workers with one torch
            thread each and ``timeout_s`` as the collective timeout.
        **kwargs: Keyword arguments for ``fn``.

    Raises:
        MeshError: A rank raised or a round failed (``"sim"``).
        GangError: A rank raised, died or timed out (``"zmq"``, ``"torch"``).
    """
    if kind == "sim":
        return run_sim(fn, workers, *args, timeout_s=timeout_s, **kwargs)
    if kind not in ("zmq", "torch"):
        raise ValueError(
            format_where("kind", "run_mesh", f"one of {_KINDS}", repr(kind))
        )
    from strata.engine.gang import GangSpec, run_gang

    if gang is None:
        gang = GangSpec(
            workers,
            device="cpu",
            threads_per_worker=1,
            collective_timeout_s=timeout_s,
            name=f"mesh-{getattr(fn, '__name__', 'fn')}",
        )
    else:
        gang = dataclasses.replace(gang, workers=workers, device="cpu")
    return run_gang(_rank_main, gang, kind, fn, timeout_s, args, kwargs)


def _rank_main(
    ctx: GangContext,
    kind: MeshKind,
    fn: Callable[..., Any],
    timeout_s: float,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """The gang's worker: build this rank's mesh, run ``fn`` on it, close it."""
    from strata.engine.mesh.torch_mesh import TorchMesh
    from strata.engine.mesh.zmq_mesh import ZmqMesh

    mesh: ZmqMesh | TorchMesh
    if kind == "zmq":
        mesh = ZmqMesh.from_gang(ctx, timeout_s=timeout_s)
    else:
        mesh = TorchMesh(ctx, timeout_s=timeout_s)
    try:
        result = fn(mesh, *args, **kwargs)
    except BaseException:
        # The gang stops every rank now: do not wait for peers to read.
        if isinstance(mesh, ZmqMesh):
            mesh.close(linger_s=0.0)
        raise
    finally:
        mesh.close()
    return result


def _demo_total(mesh: Mesh) -> int:
    total = mesh.allreduce(np.array([mesh.rank]), "sum", Tag(0, 0))
    return int(total[0])
