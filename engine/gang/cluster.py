"""Gangs across machines: which node this process is, and the job's store.

A job launched on ``N`` nodes (``strata run JOB --nnodes N --node-rank R
--master-addr HOST --master-port P``, or under ``torchrun``) runs *whole* on
every node: the steps before and after a gang are deterministic, so every node
computes the same inputs. A gang of ``GangSpec.workers = W`` ranks (the global
world size) then starts, on node ``R``, the ranks ``[R*k, (R+1)*k)`` with
``k = W / N``; the ``N`` shares join one process group, and every node gets every
rank's result (:mod:`strata.engine.gang.nodes`), so the steps downstream give
the same outputs everywhere.

:class:`NodeGroup` says which node this process is. It comes from the
environment (:meth:`NodeGroup.from_env`):

* ``STRATA_NNODES``, ``STRATA_NODE_RANK``, ``STRATA_MASTER_ADDR``,
  ``STRATA_MASTER_PORT`` (what ``strata run --nnodes ...`` sets, so the process
  executor's workers inherit them); otherwise
* ``torchrun``'s variables, when ``torchrun`` started this process with
  ``--nproc-per-node 1`` (strata starts the node's gang workers itself):
  ``GROUP_RANK`` (else ``RANK``) is the node rank, ``GROUP_WORLD_SIZE`` (else
  ``WORLD_SIZE // LOCAL_WORLD_SIZE``) the node count, ``MASTER_ADDR`` and
  ``MASTER_PORT`` the store. With ``TORCHELASTIC_USE_AGENT_STORE=True`` (the
  static rendezvous, ``--master-addr``/``--master-port``/``--node-rank``)
  torchrun's agent already hosts a ``TCPStore`` there and every node connects
  as a client; otherwise node 0 hosts it.

Launching under torchrun (one strata process per node; it starts the node's
gang workers itself)::

    torchrun --nnodes 2 --nproc-per-node 1 --node-rank R \
        --master-addr node0 --master-port 29500 $(which strata) run JOB ...
    torchrun ... --no-python strata run JOB ...          # the same

Supported: a fixed node count with ``--nproc-per-node 1``, under the static
rendezvous above (tested) or ``--rdzv-backend c10d`` (node 0 then hosts the
store at ``MASTER_PORT``; untested). Not supported: ``--nproc-per-node`` > 1
(a clear error), elastic node ranges (``--nnodes 1:4``) and restarts
(``--max-restarts`` > 0): the nodes must run the job once, together.

The *job store* (:func:`job_store`) is one ``TCPStore`` for the whole run,
hosted by node 0 (``strata run`` opens it before the job starts:
:func:`launched_as`) or by torchrun's agent; gangs only publish there where
their own rendezvous store listens (node 0 hosts one per gang).

Examples:
    >>> group = NodeGroup(nnodes=2, node_rank=1, master_addr="10.0.0.1",
    ...                   master_port=29500)
    >>> group.share(4, "train")
    range(2, 4)
    >>> group.to_env()["STRATA_NODE_RANK"]
    '1'
    >>> NodeGroup.from_env({"STRATA_NNODES": "2", "STRATA_NODE_RANK": "1",
    ...                     "STRATA_MASTER_ADDR": "h", "STRATA_MASTER_PORT": "7"})
    NodeGroup(nnodes=2, node_rank=1, master_addr='h', master_port=7, agent_store=False)
    >>> NodeGroup(nnodes=2, node_rank=2, master_addr="h", master_port=7)
    Traceback (most recent call last):
    ...
    ValueError: node_rank in the node group: expected 0 <= node_rank < nnodes (2), ...
    >>> group.share(3, "train")
    Traceback (most recent call last):
    ...
    ValueError: workers in step 'train': expected a multiple of nnodes (2), got 3...
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from strata.engine.errors import format_error, format_where

NNODES_ENV = "STRATA_NNODES"
NODE_RANK_ENV = "STRATA_NODE_RANK"
MASTER_ADDR_ENV = "STRATA_MASTER_ADDR"
MASTER_PORT_ENV = "STRATA_MASTER_PORT"
#: Set by the process that hosts the job store (its pid): its children connect.
HOSTED_ENV = "STRATA_JOB_STORE_HOST"
_WHERE = "the node group"
#: Every key this package writes in a shared store starts with this.
KEY_PREFIX = "strata/"


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """This process's node among ``nnodes`` (see the module docstring).

    Attributes:
        nnodes: How many nodes (launches) the job runs on.
        node_rank: This node, ``0 <= node_rank < nnodes``.
        master_addr: Where the job store listens (node 0's address).
        master_port: Its port.
        agent_store: torchrun's agent hosts the store (every node is a client).
    """

    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    agent_store: bool = False

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem is not None:
            subject, expected, got, hint = problem
            raise ValueError(format_where(subject, _WHERE, expected, got, hint))

    @property
    def spans(self) -> bool:
        """More than one node."""
        return self.nnodes > 1

    @property
    def hosts_store(self) -> bool:
        """This node hosts the job store (node 0, unless torchrun's agent does)."""
        return self.node_rank == 0 and not self.agent_store

    def share(self, workers: int, name: str) -> range:
        """The global ranks this node starts for a gang of ``workers`` ranks.

        Raises:
            ValueError: ``workers`` is not a multiple of ``nnodes``.
        """
        if workers % self.nnodes:
            raise ValueError(
                format_error(
                    "workers",
                    name,
                    f"a multiple of nnodes ({self.nnodes})",
                    str(workers),
                    "every node starts workers / nnodes ranks; workers is the "
                    "global world size.",
                )
            )
        k = workers // self.nnodes
        return range(self.node_rank * k, (self.node_rank + 1) * k)

    def node_of(self, rank: int, workers: int) -> int:
        """The node that starts global ``rank`` of a ``workers``-rank gang."""
        return rank // (workers // self.nnodes)

    def to_env(self) -> dict[str, str]:
        """The ``STRATA_*`` variables that describe this group."""
        return {
            NNODES_ENV: str(self.nnodes),
            NODE_RANK_ENV: str(self.node_rank),
            MASTER_ADDR_ENV: self.master_addr,
            MASTER_PORT_ENV: str(self.master_port),
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NodeGroup | None:
        """The group the environment describes, or ``None`` (one node).

        ``STRATA_*`` first, then torchrun's variables (module docstring).

        Raises:
            ValueError: A variable is malformed or missing (names it).
        """
        env = os.environ if environ is None else environ
        if NNODES_ENV in env:
            nnodes = _int(env, NNODES_ENV)
            if nnodes == 1 and MASTER_ADDR_ENV not in env:
                return cls()
            return cls(
                nnodes=nnodes,
                node_rank=_int(env, NODE_RANK_ENV),
                master_addr=_required(env, MASTER_ADDR_ENV),
                master_port=_int(env, MASTER_PORT_ENV),
            )
        if "TORCHELASTIC_RUN_ID" not in env and "GROUP_RANK" not in env:
            return None
        local = _int(env, "LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in env else 1
        if local != 1:
            raise ValueError(
                format_where(
                    "LOCAL_WORLD_SIZE",
                    _WHERE,
                    "1 (torchrun --nproc-per-node 1)",
                    str(local),
                    "strata starts each node's gang workers itself: run one "
                    "strata process per node.",
                )
            )
        if "GROUP_WORLD_SIZE" in env:
            nnodes = _int(env, "GROUP_WORLD_SIZE")
        else:
            nnodes = _int(env, "WORLD_SIZE")
        rank_name = "GROUP_RANK" if "GROUP_RANK" in env else "RANK"
        return cls(
            nnodes=nnodes,
            node_rank=_int(env, rank_name),
            master_addr=_required(env, "MASTER_ADDR"),
            master_port=_int(env, "MASTER_PORT"),
            agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE", "") == "True",
        )


def current() -> NodeGroup | None:
    """This process's node group from the environment; ``None`` on one node.

    Raises:
        ValueError: The environment describes a malformed group.
    """
    group = NodeGroup.from_env()
    return group if group is not None and group.spans else None


# -- the job store ------------------------------------------------------------

_LOCK = threading.Lock()
_STORES: dict[tuple[int, NodeGroup], Any] = {}
_LAUNCHES: dict[tuple[int, str], int] = {}


def job_store(group: NodeGroup, timeout_s: float) -> Any:
    """This process's connection to the job store (opened once per process).

    Node 0 hosts it unless torchrun's agent does or an ancestor process already
    hosts it (:data:`HOSTED_ENV`); every other process connects as a client,
    waiting up to ``timeout_s`` for the host. Keys are under :data:`KEY_PREFIX`.

    Raises:
        ValueError: Node 0 cannot listen on ``master_port`` (in use).
    """
    import torch.distributed as dist

    key = (os.getpid(), group)
    with _LOCK:
        store = _STORES.get(key)
        if store is not None:
            return store
        host = group.hosts_store and os.environ.get(HOSTED_ENV) in (
            None,
            str(os.getpid()),
        )
        try:
            raw = dist.TCPStore(  # type: ignore[attr-defined]
                group.master_addr,
                group.master_port,
                is_master=host,
                wait_for_workers=False,
                timeout=timedelta(seconds=timeout_s),
            )
        except Exception as exc:
            role = "listen" if host else "connect"
            raise ValueError(
                format_where(
                    "master_port",
                    _WHERE,
                    f"a job store to {role} on {group.master_addr}:{group.master_port}",
                    f"{type(exc).__name__}: {exc}",
                    "pick a free port (node 0 listens on it), start node 0, and "
                    "check that every node reaches master_addr.",
                )
            ) from exc
        if host:
            os.environ[HOSTED_ENV] = str(os.getpid())
        store = dist.PrefixStore(KEY_PREFIX, raw)  # type: ignore[attr-defined]
        _STORES[key] = store
        return store


@contextlib.contextmanager
def launched_as(group: NodeGroup, timeout_s: float = 300.0) -> Iterator[None]:
    """Run the block as ``group``'s node: its variables set, the job store open.

    ``strata run --nnodes`` wraps the run in it: the ``STRATA_*`` variables
    reach the process executor's workers, and node 0 opens the job store first,
    so every process of the run shares that one store. Afterwards the
    variables are as before and this process's store is closed.

    Raises:
        ValueError: Node 0 cannot listen on ``master_port``.
    """
    names = [*group.to_env(), HOSTED_ENV]
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(group.to_env())
    try:
        if group.spans and group.hosts_store:
            job_store(group, timeout_s)
        yield
    finally:
        with _LOCK:
            _STORES.pop((os.getpid(), group), None)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def next_launch(name: str, *, again: bool = False) -> int:
    """Count the gangs named ``name`` this process started (1, 2, ...).

    Every node runs the same job, so the n-th gang of a name is the same gang
    on every node: its keys in the job store carry the name and this count.
    ``again``: the last gang is started again (a start-up retry), same count.
    """
    key = (os.getpid(), name)
    with _LOCK:
        if not again or key not in _LAUNCHES:
            _LAUNCHES[key] = _LAUNCHES.get(key, 0) + 1
        return _LAUNCHES[key]


def _int(env: Mapping[str, str], name: str) -> int:
    value = _required(env, name)
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            format_where(name, _WHERE, "an integer", repr(value))
        ) from None


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise ValueError(
            format_where(
                name,
                _WHERE,
                "a value in the environment",
                "none",
                f"set {name} on every node (strata run --nnodes sets all four).",
            )
        )
    return value


def _problem(group: NodeGroup) -> tuple[str, str, str, str] | None:
    if not isinstance(group.nnodes, int) or group.nnodes < 1:
        return ("nnodes", "nnodes >= 1", repr(group.nnodes), "nnodes counts nodes.")
    if not isinstance(group.node_rank, int) or not (
        0 <= group.node_rank < group.nnodes
    ):
        return (
            "node_rank",
            f"0 <= node_rank < nnodes ({group.nnodes})",
            repr(group.node_rank),
            "number the nodes 0 .. nnodes-1; node 0 hosts the store.",
        )
    if not isinstance(group.master_port, int) or not (1 <= group.master_port <= 65535):
        return (
            "master_port",
            "a port 1..65535",
            repr(group.master_port),
            "every node names the same port; node 0 listens on it.",
        )
    if not isinstance(group.master_addr, str) or not group.master_addr:
        return (
            "master_addr",
            "node 0's host name or address",
            repr(group.master_addr),
            "every node names node 0's address.",
        )
    return None
