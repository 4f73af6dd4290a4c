"""Connect to Ray: start a local cluster, or join one; one place for both.

The Ray executor and Ray-actor gangs both call :func:`connect`. When this process
is already connected (``ray.init`` ran, say in a test session), the connection is
reused; otherwise :func:`connect` joins ``address`` (or ``$STRATA_RAY_ADDRESS``,
or ``$RAY_ADDRESS``) and starts a local cluster when none is named.

Workers import the steps' modules by name, so the driver's ``sys.path`` travels
to them (``PYTHONPATH`` in the job's runtime environment): a job defined in a
script or a test module next to it imports on the workers as it does here. On a
multi-machine cluster every node needs Strata (and the job's modules) installed.

Ray is optional (``pip install 'strata-gnn[ray]'``): :func:`require_ray` names the
extra when it is missing.

Examples:
    >>> import importlib.util
    >>> ray_installed = importlib.util.find_spec("ray") is not None
    >>> (require_ray().__name__ == "ray") if ray_installed else True
    True
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from strata.engine.errors import format_where

#: Environment variable naming the cluster to join (``ray://...`` or ``host:port``).
ADDRESS_ENV = "STRATA_RAY_ADDRESS"

MISSING = (
    "the ray executor and Ray gangs need Ray, which is not installed here. "
    "Hint: pip install 'strata-gnn[ray]' (or pip install 'ray>=2.9')."
)


def require_ray() -> ModuleType:
    """Import and return ``ray``; raise a clear ``ImportError`` when it is missing."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(MISSING) from exc
    return ray


def connect(address: str | None = None, *, num_cpus: int | None = None) -> ModuleType:
    """Return ``ray``, connected: reuse this process's connection or make one.

    Args:
        address: The cluster to join; ``None`` reads ``$STRATA_RAY_ADDRESS`` and
            then ``$RAY_ADDRESS``, and starts a local cluster when neither is set.
        num_cpus: CPUs of a *local* cluster started here (default: all cores).

    Raises:
        ImportError: Ray is not installed.
        ConnectionError: ``address`` names no cluster this process can join.
    """
    ray = require_ray()
    if ray.is_initialized():
        return ray
    # Ray would replace builtins.print with its progress-bar-safe print in this
    # process: a library must not change the caller's print.
    os.environ.setdefault("RAY_TQDM_PATCH_PRINT", "0")
    address = address or os.environ.get(ADDRESS_ENV) or os.environ.get("RAY_ADDRESS")
    try:
        ray.init(
            address=address,
            num_cpus=None if address else num_cpus,
            include_dashboard=False,
            log_to_driver=False,  # remote errors come back in the run's error
            logging_level="ERROR",
            runtime_env={"env_vars": {"PYTHONPATH": driver_path()}},
        )
    except Exception as exc:
        if not address:
            raise
        raise ConnectionError(
            format_where(
                "ray address",
                "strata.engine.ray_cluster.connect",
                "a running Ray cluster to join",
                f"{address!r}: {type(exc).__name__}: {str(exc)[:300]}",
                "check the address and port; a cluster started with `ray start` "
                "(Ray >= 2.59) also needs RAY_AUTH_MODE=token in this environment.",
            )
        ) from exc
    return ray


def driver_path() -> str:
    """This process's import path, as a ``PYTHONPATH`` value for Ray's workers."""
    entries = [p for p in sys.path if p and os.path.isdir(p)]
    cwd = os.getcwd()
    if cwd not in entries:
        entries.insert(0, cwd)
    return os.pathsep.join(entries)
