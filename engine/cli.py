"""The ``strata`` command line: ``run`` and ``describe`` jobs, plus added commands.

``main(argv, commands)`` builds one parser from the engine's commands and any extra
:class:`~strata.engine.command.Command` objects (graph-aware packages add ``dataset``
and ``partition`` this way, through ``strata.operators.cli.main``).

Exit status: 0 on success, 1 when a step fails, 2 for usage errors (unknown job,
unknown ``--set`` key or bad value, invalid pipeline, an output path that cannot be
written), 130 when interrupted (Ctrl-C). A failed or interrupted run still writes
its report, with ``status`` ``failed`` or ``interrupted`` and the ``error``.

Every command takes ``-v`` (debug lines) and ``-q`` (warnings only, no bars): what
steps log goes to stderr (:func:`strata.engine.progress.configure_logging`), as
tqdm bars on a terminal and one flushed line per record elsewhere, so
``strata run jobs/cora_gcn.py | cat`` shows each epoch as it ends.

Output paths (``--report``, ``--checkpoint-dir``) are checked before the
job is built, so a bad one costs no work; ``--report -`` prints the JSON report to
stdout and moves the job's outputs to stderr.

Examples:
    >>> main(["describe", "strata.engine._example_job"])
    pipeline 'example': 2 steps
      numbers  batch  strata.engine._example_job:numbers
      total    batch  strata.engine._example_job:total    <- numbers  [outputs]
    0
    >>> main(["run", "strata.engine._example_job", "--set", "count=4", "--quiet"])
    total = 6
    0
    >>> main(["run", "strata.engine._example_job", "--set", "size=4"])  # stderr: count
    2

Checkpointed streaming runs (see :mod:`strata.engine.checkpoint`)::

    strata run jobs/stream_ingest.py --checkpoint-dir ckpt --checkpoint-every 1000
    strata run jobs/stream_ingest.py --checkpoint-dir ckpt --resume   # after a crash

Gangs across machines (:mod:`strata.engine.gang.cluster`): run the same command
on every node, naming the node; each gang step starts this node's share of its
ranks, and every node prints the same outputs::

    strata run jobs/fullgraph_dist.py --set workers=4 \
        --nnodes 2 --node-rank 0 --master-addr node0.example --master-port 29500
    strata run jobs/fullgraph_dist.py --set workers=4 \
        --nnodes 2 --node-rank 1 --master-addr node0.example --master-port 29500

Each node writes its own ``--report``; ``{node_rank}`` in the path becomes the
node's rank (``--report run-{node_rank}.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import logging
import os
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from strata.engine.checks import (
    at_least,
    check_output_dir,
    check_output_file,
    is_stdout,
)
from strata.engine.command import Command
from strata.engine.config import CheckpointConfig, RunConfig
from strata.engine.errors import CheckpointError, PlanError, UsageError
from strata.engine.executors import EXECUTORS, RunResult, execute
from strata.engine.job import JobError, job_spec, load_job
from strata.engine.pipeline import Pipeline
from strata.engine.progress import configure_logging, reset_logging
from strata.engine.report import RunReport

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C

_log = logging.getLogger(__name__)


class RunCommand:
    """``strata run JOB``: build the job's pipeline, run it, report."""

    name = "run"
    add_help = False  # its -h/--help also lists JOB's parameters
    help = "run a job (a job file or module exposing build(...) -> Pipeline)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``JOB``, ``--executor``, ``--set``, ``--report`` and checkpoints."""
        add_job_arguments(parser)
        parser.add_argument(
            "--executor",
            choices=sorted(EXECUTORS),
            default="local",
            help="local: threads (default); process: one process per step or "
            "shard; ray: Ray tasks and actors",
        )
        parser.add_argument(
            "--ray-address",
            metavar="ADDRESS",
            help="with --executor ray: the Ray cluster to join ('auto', "
            "'host:6379', 'ray://host:10001'; default: start a local one)",
        )
        parser.add_argument(
            "--report",
            type=Path,
            metavar="PATH",
            help="write the JSON run report here ('-': to stdout, and the outputs "
            "to stderr)",
        )
        group = parser.add_argument_group("checkpoints (streaming jobs)")
        group.add_argument(
            "--checkpoint-dir",
            type=Path,
            metavar="DIR",
            help="checkpoint stateful steps into DIR (exactly-once recovery)",
        )
        group.add_argument(
            "--checkpoint-every",
            type=int,
            metavar="N",
            help="start a checkpoint after N items from a source (default 1000 "
            "when no --checkpoint-interval is given)",
        )
        group.add_argument(
            "--checkpoint-interval",
            type=float,
            metavar="SECONDS",
            help="start a checkpoint at least this often",
        )
        group.add_argument(
            "--checkpoint-keep",
            type=int,
            default=2,
            metavar="K",
            help="complete checkpoints to keep (default 2)",
        )
        group.add_argument(
            "--resume",
            action="store_true",
            help="continue from the last complete checkpoint in --checkpoint-dir",
        )
        nodes = parser.add_argument_group(
            "multi-node gangs",
            "run the same command on every node; each gang step starts this "
            "node's share (workers / nnodes) of its ranks. torchrun's variables "
            "work too (torchrun --nproc-per-node 1).",
        )
        nodes.add_argument(
            "--nnodes", type=int, metavar="N", help="how many nodes run the job"
        )
        nodes.add_argument(
            "--node-rank",
            type=int,
            metavar="R",
            help="this node, 0 .. N-1 (node 0 hosts the rendezvous store)",
        )
        nodes.add_argument(
            "--master-addr",
            metavar="HOST",
            help="node 0's address, reachable from every node",
        )
        nodes.add_argument(
            "--master-port",
            type=int,
            metavar="PORT",
            help="a free port on node 0 (default 29500)",
        )

    def run(self, args: argparse.Namespace) -> int:
        """Run the job; print its outputs; return the exit status."""
        try:
            group = _node_group(args)
            executor = _executor(args)
        except (UsageError, ValueError) as error:
            print(f"strata run: {error}", file=sys.stderr)
            return EXIT_USAGE
        if group is None:
            return self._run(args, executor)
        from strata.engine.gang.cluster import launched_as

        if args.report is not None:
            args.report = Path(
                str(args.report).replace("{node_rank}", str(group.node_rank))
            )
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(launched_as(group))
            except ValueError as error:  # node 0 cannot listen on the port
                print(f"strata run: {error}", file=sys.stderr)
                return EXIT_USAGE
            return self._run(args, executor)

    def _run(self, args: argparse.Namespace, executor: Any) -> int:
        try:  # output paths first: a refused path must not cost a whole run
            if args.report is not None:
                check_output_file(args.report, argument="--report", where="strata run")
            if args.checkpoint_dir is not None:
                check_output_dir(
                    args.checkpoint_dir, argument="--checkpoint-dir", where="strata run"
                )
        except UsageError as error:
            print(f"strata run: {error}", file=sys.stderr)
            return EXIT_USAGE
        loaded = _build(args)
        if isinstance(loaded, int):
            return loaded
        module, pipeline, params = loaded
        try:
            checkpoint = _checkpoint_config(args)
        except ValueError as error:
            print(f"strata run: {error}", file=sys.stderr)
            return EXIT_USAGE
        # With ``--report -`` stdout carries the JSON report alone; the outputs
        # then go to stderr with the step table.
        report_to_stdout = is_stdout(args.report)
        out = sys.stderr if report_to_stdout else sys.stdout
        config = RunConfig(
            progress=not args.quiet and sys.stderr.isatty(),
            checkpoint=checkpoint,
            resume=args.resume,
        )
        _log.debug("running %s on the %s executor", args.job, args.executor)
        start = time.perf_counter()
        try:
            with reserve_stdout() if report_to_stdout else contextlib.nullcontext():
                result = execute(
                    pipeline,
                    executor,
                    config=config,
                    check=False,
                    job=args.job,
                    params=params,
                )
        except (PlanError, CheckpointError) as error:
            print(f"strata run: {error}", file=sys.stderr)
            return EXIT_USAGE
        except ImportError as error:  # the executor's library (Ray) is missing
            _stopped(args, params, start, "failed", f"{type(error).__name__}: {error}")
            print(f"strata run: {error}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:  # Ctrl-C: say so, in the report too
            status = _stopped(args, params, start, "interrupted", "KeyboardInterrupt")
            print("strata run: interrupted", file=sys.stderr)
            return status if status != EXIT_OK else EXIT_INTERRUPTED
        except Exception as error:  # the executor itself failed: report it too
            _stopped(args, params, start, "failed", f"{type(error).__name__}: {error}")
            raise
        status = _write_report(args, result.report)
        if status != EXIT_OK:
            return status
        if result.error is not None:
            chain = traceback.format_exception(result.error)
            print("".join(chain).rstrip(), file=sys.stderr)
            print(f"strata run: failed: {result.error}", file=sys.stderr)
            return EXIT_FAILED
        render = getattr(module, "render", None)
        text = render(result.outputs) if callable(render) else _format(result.outputs)
        if text:
            print(text, file=out)
        if not args.quiet:
            print(_step_table(result), file=sys.stderr)
        return EXIT_OK


class DescribeCommand:
    """``strata describe JOB``: print the validated plan, as text or Mermaid."""

    name = "describe"
    add_help = False  # its -h/--help also lists JOB's parameters
    help = "print a job's plan (text, or a Mermaid flowchart with --mermaid)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``JOB``, ``--set`` and ``--mermaid``."""
        add_job_arguments(parser)
        parser.add_argument("--mermaid", action="store_true", help="print Mermaid")

    def run(self, args: argparse.Namespace) -> int:
        """Print the plan; return the exit status."""
        loaded = _build(args)
        if isinstance(loaded, int):
            return loaded
        try:
            print(loaded[1].describe(mermaid=args.mermaid))
        except PlanError as error:
            print(f"strata describe: {error}", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK


def main(argv: Sequence[str] | None = None, commands: Sequence[Command] = ()) -> int:
    """Parse ``argv`` and run the chosen command; return the exit status.

    Args:
        argv: Arguments without the program name (default: ``sys.argv[1:]``).
        commands: Extra subcommands, after the engine's ``run`` and ``describe``.
    """
    passive_openmp_threads()
    parser = argparse.ArgumentParser(
        prog="strata", description="Strata: dataflow pipelines for graphs and GNNs."
    )
    # The version is looked up only when asked for: finding the distribution
    # reads every installed package's file list (0.2-1 s with torch installed).
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    table: dict[str, Command] = {}
    builtin: list[Command] = [RunCommand(), DescribeCommand()]
    chosen = next(
        (a for a in (sys.argv[1:] if argv is None else argv) if a[:1] != "-"), None
    )
    for command in [*builtin, *commands]:
        sub = subparsers.add_parser(
            command.name,
            help=command.help,
            description=command.help,
            add_help=getattr(command, "add_help", True),  # False: it adds its own
        )
        _add_verbosity(sub)
        if command.name == chosen:  # configure only the command that runs, so the
            command.configure(sub)  # others' modules (storage: torch) stay unimported
        table[command.name] = command
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    configure_logging(-1 if args.quiet else args.verbose)
    try:
        return table[args.command].run(args)
    except BrokenPipeError:
        # stdout was closed early (``strata run ... | head``): not the job's failure.
        # Point stdout at /dev/null so the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        reset_logging()


#: Settings that already say how idle OpenMP threads wait; any one of them set
#: leaves the choice to the user.
OPENMP_WAIT_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def passive_openmp_threads() -> None:
    """Make idle OpenMP threads sleep, unless the environment says otherwise.

    A job runs two OpenMP runtimes side by side: torch's and the one numba's
    parallel kernels start. By default an idle OpenMP thread spins for a while
    before it sleeps, so each runtime's idle threads burn the cores the other
    one's work needs. On a busy 2-core machine the Cora job's epoch measured
    375-400 ms that way and 32-76 ms with ``OMP_WAIT_POLICY=PASSIVE`` (60-77 ms
    with numba's workqueue layer, 67 ms with one numba thread). Set before torch
    or numba start their threads (the job's modules import them later), and
    inherited by worker processes.
    """
    if not any(name in os.environ for name in OPENMP_WAIT_SETTINGS):
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def _add_verbosity(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more detail on stderr: debug lines, with times and logger names",
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="warnings and errors only: no progress lines, bars or step table",
    )


class _VersionAction(argparse.Action):
    """``--version``: print ``strata <version>`` and exit (argparse's, made lazy)."""

    def __init__(self, option_strings: Sequence[str], dest: str) -> None:
        super().__init__(
            option_strings,
            dest=dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"strata {version()}")
        parser.exit()


#: The distribution this package is published as (pyproject's ``name``).
DISTRIBUTION = "strata-gnn"


def version() -> str:
    """The installed distribution's version (from its metadata), or "unknown"."""
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version(DISTRIBUTION)
    # Installed under another name: find it by the package it provides (slow).
    names = importlib.metadata.packages_distributions().get("strata", [])
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


@contextlib.contextmanager
def reserve_stdout() -> Iterator[None]:
    """Send whatever the work prints to stderr, keeping stdout for a report.

    File descriptor 1 points at stderr inside the block, so prints of the job, of
    its threads and of worker processes started inside it all land on stderr;
    it points back at the real stdout afterwards.
    """
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (captured)
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    saved = os.dup(fd)
    try:
        sys.stderr.flush()
        os.dup2(sys.stderr.fileno(), fd)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)


def _write_report(args: argparse.Namespace, report: RunReport) -> int:
    """Write ``report`` where ``--report`` says (if it does); return the status."""
    if is_stdout(args.report):
        print(report.to_json(), flush=True)
    elif args.report is not None:
        try:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            report.write(args.report)
        except OSError as error:  # the path changed since it was checked
            message = UsageError.build(
                "--report",
                "strata run",
                "a writable file path",
                f"{str(args.report)!r} ({error.strerror or error})",
            )
            print(f"strata run: {message}", file=sys.stderr)
            return EXIT_FAILED
    return EXIT_OK


def _stopped(
    args: argparse.Namespace,
    params: Mapping[str, Any],
    start: float,
    status: str,
    error: str,
) -> int:
    """Write the report of a run that ended without a result (no step counters)."""
    report = RunReport(
        job=args.job,
        executor=args.executor,
        params=params,
        status=status,
        error=error,
        wall_s=round(time.perf_counter() - start, 6),
    )
    return _write_report(args, report)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``JOB``, ``--set KEY=VALUE`` and a ``--help`` that lists JOB's parameters.

    For every command that takes a job (``run``, ``describe``, ``plan``); such a
    command sets ``add_help = False`` so that this ``--help`` replaces argparse's.
    """
    parser.add_argument(
        "-h",
        "--help",
        action=_JobHelp,
        help="show this help (and, after JOB, its parameters) and exit",
    )
    parser.add_argument("job", help="a job file (jobs/degree_stats.py) or module")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a job parameter (repeatable; dotted keys such as train.lr "
        "set a nested config's field; JOB --help lists them)",
    )


class _JobHelp(argparse.Action):
    """``--help``: the command's options, then the parameters of the JOB given."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS)
        self.help = kwargs.get("help")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.print_help()
        job = getattr(namespace, "job", None)
        if job:
            try:
                text = job_spec(load_job(job)).help()
            except (JobError, UsageError) as error:
                print(f"{parser.prog}: {error}", file=sys.stderr)
                parser.exit(EXIT_USAGE)
            print(f"\n{text}")
        parser.exit(EXIT_OK)


def _build(args: argparse.Namespace) -> tuple[Any, Pipeline, dict[str, Any]] | int:
    prog = f"strata {args.command}"
    try:
        module = load_job(args.job)
        spec = job_spec(module)
        arguments = spec.arguments(args.overrides)
    except (JobError, UsageError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return EXIT_USAGE
    params = spec.report_params(arguments)
    try:
        pipeline = module.build(**arguments)
    except UsageError as error:  # already names the parameter and the job
        print(f"{prog}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as error:
        # A job rejecting a parameter value (e.g. an unknown model name) is a usage
        # error: report its message, not a traceback.
        print(f"{prog}: {args.job}.build(): {error}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(pipeline, Pipeline):
        got = type(pipeline).__qualname__
        print(
            f"{prog}: {args.job}.build() returned {got}, not a Pipeline",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return module, pipeline, params


def _executor(args: argparse.Namespace) -> Any:
    """``--executor`` as a name, or a Ray executor joining ``--ray-address``."""
    if args.ray_address is None:
        return args.executor
    if args.executor != "ray":
        raise UsageError.build(
            "--ray-address",
            "strata run",
            "--executor ray",
            f"--executor {args.executor}",
            "--ray-address names the Ray cluster the ray executor joins.",
        )
    from strata.engine.executors.ray_driver import RayExecutor

    return RayExecutor(address=args.ray_address)


#: The port node 0 listens on when --master-port is not given (torchrun's).
DEFAULT_MASTER_PORT = 29500
#: Variables whose presence means the node group comes from the environment.
_NODE_VARIABLES = ("STRATA_NNODES", "TORCHELASTIC_RUN_ID", "GROUP_RANK")


def _node_group(args: argparse.Namespace) -> Any:
    """The ``--nnodes`` options as a ``NodeGroup``, or ``None`` (one node)."""
    given = {
        "--node-rank": args.node_rank,
        "--master-addr": args.master_addr,
        "--master-port": args.master_port,
    }
    if args.nnodes is None:
        named = [name for name, value in given.items() if value is not None]
        if named:
            raise UsageError.build(
                named[0],
                "strata run",
                "--nnodes with it",
                "no --nnodes",
                "the multi-node options describe one node of --nnodes N.",
            )
        if not any(name in os.environ for name in _NODE_VARIABLES):
            return None
        from strata.engine.gang.cluster import current

        return current()  # torchrun's (or STRATA_*) variables; ValueError if bad
    at_least("strata run", 1, **{"--nnodes": args.nnodes})
    if args.nnodes == 1:
        return None
    if args.executor == "ray":
        raise UsageError.build(
            "--nnodes",
            "strata run",
            "no --nnodes with --executor ray",
            f"--nnodes {args.nnodes}",
            "Ray places a gang's ranks across its cluster itself: start the "
            "job once, with --ray-address.",
        )
    if args.node_rank is None or not 0 <= args.node_rank < args.nnodes:
        got = "none" if args.node_rank is None else str(args.node_rank)
        raise UsageError.build(
            "--node-rank",
            "strata run",
            f"0 <= --node-rank < --nnodes ({args.nnodes})",
            got,
            "number the nodes 0 .. N-1; node 0 hosts the rendezvous store.",
        )
    if not args.master_addr:
        raise UsageError.build(
            "--master-addr",
            "strata run",
            "node 0's address (every node names the same one)",
            "none",
            "e.g. --master-addr node0.example (127.0.0.1 for nodes on one machine).",
        )
    port = DEFAULT_MASTER_PORT if args.master_port is None else args.master_port
    if not 1 <= port <= 65535:
        raise UsageError.build(
            "--master-port", "strata run", "a port 1..65535", str(port)
        )
    from strata.engine.gang.cluster import NodeGroup

    return NodeGroup(args.nnodes, args.node_rank, args.master_addr, port)


def _checkpoint_config(args: argparse.Namespace) -> CheckpointConfig | None:
    """``--checkpoint-*`` and ``--resume`` as a config (``ValueError`` if unusable)."""
    if args.checkpoint_dir is None:
        given = args.checkpoint_every or args.checkpoint_interval or args.resume
        if given:
            msg = "--checkpoint-every, --checkpoint-interval and --resume need "
            raise ValueError(msg + "--checkpoint-dir")
        return None
    every, interval = args.checkpoint_every, args.checkpoint_interval
    at_least(
        "strata run",
        1,
        **{"--checkpoint-every": every, "--checkpoint-keep": args.checkpoint_keep},
    )
    at_least("strata run", 1e-3, **{"--checkpoint-interval": interval})
    if every is None and interval is None:
        every = 1000  # a default that keeps replay short without costing much
    return CheckpointConfig(
        args.checkpoint_dir,
        every_items=every,
        interval_s=interval,
        keep=args.checkpoint_keep,
    )


def _format(outputs: Mapping[str, Any]) -> str:
    width = max((len(k) for k in outputs), default=0)
    return "\n".join(f"{key.ljust(width)} = {value}" for key, value in outputs.items())


def _step_table(result: RunResult) -> str:
    report = result.report
    lines = [
        f"{report.job}: {report.status} in {report.wall_s:.2f}s on {report.executor}",
        f"  {'step':<16}{'items in':>10}{'items out':>11}{'MB out':>9}"
        f"{'busy s':>9}{'blocked s':>11}{'wall s':>9}",
    ]
    for step_id, step in report.steps.items():
        lines.append(
            f"  {step_id:<16}{step.items_in:>10}{step.items_out:>11}"
            f"{step.bytes_out / 1e6:>9.1f}{step.busy_s:>9.2f}{step.blocked_s:>11.2f}"
            f"{step.wall_s:>9.2f}"
        )
    return "\n".join(lines)
