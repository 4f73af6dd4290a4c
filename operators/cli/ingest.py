"""``strata ingest ENDPOINT FILE``: send an update file to an ingestion endpoint.

Reads a Parquet or CSV update file (:mod:`strata.operators.streaming.update_files`),
sends it in batches of ``--batch-rows`` over a DEALER socket
(:class:`~strata.operators.streaming.client.IngestClient`), resends every batch until
the endpoint's log holds it, and reports what was acknowledged. Batch ``i`` has ``seq =
--first-seq + i`` under ``--producer`` (default: the file's name), so running the same
command again after a failure is safe: the endpoint says which batches its log holds,
those are skipped, and nothing is logged twice.

``--rate ROWS_PER_S`` sends at a steady rate, as producer load tools do. The client
gives up when the endpoint has not answered for ``--ack-timeout`` seconds (10 by
default): an endpoint where nothing listens is an error naming it, never a hang.

Exit status: 0 when the log holds every batch (newly acknowledged or held before),
1 when some were rejected (the reasons are printed) or the endpoint went silent,
2 for a bad argument or file (checked before anything is sent).

Examples:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="strata ingest")
    >>> IngestCommand().configure(parser)
    >>> args = parser.parse_args(["tcp://127.0.0.1:5555", "updates.parquet"])
    >>> args.batch_rows, args.window, args.producer, args.ack_timeout, args.rate
    (10000, 8, None, 10.0, None)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from strata.operators.errors import OperatorError
from strata.operators.streaming.client import IngestClient, IngestError, IngestReport
from strata.operators.streaming.update_files import read_update_file, update_batches

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_ENDPOINT = re.compile(r"\A(tcp://[^:/\s]+:\d{1,5}|ipc://\S+|inproc://\S+)\Z")


def _usage(message: str) -> int:
    print(f"strata ingest: {message}", file=sys.stderr)
    return EXIT_USAGE


def check_arguments(args: argparse.Namespace) -> str | None:
    """The first bad argument, as a one-line message; None when all are good."""
    if not _ENDPOINT.match(args.endpoint):
        return (
            f"ENDPOINT: expected tcp://HOST:PORT (or ipc://PATH), got {args.endpoint!r}"
        )
    for name, value in (("--batch-rows", args.batch_rows), ("--window", args.window)):
        if value < 1:
            return f"{name}: expected an integer >= 1, got {value}"
    if args.first_seq < 0:
        return f"--first-seq: expected an integer >= 0, got {args.first_seq}"
    for name, number in (
        ("--timeout", args.timeout),
        ("--ack-timeout", args.ack_timeout),
        ("--deadline", args.deadline),
        ("--rate", args.rate),
    ):
        if number is not None and not number > 0:
            return f"{name}: expected a number > 0, got {number}"
    if args.producer is not None and not 1 <= len(args.producer) <= 256:
        return f"--producer: expected 1-256 characters, got {args.producer!r}"
    return None


class IngestCommand:
    """``strata ingest``: an :class:`strata.engine.command.Command`."""

    name = "ingest"
    help = "send an update file (Parquet/CSV) to a streaming job's ingestion endpoint"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``ENDPOINT``, ``FILE`` and the sending options."""
        parser.add_argument("endpoint", help="e.g. tcp://127.0.0.1:5555")
        parser.add_argument("file", type=Path, help="updates (.parquet, .csv, .tsv)")
        parser.add_argument("--batch-rows", type=int, default=10_000)
        parser.add_argument("--producer", help="producer id (default: the file name)")
        parser.add_argument("--first-seq", type=int, default=1)
        parser.add_argument("--window", type=int, default=8, help="batches in flight")
        parser.add_argument(
            "--rate", type=float, default=None, help="send at most ROWS_PER_S rows/s"
        )
        parser.add_argument(
            "--timeout", type=float, default=2.0, help="resend after (s)"
        )
        parser.add_argument(
            "--ack-timeout",
            type=float,
            default=10.0,
            help="give up when the endpoint is silent this long (s)",
        )
        parser.add_argument(
            "--deadline", type=float, default=None, help="give up after (s) in all"
        )
        parser.add_argument(
            "--no-end",
            action="store_true",
            help="do not tell the endpoint this producer is done",
        )
        parser.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args: argparse.Namespace) -> int:
        """Send the file; print the report; return the exit status."""
        problem = check_arguments(args)
        if problem is not None:
            return _usage(problem)
        try:
            table = read_update_file(args.file)
        except OperatorError as exc:
            return _usage(str(exc))
        producer = args.producer or args.file.name
        try:
            client = IngestClient(args.endpoint, producer)
        except ValueError as exc:
            return _usage(str(exc))
        with client:
            try:
                report = client.send_all(
                    update_batches(table, args.batch_rows),
                    first_seq=args.first_seq,
                    window=args.window,
                    timeout_s=args.timeout,
                    ack_timeout_s=args.ack_timeout,
                    deadline_s=args.deadline,
                    rate_rows_per_s=args.rate,
                )
            except IngestError as exc:
                print(f"strata ingest: {exc}", file=sys.stderr)
                return EXIT_FAILED
            if not args.no_end:
                try:
                    client.end(timeout_s=args.ack_timeout)
                except IngestError:
                    print(
                        f"strata ingest: endpoint {args.endpoint} did not answer 'end'",
                        file=sys.stderr,
                    )
        _print(report, args, producer)
        return EXIT_OK if report.complete else EXIT_FAILED


def _print(report: IngestReport, args: argparse.Namespace, producer: str) -> None:
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        rate = report.acked_rows / report.seconds if report.seconds else 0.0
        print(
            f"{args.file.name} -> {args.endpoint} as {producer!r}: "
            f"{report.batches} batches: {report.acked_batches} newly logged "
            f"({report.acked_rows:,} rows, offsets {report.first_offset}.."
            f"{report.last_offset}), {report.duplicate_batches} already held "
            f"({report.duplicate_rows:,} rows; {report.held_batches} skipped), "
            f"{len(report.rejected)} rejected; {report.resends} resends, "
            f"{report.gaps} gaps, {report.full} log-full waits, "
            f"{report.seconds:.2f} s ({rate:,.0f} rows/s)"
        )
    for seq, reason in sorted(report.rejected.items()):
        print(f"  rejected seq {seq}: {reason}", file=sys.stderr)
