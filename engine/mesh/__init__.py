"""Meshes of ranks exchanging numpy arrays in tagged rounds (see :mod:`.base`)."""

from strata.engine.mesh.base import Mesh, MeshError, MeshOp, MeshStats, Tag

__all__ = ["Mesh", "MeshError", "MeshOp", "MeshStats", "Tag"]
