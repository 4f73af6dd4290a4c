"""``strata ingest ENDPOINT FILE``: send an update file to an ingestion endpoint.

Reads a Parquet or CSV update file (:mod:`operators.streaming.update_files`), sends
it in batches of ``--batch-rows`` over a DEALER socket
(:class:`~operators.streaming.client.IngestClient`), resends every batch until the
endpoint acknowledges it, and reports what was acknowledged. Batch ``i`` has
``seq = --first-seq + i`` under ``--producer`` (default: the file's name), so
running the same command again after a failure is safe: batches already logged are
acknowledged as duplicates and not logged twice.

Exit status: 0 when every batch was acknowledged, 1 when some were rejected (the
reasons are printed) or the deadline passed, 2 for a bad file.

Examples:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="strata ingest")
    >>> IngestCommand().configure(parser)
    >>> args = parser.parse_args(["tcp://127.0.0.1:5555", "updates.parquet"])
    >>> args.batch_rows, args.window, args.producer
    (10000, 8, None)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from operators.errors import OperatorError
from operators.streaming.client import IngestClient
from operators.streaming.update_files import read_update_file, update_batches

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class IngestCommand:
    """``strata ingest``: an :class:`engine.command.Command`."""

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
            "--timeout", type=float, default=2.0, help="resend after (s)"
        )
        parser.add_argument(
            "--deadline", type=float, default=None, help="give up after (s)"
        )
        parser.add_argument(
            "--no-end",
            action="store_true",
            help="do not tell the endpoint this producer is done",
        )
        parser.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args: argparse.Namespace) -> int:
        """Send the file; print the report; return the exit status."""
        try:
            table = read_update_file(args.file)
        except (OperatorError, OSError, ValueError) as exc:
            print(f"strata ingest: {exc}", file=sys.stderr)
            return EXIT_USAGE
        producer = args.producer or args.file.name
        with IngestClient(args.endpoint, producer) as client:
            try:
                report = client.send_all(
                    update_batches(table, args.batch_rows),
                    first_seq=args.first_seq,
                    window=args.window,
                    timeout_s=args.timeout,
                    deadline_s=args.deadline,
                )
            except TimeoutError as exc:
                print(f"strata ingest: {exc}", file=sys.stderr)
                return EXIT_FAILED
            if not args.no_end:
                try:
                    client.end(timeout_s=args.timeout * 2)
                except TimeoutError:
                    print(
                        "strata ingest: the endpoint did not answer 'end'",
                        file=sys.stderr,
                    )
        if args.json:
            print(json.dumps(report.to_dict(), indent=2))
        else:
            rate = report.acked_rows / report.seconds if report.seconds else 0.0
            print(
                f"{args.file.name} -> {args.endpoint} as {producer!r}: "
                f"{report.batches} batches, {report.acked_rows:,} rows acknowledged "
                f"(offsets {report.first_offset}..{report.last_offset}), "
                f"{report.duplicate_batches} duplicate batches "
                f"({report.duplicate_rows:,} rows), {len(report.rejected)} rejected, "
                f"{report.resends} resends, {report.seconds:.2f} s "
                f"({rate:,.0f} rows/s)"
            )
            for seq, reason in sorted(report.rejected.items()):
                print(f"  rejected seq {seq}: {reason}", file=sys.stderr)
        return EXIT_FAILED if report.rejected else EXIT_OK
