r"""``strata plan JOB``: predict each training plan's epoch time and memory; pick one.

The job is loaded with its ``--set`` overrides, the steps upstream of its
training step run (loading the graph, giving it a task), and the planner
(:mod:`strata.operators.planning`) costs every candidate with this machine's
calibrated kernel rates: full-graph in one process, partition-parallel gangs
(exact, HongTu with chunk counts) and sampled mini-batches. It prints the table
(plan, predicted epoch seconds, peak MB, whether it fits the memory budget, the
choice and each rejection's reason) and a paragraph saying why::

    strata plan jobs/cora_gcn.py
    strata plan jobs/fullgraph_dist.py --set graph=rmat:scale=16,features=128 \\
        --set hidden=128 --memory-budget 2GiB
    strata plan jobs/cora_gcn.py --measure      # run the choice and the runner-up

``--measure`` trains the chosen plan and the fastest rejected one for
``--epochs`` epochs, each in a fresh process, and prints predicted against
measured epoch seconds (the median of the epochs after the first) and peak
resident memory (the training process after its data loaded, plus its gang
workers). Calibration runs once per machine and thread count (a few seconds)
and is cached in ``~/.cache/strata/calibration.json``; ``--recalibrate``
measures again.

Exit status: 0, 1 when a measured run fails, 2 on a usage error or when no
plan fits the budget.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from strata.engine.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_job_arguments

__all__ = ["PlanCommand"]

_MB = 1 << 20


class PlanCommand:
    """``strata plan JOB [--set k=v] [--memory-budget B] [--measure]``."""

    name = "plan"
    add_help = False  # its -h/--help also lists JOB's parameters
    help = "predict each training plan's epoch time and memory, and pick one"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the job, its overrides and the planner's options."""
        add_job_arguments(parser)
        parser.add_argument(
            "--memory-budget",
            metavar="BYTES",
            help="peak resident memory all of a plan's processes may use "
            "(2GiB, 512MiB; default: this process plus the available RAM)",
        )
        parser.add_argument(
            "--max-workers",
            type=int,
            metavar="K",
            help="largest gang to consider (default: the core count)",
        )
        parser.add_argument(
            "--chunks",
            default="2,4",
            metavar="M,M",
            help="HongTu chunk counts per worker to consider (default 2,4)",
        )
        parser.add_argument(
            "--recalibrate",
            action="store_true",
            help="measure this machine's kernel rates again",
        )
        parser.add_argument(
            "--measure",
            action="store_true",
            help="run the chosen plan and the fastest rejected one; print "
            "predicted against measured",
        )
        parser.add_argument(
            "--epochs",
            type=int,
            default=5,
            metavar="N",
            help="epochs per measured run (default 5; the first is not counted)",
        )
        parser.add_argument(
            "--json",
            type=Path,
            metavar="PATH",
            help="also write the table, the choice and any measurements as JSON",
        )

    def run(self, args: argparse.Namespace) -> int:
        """Plan (and measure); print the table and why."""
        from strata.engine.params import JobError, coerce
        from strata.operators.errors import OperatorError
        from strata.operators.planning.calibration import (
            current_rss,
            load_calibration,
        )
        from strata.operators.planning.planner import (
            JobKind,
            PlannerConfig,
            plan_training,
        )
        from strata.operators.planning.runner import (
            job_training,
            measure_plan,
            training_input,
        )

        try:
            budget = coerce(args.memory_budget, int) if args.memory_budget else None
            chunks = tuple(int(c) for c in str(args.chunks).split(",") if c)
            if args.epochs < 2:
                raise ValueError("--epochs: expected at least 2")
            training = job_training(args.job, args.overrides)
        except (JobError, ValueError, OperatorError) as error:
            print(f"strata plan: {error}", file=sys.stderr)
            return EXIT_USAGE
        # Load first: this process then holds what a training process holds
        # before its first epoch (interpreter, torch, the data), before the
        # calibration's own allocations blur the count.
        data = training_input(training)
        rss = current_rss()
        calibration = load_calibration(recalibrate=args.recalibrate)
        sampling = training.sampling
        sampled = None
        if sampling is not None:
            sampled = (sampling.batch_size, tuple(sampling.fanouts))
        planner = PlannerConfig(
            memory_budget=budget, max_workers=args.max_workers, chunks=chunks
        )
        kind = JobKind.SAMPLED if training.sampled else JobKind.FULL_GRAPH
        try:
            report = plan_training(
                data,
                training.train,
                kind=kind,
                sampled=sampled,
                planner=planner,
                calibration=calibration,
                rss_bytes=rss,
            )
        except OperatorError as error:
            print(f"strata plan: {error}", file=sys.stderr)
            return EXIT_USAGE
        print(report.stats.describe())
        print(report.table())
        print()
        print(report.why)
        for note in report.notes:
            print(f"note: {note}")
        out: dict[str, Any] = {"job": args.job, "set": args.overrides}
        out.update(report.to_dict())
        status = EXIT_OK
        if args.measure:
            out["measured"] = []
            runs = [report.chosen]
            runner_up = report.runner_up()
            if runner_up is not None:
                runs.append(runner_up)
            print()
            print(
                "plan                    epoch s pred  meas [min, max]      ratio   "
                "peak MB pred  meas  ratio"
            )
            for predicted in runs:
                try:
                    measured = measure_plan(
                        args.job,
                        args.overrides,
                        predicted.candidate,
                        epochs=args.epochs,
                    )
                except OperatorError as error:
                    print(f"strata plan: {error}", file=sys.stderr)
                    status = EXIT_FAILED
                    continue
                lo, hi = measured.epoch_spread
                time_ratio = predicted.epoch_s / measured.epoch_s
                mem_ratio = predicted.peak_bytes / measured.peak_bytes
                print(
                    f"{predicted.candidate.label:22}  {predicted.epoch_s:9.4f}  "
                    f"{measured.epoch_s:.4f} [{lo:.4f}, {hi:.4f}]  {time_ratio:5.2f}   "
                    f"{predicted.peak_bytes / _MB:9,.0f}  "
                    f"{measured.peak_bytes / _MB:5,.0f}  {mem_ratio:5.2f}"
                )
                out["measured"].append(
                    {
                        "plan": predicted.candidate.label,
                        "chosen": predicted is report.chosen,
                        "predicted": predicted.to_dict(),
                        "measured": measured.to_dict(),
                        "epoch_ratio": time_ratio,
                        "peak_ratio": mem_ratio,
                    }
                )
        if args.json is not None:
            args.json.write_text(
                json.dumps(out, indent=1, default=str), encoding="utf-8"
            )
        return status
