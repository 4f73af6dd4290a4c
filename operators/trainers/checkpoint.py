"""Training checkpoints: written atomically, loaded without unpickling code.

A checkpoint is one file, ``<dir>/<name>.pt``, holding everything needed to continue
a run on the same trajectory: model and optimiser state, the epoch count, torch's
CPU (and CUDA) random state, the early-stopping state, the best weights so far,
the epoch records, and the run's trajectory settings (a resumed run must agree).

Writes go to a temporary file in the same directory, are fsynced, then renamed over
the previous checkpoint (atomic on POSIX), and the directory is fsynced: a crash
leaves the previous checkpoint or the new one, never a torn file. Files are read
with ``torch.load(weights_only=True)``: tensors, numbers, strings, lists and dicts
only, so loading a checkpoint cannot run code.

Examples:
    >>> import tempfile, torch
    >>> path = checkpoint_path(tempfile.mkdtemp(), "train")
    >>> save_checkpoint(path, {"epoch": 3, "weights": torch.ones(2)})
    >>> load_checkpoint(path)["epoch"]
    3
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import torch

from strata.operators.errors import OperatorError

FORMAT_VERSION = 1


def checkpoint_path(directory: str | Path, name: str) -> Path:
    """The checkpoint file of the run called ``name`` (a step id) in ``directory``."""
    return Path(directory) / f"{name}.pt"


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (temp file, fsync, rename, fsync dir).

    Args:
        path: the checkpoint file; its directory is created if missing.
        state: tensors, numbers, strings, and lists/dicts of them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb") as file:
            torch.save({"format": FORMAT_VERSION, **state}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Raises:
        OperatorError: if the file is not a readable checkpoint of this format.
    """
    path = Path(path)
    where = "load_checkpoint"
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged file
        raise OperatorError.build(
            "checkpoint",
            where,
            "a checkpoint written by save_checkpoint",
            f"{path}: {type(exc).__name__}: {exc}",
            "delete it to start over",
        ) from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        got = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise OperatorError.build(
            "checkpoint format", where, f"version {FORMAT_VERSION}", f"{got} in {path}"
        )
    return state


def rng_state(device: torch.device) -> dict[str, Any]:
    """Torch's random state: the CPU generator, and ``device``'s when it is CUDA."""
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    """Restore the random state captured by :func:`rng_state`."""
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)
