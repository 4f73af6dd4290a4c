"""Chaos trials for exactly-once ingestion: kills, delays, reordering, drops.

A trial runs a streaming job that serves an ingestion endpoint and one or more
producers that send numbered update rows to it, and meanwhile SIGKILLs the job and
the producers at chosen moments, restarting each (the job with ``resume``, the
producers with the same producer id). Between producers and the endpoint sits a
:class:`ChaosLink`: a loopback relay that delays every message by a random time
(so messages overtake each other), and may drop some. At the end the trial knows
which rows the job applied, in which order, and which batches every producer
incarnation saw acknowledged; :func:`check_trial` holds them against the truth:

* every row of every producer was applied exactly once (none lost, none doubled);
* each producer's rows were applied in its seq order (the final state of any job
  equals an uninterrupted run's, whose log holds the same per-producer order);
* the log holds each ``(producer, seq)`` once, and its offsets cover its rows;
* every acknowledged batch is in the log.

Every row carries a unique id in its ``event_time`` column (``producer * 10**9 +
row``), which the :class:`AppliedRows` step records. The job and producers run
as processes forked from a clean fork server (:class:`Trial`), so a restart costs
milliseconds, not an interpreter start. :class:`TrialPlan.draw` makes the seeded
random plans of the chaos test (``tests/operators/test_ingest_chaos.py``) and of
``benchmarks/operators/streaming/run_chaos.py``.

Examples:
    >>> import tempfile
    >>> plan = TrialPlan(seed=0, batches=(20,), batch_rows=3, window=4)
    >>> result = Trial(plan, tempfile.mkdtemp()).run()
    >>> check_trial(plan, result).lost, result.applied.size
    (0, 60)
"""

from __future__ import annotations

import heapq
import itertools
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import zmq

from strata.engine.config import CheckpointConfig, RunConfig
from strata.engine.executors import execute
from strata.engine.operator import Operator, StepContext
from strata.engine.pipeline import Pipeline
from strata.operators.streaming.client import IngestClient, IngestError
from strata.operators.streaming.ingest import ZmqIngest
from strata.operators.streaming.items import UPDATES
from strata.storage import UpdateLog, edge_updates

#: Ids of producer ``p``'s rows start here (``event_time`` = p * ID_STRIDE + row).
ID_STRIDE = 10**9


# ---------------------------------------------------------------------- the network
class ChaosLink:
    """A loopback relay that delays, reorders and drops messages, both ways.

    Producers connect to :attr:`endpoint` (a ROUTER); the link opens one DEALER
    per producer connection to ``upstream`` and forwards each message after a
    delay drawn uniformly from ``[0, max_delay_ms]``, independently per message, so
    a later message often arrives first. With ``drop`` it loses that share of the
    messages (either way). It runs in a thread until :meth:`close`.

    Args:
        upstream: The endpoint to relay to (it may be down and come back).
        max_delay_ms: Largest delay of one message.
        drop: Probability of losing a message.
        seed: Seeds the delays and drops.
    """

    def __init__(
        self, upstream: str, *, max_delay_ms: float, drop: float = 0.0, seed: int = 0
    ) -> None:
        self.upstream = upstream
        self.max_delay_s = max_delay_ms / 1000
        self.drop = drop
        self.random = random.Random(seed)
        self.context = zmq.Context()
        self.front: zmq.Socket[Any] = self.context.socket(zmq.ROUTER)
        self.front.setsockopt(zmq.LINGER, 0)
        self.front.bind("tcp://127.0.0.1:*")
        self.endpoint: str = self.front.getsockopt_string(zmq.LAST_ENDPOINT)
        self.relayed = 0
        self.dropped = 0
        self._backs: dict[bytes, zmq.Socket[Any]] = {}
        self._queue: list[tuple[float, int, bool, bytes, list[bytes]]] = []
        self._order = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-link")
        self._thread.start()

    def _schedule(self, upward: bool, ident: bytes, frames: list[bytes]) -> None:
        if self.random.random() < self.drop:
            self.dropped += 1
            return
        release = time.monotonic() + self.random.uniform(0, self.max_delay_s)
        heapq.heappush(self._queue, (release, next(self._order), upward, ident, frames))

    def _back(self, ident: bytes) -> zmq.Socket[Any]:
        if ident not in self._backs:
            socket: zmq.Socket[Any] = self.context.socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(self.upstream)
            self._backs[ident] = socket
        return self._backs[ident]

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        known: set[bytes] = set()
        while not self._stop.is_set():
            wait = 10.0
            if self._queue:
                wait = max(0.0, min(wait, (self._queue[0][0] - time.monotonic()) * 1e3))
            for socket, _ in poller.poll(int(wait)):
                while True:
                    try:
                        frames = socket.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if socket is self.front:
                        ident, frames = frames[0], frames[1:]
                        if ident not in known:
                            known.add(ident)
                            poller.register(self._back(ident), zmq.POLLIN)
                        self._schedule(True, ident, frames)
                    else:
                        ident = next(i for i, s in self._backs.items() if s is socket)
                        self._schedule(False, ident, frames)
            now = time.monotonic()
            while self._queue and self._queue[0][0] <= now:
                _, _, upward, ident, frames = heapq.heappop(self._queue)
                target = self._back(ident) if upward else self.front
                out = frames if upward else [ident, *frames]
                try:
                    target.send_multipart(out, zmq.NOBLOCK)
                    self.relayed += 1
                except zmq.ZMQError:  # a full pipe to a dead peer: lost
                    self.dropped += 1

    def close(self) -> None:
        """Stop relaying and close every socket."""
        self._stop.set()
        self._thread.join()
        for socket in [self.front, *self._backs.values()]:
            socket.close(linger=0)
        self.context.term()


# ---------------------------------------------------------------------- the job
class AppliedRows(Operator[dict[str, Any], None]):
    """Records the row ids (``event_time``) and offsets of every update it applies.

    ``Stateful``: the ids and offsets applied so far are its snapshot, so after a
    resume it holds exactly what the job applied before the checkpoint plus what it
    applies after. At the end it writes ``{"ids", "offsets"}`` to ``out`` (``.npz``,
    atomically).
    """

    def __init__(self, out: str) -> None:
        self.out = out
        self._ids: list[np.ndarray] = []
        self._offsets: list[np.ndarray] = []

    def open(self, ctx: StepContext) -> None:
        """Nothing to open."""

    def process(self, item: dict[str, Any]) -> Iterator[None]:
        """Record an ``updates`` item's rows; ignore ``tick`` items."""
        if item.get("kind") == UPDATES:
            batch: pa.RecordBatch = item["batch"]
            ids = batch.column("event_time").to_numpy(zero_copy_only=False)
            self._ids.append(ids.astype(np.int64))
            first = int(item["offset"])
            self._offsets.append(np.arange(first, first + len(ids), dtype=np.int64))
        yield from ()

    def _joined(self) -> tuple[np.ndarray, np.ndarray]:
        empty = np.empty(0, np.int64)
        ids = np.concatenate(self._ids) if self._ids else empty
        offsets = np.concatenate(self._offsets) if self._offsets else empty
        self._ids, self._offsets = [ids], [offsets]
        return ids, offsets

    def snapshot(self) -> dict[str, Any]:
        """The ids and offsets applied so far."""
        ids, offsets = self._joined()
        return {"ids": ids.copy(), "offsets": offsets.copy()}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a snapshot."""
        self._ids = [np.asarray(state["ids"], np.int64)]
        self._offsets = [np.asarray(state["offsets"], np.int64)]

    def finish(self) -> Iterator[None]:
        """Write what was applied to ``out``."""
        ids, offsets = self._joined()
        temporary = f"{self.out}.tmp.npz"
        np.savez(temporary, ids=ids, offsets=offsets)
        os.replace(temporary, self.out)
        yield from ()


def serve(
    directory: str, endpoint: str, producers: int, checkpoint_every: int, resume: bool
) -> None:  # pragma: no cover - runs in a child process
    """The job: ``ZmqIngest`` -> :class:`AppliedRows`, checkpointed; exits 0 when done.

    It stops once ``producers`` producers said ``end`` to this incarnation.
    """
    root = Path(directory)
    _stderr_to(root / "job.stderr")
    p = Pipeline("chaos")
    source = ZmqIngest(
        str(root / "log"), endpoint, tick_ms=20, expected_producers=producers
    )
    p.step("updates", source)
    p.step("apply", AppliedRows(str(root / "applied.npz")), "updates")
    checkpoint = CheckpointConfig(root / "ckpt", every_items=checkpoint_every)
    result = execute(
        p, "local", config=RunConfig(checkpoint=checkpoint, resume=resume), check=False
    )
    if result.error is not None:  # the whole chain: the step's own traceback too
        traceback.print_exception(result.error, file=sys.stderr)
        sys.stderr.flush()
    os._exit(0 if result.ok else 1)


def _stderr_to(path: Path) -> None:  # pragma: no cover - runs in a child process
    """Append this process's stderr (fd 2 too) to ``path``.

    The children are forked from the fork server, whose stderr is whatever its
    starter had (under pytest, the capture of whichever test started it, maybe
    long gone), so a failing job's traceback was lost and the trial said only
    "the job failed by itself"; in a file it is quoted in the :class:`TrialError`
    (see :func:`stderr_tail`).
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def stderr_tail(path: Path, chars: int = 3000) -> str:
    """The last ``chars`` characters of a child's stderr file ("" if none)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return text[-chars:].strip()


# ---------------------------------------------------------------------- producers
def producer_rows(producer: int, batches: int, batch_rows: int) -> list[pa.RecordBatch]:
    """Producer ``producer``'s stream: rows with unique ids in ``event_time``."""
    out = []
    for b in range(batches):
        ids = producer * ID_STRIDE + b * batch_rows + np.arange(batch_rows)
        src = (ids * 7 + 3) % 64
        out.append(edge_updates(src, (src + 1) % 64, event_time=ids))
    return out


def produce(
    directory: str,
    endpoint: str,
    producer: int,
    batches: int,
    batch_rows: int,
    window: int,
    timeout_s: float,
) -> None:  # pragma: no cover - runs in a child process
    """One producer incarnation: hello, send what the log lacks, end; log acks."""
    acks = Path(directory) / f"acks-{producer}.txt"
    _stderr_to(Path(directory) / f"producer-{producer}.stderr")
    code = 1
    with acks.open("a") as log, IngestClient(endpoint, f"p{producer}") as client:

        def on_ack(reply: dict[str, Any]) -> None:
            log.write(f"{reply['seq']} {int(bool(reply.get('duplicate')))}\n")
            log.flush()

        try:
            report = client.send_all(
                producer_rows(producer, batches, batch_rows),
                window=window,
                timeout_s=timeout_s,
                ack_timeout_s=5.0,
                on_ack=on_ack,
            )
            for seq in range(1, report.held_batches + 1):  # logged by an earlier run
                log.write(f"{seq} held\n")
            log.flush()
            code = 0 if report.complete else 1
            client.end(timeout_s=2.0)
        except IngestError as exc:
            print(f"producer {producer}: {exc}", file=sys.stderr)
    os._exit(code)


# ---------------------------------------------------------------------- a trial
@dataclass(frozen=True, slots=True)
class TrialPlan:
    """One chaos trial: the streams, the link, and when to kill what.

    Attributes:
        seed: Seeds the link and names the trial.
        batches: Batches per producer (one entry per producer).
        batch_rows: Rows per batch.
        window: Batches each producer keeps in flight.
        timeout_s: A producer's resend timeout.
        max_delay_ms: The link's largest one-way delay (0: no link).
        drop: The link's loss probability.
        kills: ``(at_s, target)``: SIGKILL the job (``"job"``) or producer ``i``
            (``"producer:i"``) that long after the trial starts.
        kill_after_acks: ``(acks, target)``: SIGKILL once producer 0 has seen that
            many acknowledgements (the issue's scenario kills at 225, 675, 1200).
        restart_delay_s: How long a killed process stays down.
        checkpoint_every: The job's checkpoint interval (items).
    """

    seed: int
    batches: tuple[int, ...] = (100,)
    batch_rows: int = 10
    window: int = 8
    timeout_s: float = 0.5
    max_delay_ms: float = 0.0
    drop: float = 0.0
    kills: tuple[tuple[float, str], ...] = ()
    kill_after_acks: tuple[tuple[int, str], ...] = ()
    restart_delay_s: float = 0.1
    checkpoint_every: int = 5

    @classmethod
    def draw(cls, seed: int) -> TrialPlan:
        """A random plan: windows 1/2/8/32, batch sizes, kills, delays, drops."""
        rng = random.Random(seed)
        producers = rng.choice((1, 1, 2))
        batches = tuple(rng.randint(20, 120) for _ in range(producers))
        targets = ["job"] * 3 + [f"producer:{i}" for i in range(producers)]
        kills = sorted(
            (round(rng.uniform(0.1, 2.0), 3), rng.choice(targets))
            for _ in range(rng.randint(1, 4))
        )
        return cls(
            seed=seed,
            batches=batches,
            batch_rows=rng.choice((1, 3, 10, 25)),
            window=rng.choice((1, 2, 8, 32)),
            timeout_s=rng.choice((0.05, 0.2, 0.5)),
            max_delay_ms=rng.choice((0.0, 2.0, 10.0)),
            drop=rng.choice((0.0, 0.0, 0.02)),
            kills=tuple(kills),
            restart_delay_s=rng.choice((0.0, 0.1, 0.3)),
            checkpoint_every=rng.choice((1, 5, 20)),
        )


@dataclass(slots=True)
class TrialResult:
    """What a trial observed.

    Attributes:
        applied: Row ids the job applied, in the order it applied them.
        offsets: The log offset of each applied row.
        acked: Per producer, seq -> how it was acknowledged (``"new"``,
            ``"duplicate"`` or ``"held"``), over all its incarnations.
        log: ``(producer id, seq, first_offset, rows)`` of every log record.
        kills: Processes SIGKILLed while alive, by target.
        restarts: Processes started again, by target.
        seconds: Wall time.
    """

    applied: np.ndarray
    offsets: np.ndarray
    acked: dict[int, dict[int, str]]
    log: list[tuple[str | None, int | None, int, int]]
    kills: dict[str, int] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


class TrialError(AssertionError):
    """A trial did not finish, or a process failed on its own."""


_CONTEXT: ForkServerContext | None = None


def _context() -> ForkServerContext:
    """A fork server with the job's modules imported: restarts take milliseconds."""
    global _CONTEXT
    if _CONTEXT is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        _CONTEXT = context
    return _CONTEXT


#: Where the kernel's ephemeral ports are configured (outgoing connections, bind(0)).
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: The job's port is drawn from here, outside the ephemeral range: 20000 is past the
#: ports Ray's workers bind (10002-19999) and 49152 is where pyzmq's random ports
#: and IANA's dynamic ports start.
_STABLE_PORTS = range(20000, 49152)
_PICK = random.SystemRandom()  # a test's random.seed() must not make trials agree


def ephemeral_ports() -> range:
    """The ports the kernel hands to outgoing connections and ``bind(0)``."""
    try:
        low, high = (int(x) for x in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def stable_ports() -> list[range]:
    """Port ranges no other process is handed without asking for the number."""
    ephemeral = ephemeral_ports()
    below = range(_STABLE_PORTS.start, min(_STABLE_PORTS.stop, ephemeral.start))
    above = range(max(_STABLE_PORTS.start, ephemeral.stop), _STABLE_PORTS.stop)
    return [r for r in (below, above) if len(r)]


def free_endpoint(tries: int = 100) -> str:
    """A loopback endpoint for a job that is killed and restarted on it.

    The port is free now and, unlike one the kernel picks (``bind(0)``), lies
    outside the ephemeral range. Between a kill and the restarted job's bind the
    port is unbound, and the kernel may give an ephemeral one to any process's
    outgoing connection; that socket (even closed, in TIME_WAIT for a minute)
    makes the job's bind fail with EADDRINUSE, and the trial fails on a job that
    did nothing wrong. Only an explicit bind to this very number can take it now.
    Falls back to a kernel-picked port where no such range exists.
    """
    ranges = stable_ports()
    for _ in range(tries if ranges else 0):
        chosen = _PICK.choices(ranges, weights=[len(r) for r in ranges])[0]
        endpoint = f"tcp://127.0.0.1:{_PICK.choice(chosen)}"
        if _bindable(endpoint):
            return endpoint
    socket: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.ROUTER)
    try:
        port = socket.bind_to_random_port("tcp://127.0.0.1")
    finally:
        socket.close(linger=0)
    return f"tcp://127.0.0.1:{port}"


def _bindable(endpoint: str) -> bool:
    """Whether a ROUTER (with the job's socket options) can bind ``endpoint`` now."""
    socket: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.ROUTER)
    try:
        socket.bind(endpoint)
        return True
    except zmq.ZMQError:
        return False
    finally:
        socket.close(linger=0)


class Trial:
    """Runs one :class:`TrialPlan` in ``directory`` (see the module docstring).

    Args:
        plan: What to run.
        directory: An empty directory for the log, checkpoints and ack files.
        timeout_s: Fail the trial after this long.
    """

    def __init__(self, plan: TrialPlan, directory: str, timeout_s: float = 120.0):
        self.plan = plan
        self.directory = directory
        self.timeout_s = timeout_s
        self.endpoint = free_endpoint()
        self.kills: dict[str, int] = {}
        self.restarts: dict[str, int] = {}
        self._processes: dict[str, BaseProcess] = {}
        self._down_until: dict[str, float] = {}

    def _start(self, target: str, link: str) -> None:
        context = _context()
        plan = self.plan
        if target == "job":
            resume = target in self.restarts or target in self.kills
            args: tuple[Any, ...] = (
                self.directory,
                self.endpoint,
                len(plan.batches),
                plan.checkpoint_every,
                resume,
            )
            process = context.Process(target=serve, args=args, daemon=True)
        else:
            i = int(target.split(":")[1])
            args = (
                self.directory,
                link,
                i,
                plan.batches[i],
                plan.batch_rows,
                plan.window,
                plan.timeout_s,
            )
            process = context.Process(target=produce, args=args, daemon=True)
        if target in self._processes:
            self.restarts[target] = self.restarts.get(target, 0) + 1
        process.start()
        self._processes[target] = process

    def _kill(self, target: str, now: float) -> None:
        process = self._processes.get(target)
        if process is None or process.exitcode is not None or process.pid is None:
            return  # already finished (or down): nothing to kill
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        self.kills[target] = self.kills.get(target, 0) + 1
        self._down_until[target] = now + self.plan.restart_delay_s

    def _acks_seen(self) -> int:
        path = Path(self.directory) / "acks-0.txt"
        try:
            with path.open() as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    def run(self) -> TrialResult:
        """Run the trial to the end; return what it observed.

        Raises:
            TrialError: a process failed on its own, or the trial timed out.
        """
        plan = self.plan
        link = None
        if plan.max_delay_ms > 0 or plan.drop > 0:
            link = ChaosLink(
                self.endpoint,
                max_delay_ms=plan.max_delay_ms,
                drop=plan.drop,
                seed=plan.seed,
            )
        producer_endpoint = link.endpoint if link is not None else self.endpoint
        producers = [f"producer:{i}" for i in range(len(plan.batches))]
        start = time.monotonic()
        try:
            self._start("job", producer_endpoint)
            for target in producers:
                self._start(target, producer_endpoint)
            self._supervise(start, producers, producer_endpoint)
        finally:
            for process in self._processes.values():
                if process.exitcode is None and process.pid is not None:
                    os.kill(process.pid, signal.SIGKILL)
                    process.join()
            if link is not None:
                link.close()
        return self._result(time.monotonic() - start)

    def _supervise(self, start: float, producers: list[str], link: str) -> None:
        """Kill on schedule; restart what was killed; return when all is done.

        A producer that finished is run again whenever the job restarts, so the
        new incarnation hears its ``end`` (it skips every batch the log holds).
        """
        plan = self.plan
        timed = list(plan.kills)
        counted = list(plan.kill_after_acks)
        while True:
            now = time.monotonic()
            if now - start > self.timeout_s:
                raise TrialError(f"trial {plan.seed}: not done in {self.timeout_s} s")
            while timed and now - start >= timed[0][0]:
                self._kill(timed.pop(0)[1], now)
            while counted and self._acks_seen() >= counted[0][0]:
                self._kill(counted.pop(0)[1], now)
            job = self._processes["job"]
            codes = [self._processes[t].exitcode for t in producers]
            if job.exitcode == 0:
                if all(code == 0 for code in codes):
                    return
                broken = [t for t, c in zip(producers, codes, strict=True) if c]
                if broken:
                    raise self._failure(broken[0], "failed after the job ended")
            elif job.exitcode == -signal.SIGKILL:
                if now >= self._down_until.get("job", 0.0):
                    self._start("job", link)
                    for target, code in zip(producers, codes, strict=True):
                        if code == 0:
                            self._start(target, link)  # the new job needs its end
            elif job.exitcode is not None:
                raise self._failure("job", f"failed by itself (exit {job.exitcode})")
            for target, code in zip(producers, codes, strict=True):
                failed = code is not None and code != 0
                if failed and now >= self._down_until.get(target, 0.0):
                    self._start(target, link)  # same producer id: it resumes
            time.sleep(0.005)

    def _failure(self, target: str, what: str) -> TrialError:
        """The error for ``target`` failing, quoting the end of its stderr."""
        name = target.replace(":", "-")
        tail = stderr_tail(Path(self.directory) / f"{name}.stderr")
        seed = self.plan.seed
        return TrialError(f"trial {seed}: the {target} {what}; stderr:\n{tail}")

    def _result(self, seconds: float) -> TrialResult:
        root = Path(self.directory)
        with np.load(root / "applied.npz") as data:
            applied, offsets = data["ids"], data["offsets"]
        acked: dict[int, dict[int, str]] = {}
        for i in range(len(self.plan.batches)):
            seen: dict[int, str] = {}
            path = root / f"acks-{i}.txt"
            lines = path.read_text().split() if path.exists() else []
            for seq, how in zip(lines[::2], lines[1::2], strict=True):
                kind = {"0": "new", "1": "duplicate"}.get(how, how)
                seen.setdefault(int(seq), kind)
            acked[i] = seen
        log = []
        with UpdateLog(root / "log", readonly=True) as update_log:
            for record in update_log.records():
                rows = int(record.batch.num_rows)
                log.append((record.producer_id, record.seq, record.first_offset, rows))
        return TrialResult(
            applied, offsets, acked, log, dict(self.kills), dict(self.restarts), seconds
        )


# ---------------------------------------------------------------------- commands
@dataclass(slots=True)
class CommandTrialResult:
    """What a :class:`CommandTrial` did.

    Attributes:
        kills: Times the job's process group was SIGKILLed mid-stream.
        job_runs: Times the job was started (the first run, then resumes).
        producer_runs: Times the producer was started.
        producer_exits: Exit status of each producer run.
        logged_at_kill: Rows the log held at each kill.
        seconds: Wall time.
    """

    kills: int = 0
    job_runs: int = 0
    producer_runs: int = 0
    producer_exits: list[int] = field(default_factory=list)
    logged_at_kill: list[int] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(slots=True)
class CommandTrial:
    """Real commands: a job serving an endpoint and a producer, and kill -9.

    The job (``job``: an argv, e.g. ``strata run jobs/stream_ingest.py ...
    --checkpoint-dir D``) runs in its own process group; each time its update log
    at ``log_path`` holds the next of ``kill_at_rows`` rows, the whole group is
    SIGKILLed and the job started again with ``--resume`` after
    ``restart_delay_s``. The producer (``producer``: e.g. ``strata ingest ENDPOINT
    FILE``) is run again whenever it fails (its endpoint went silent past its
    deadline) or, having finished, when the job restarts (so the new run hears its
    ``end``), as a user would rerun it: it resumes where the log ends. Once the job
    has finished, the producer's last run is only waited for (a job that stops at
    ``max_updates`` may leave it without its last acknowledgements).
    """

    job: list[str]
    producer: list[str]
    log_path: Path
    kill_at_rows: tuple[int, ...]
    restart_delay_s: float = 0.5
    timeout_s: float = 900.0
    cwd: str | None = None
    output: Path | None = None  # where the processes' stderr goes

    def _spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        err: Any = subprocess.DEVNULL
        if self.output is not None:
            err = self.output.open("a")
        return subprocess.Popen(
            argv,
            cwd=self.cwd,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,  # its own group: kill -9 takes all of it
        )

    def _logged(self) -> int:
        try:
            with UpdateLog(self.log_path, readonly=True) as log:
                return int(log.committed_offset)
        except Exception:  # not created yet, or being created
            return 0

    def run(self) -> CommandTrialResult:
        """Run to the end; raise :class:`TrialError` on a failure or timeout."""
        result = CommandTrialResult()
        kills = list(self.kill_at_rows)
        start = time.monotonic()
        job = self._spawn(self.job)
        result.job_runs = 1
        producer = self._spawn(self.producer)
        result.producer_runs = 1
        producer_done = False
        try:
            while True:
                if time.monotonic() - start > self.timeout_s:
                    raise TrialError(f"not done in {self.timeout_s} s")
                if kills and job.poll() is None and self._logged() >= kills[0]:
                    os.killpg(job.pid, signal.SIGKILL)
                    job.wait()
                    result.logged_at_kill.append(self._logged())
                    result.kills += 1
                    kills.pop(0)
                    time.sleep(self.restart_delay_s)
                    job = self._spawn([*self.job, "--resume"])
                    result.job_runs += 1
                    if producer_done:  # the new run waits for this producer's end
                        producer = self._spawn(self.producer)
                        result.producer_runs += 1
                        producer_done = False
                code = job.poll()
                if code not in (None, 0):
                    raise TrialError(f"the job failed by itself (exit {code})")
                status = producer.poll()
                if status is not None and not producer_done:
                    result.producer_exits.append(status)
                    producer_done = status == 0 or code == 0
                    if not producer_done:  # its endpoint went silent: run it again
                        producer = self._spawn(self.producer)
                        result.producer_runs += 1
                if code == 0 and producer_done:
                    break
                time.sleep(0.02)
        finally:
            for process in (job, producer):
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        result.seconds = time.monotonic() - start
        return result


# ---------------------------------------------------------------------- the check
@dataclass(frozen=True, slots=True)
class TrialCheck:
    """What :func:`check_trial` found (all zero/true on a correct run).

    Attributes:
        lost: Rows never applied.
        doubled: Rows applied more than once.
        out_of_order: Producers whose rows were applied out of seq order.
        unacked: Batches no producer incarnation saw acknowledged or held.
        acked_not_logged: Acknowledged batches the log does not hold.
        log_duplicates: ``(producer, seq)`` pairs logged more than once.
        error: Why the trial did not finish (a process failed by itself, or it
            timed out); None when it finished.
    """

    lost: int
    doubled: int
    out_of_order: int
    unacked: int
    acked_not_logged: int
    log_duplicates: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the trial kept every exactly-once promise."""
        return self.error is None and not any(
            (
                self.lost,
                self.doubled,
                self.out_of_order,
                self.unacked,
                self.acked_not_logged,
                self.log_duplicates,
            )
        )


def check_trial(plan: TrialPlan, result: TrialResult) -> TrialCheck:
    """Hold a trial's observations against the streams it sent."""
    expected = np.concatenate(
        [
            i * ID_STRIDE + np.arange(n * plan.batch_rows, dtype=np.int64)
            for i, n in enumerate(plan.batches)
        ]
    )
    ids, counts = np.unique(result.applied, return_counts=True)
    missing = np.setdiff1d(expected, ids)
    doubled = int((counts > 1).sum()) + np.setdiff1d(ids, expected).size
    out_of_order = 0
    for i in range(len(plan.batches)):
        mine = result.applied[result.applied // ID_STRIDE == i]
        out_of_order += int(bool(np.any(np.diff(mine) <= 0)))
    logged: dict[tuple[str | None, int | None], int] = {}
    for producer, seq, _, _ in result.log:
        logged[(producer, seq)] = logged.get((producer, seq), 0) + 1
    unacked = acked_not_logged = 0
    for i, n in enumerate(plan.batches):
        for seq in range(1, n + 1):
            if seq not in result.acked[i]:
                unacked += 1
            elif (f"p{i}", seq) not in logged:
                acked_not_logged += 1
    return TrialCheck(
        lost=int(missing.size),
        doubled=int(doubled),
        out_of_order=out_of_order,
        unacked=unacked,
        acked_not_logged=acked_not_logged,
        log_duplicates=sum(1 for c in logged.values() if c > 1),
    )


def run_trials(
    seeds: range | list[int],
    directory: str,
    *,
    plan_for: Callable[[int], TrialPlan] = TrialPlan.draw,
) -> Iterator[tuple[TrialPlan, TrialResult, TrialCheck]]:
    """Run and check one trial per seed, each in its own subdirectory."""
    for seed in seeds:
        plan = plan_for(seed)
        trial_dir = Path(directory) / f"trial-{seed}"
        trial_dir.mkdir(parents=True)
        try:
            result = Trial(plan, str(trial_dir)).run()
        except TrialError as exc:  # counted as a failed run, the others go on
            empty = np.empty(0, np.int64)
            yield (
                plan,
                TrialResult(empty, empty, {}, []),
                TrialCheck(0, 0, 0, 0, 0, 0, error=str(exc)),
            )
            continue
        yield plan, result, check_trial(plan, result)


def summary(checks: list[tuple[TrialPlan, TrialResult, TrialCheck]]) -> dict[str, Any]:
    """Totals over trials: runs, kills by kind, lost and doubled rows."""
    kills: dict[str, int] = {}
    for _, result, _ in checks:
        for target, n in result.kills.items():
            kind = target.split(":")[0]
            kills[kind] = kills.get(kind, 0) + n
    return {
        "runs": len(checks),
        "kills": kills,
        "rows": int(sum(r.applied.size for _, r, _ in checks)),
        "lost": sum(c.lost for _, _, c in checks),
        "doubled": sum(c.doubled for _, _, c in checks),
        "out_of_order": sum(c.out_of_order for _, _, c in checks),
        "failed_runs": sum(not c.ok for _, _, c in checks),
        "errors": [c.error for _, _, c in checks if c.error is not None],
        "windows": sorted({p.window for p, _, _ in checks}),
    }


def to_json(value: Any) -> str:
    """JSON of a summary (numpy-safe)."""
    return json.dumps(value, indent=2, default=int)
