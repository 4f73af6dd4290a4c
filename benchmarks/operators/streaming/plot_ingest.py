"""Plot the 60 s ingest load test: the log against its quota, and server RSS.

Usage (from the repository root; each run is the JSON ``run_streaming.py ingest``
prints)::

    .venv/bin/python benchmarks/operators/streaming/run_streaming.py ingest \\
        --seconds 60 > /tmp/ingest_none.json
    .venv/bin/python benchmarks/operators/streaming/run_streaming.py ingest \\
        --seconds 60 --retention-s 10 > /tmp/ingest_10s.json
    .venv/bin/python benchmarks/operators/streaming/plot_ingest.py \\
        /tmp/ingest_none.json /tmp/ingest_10s.json \\
        --out benchmarks/results/ingest_quota.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    fig, (log_ax, rss_ax) = plt.subplots(1, 2, figsize=(11, 4))
    quota = None
    for path in args.runs:
        run = json.loads(path.read_text())
        retention = run["retention_s"]
        label = (
            "no retention" if retention is None else f"retention every {retention:g} s"
        )
        label += f" ({run['log_full_answers']} 'log full' answers)"
        times, sizes = zip(*run["server"]["log_series"], strict=True)
        log_ax.plot(times, [b / 2**30 for b in sizes], label=label)
        times, rss = zip(*run["rss_series_mb"], strict=True)
        rss_ax.plot(times, rss, label=label)
        quota = run["server"]["quota_bytes"]
    if quota is not None:
        log_ax.axhline(quota / 2**30, color="black", linestyle="--", label="quota")
    log_ax.set(
        xlabel="seconds", ylabel="update log on disk (GiB)", title="Log vs quota"
    )
    rss_ax.set(
        xlabel="seconds", ylabel="server RSS (MiB)", title="Ingest server memory"
    )
    rss_ax.set_ylim(bottom=0)
    log_ax.legend(fontsize=7, loc="center right")
    rss_ax.legend(fontsize=7, loc="lower right")
    for ax in (log_ax, rss_ax):
        ax.grid(alpha=0.3)
    fig.suptitle("60 s of acknowledged ingest over loopback (fsync per ack)")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
