"""Meshes of ranks exchanging numpy arrays in tagged rounds (see :mod:`.base`).

==========================  ===================================================
name                        what it is
==========================  ===================================================
:class:`Mesh`               the protocol: rank, size, stats, exchange,
                            allreduce, barrier, close
:class:`SimMesh`            P ranks on threads of one process, traffic counted
                            as a real mesh sends it (P up to 256)
:func:`run_sim`             run an SPMD function on a SimMesh's threads
:class:`ZmqMesh`            one rank per process over pyzmq (ROUTER inbox,
                            DEALER per peer, a poller, deadlines)
:class:`TorchMesh`          one gang rank over torch.distributed (gloo
                            ``all_to_all_single``)
:func:`run_mesh`            run it on a mesh of any kind (sim, zmq, torch)
:class:`Tag`                ``(superstep, round)``, increasing
:class:`MeshStats`          messages, bytes, rounds, waiting per rank
:class:`MeshError`          a round failed: names the rank and the tag
==========================  ===================================================

Examples:
    >>> import numpy as np
    >>> (end,) = SimMesh.group(1)
    >>> end.allreduce(np.ones(2), "sum", Tag(0, 0)).tolist()
    [1.0, 1.0]
"""

from strata.engine.mesh.base import Mesh, MeshError, MeshOp, MeshStats, Tag
from strata.engine.mesh.run import MeshKind, run_mesh
from strata.engine.mesh.sim import SimMesh, run_sim
from strata.engine.mesh.torch_mesh import TorchMesh
from strata.engine.mesh.wire import END_BYTES, HEADER_BYTES, round_cost
from strata.engine.mesh.zmq_mesh import ZmqMesh

__all__ = [
    "END_BYTES",
    "HEADER_BYTES",
    "Mesh",
    "MeshError",
    "MeshKind",
    "MeshOp",
    "MeshStats",
    "SimMesh",
    "Tag",
    "TorchMesh",
    "ZmqMesh",
    "round_cost",
    "run_mesh",
    "run_sim",
]
