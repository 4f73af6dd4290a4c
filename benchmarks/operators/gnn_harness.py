"""Timing and memory measurement shared by the Strata and PyG benchmark runners.

Plain Python (psutil only), so each runner process measures itself the same way;
``benchmarks/peers/dgl/dgl_harness.py`` is the same code for the DGL environment.
Peak memory is the process's resident set size, sampled every 5 ms by a thread
while the work runs (``peak_rss_mb``), next to the RSS just before the first
measured step (``base_rss_mb``: data and model loaded) and the kernel's lifetime
high-water mark (``maxrss_mb``).
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil


class RssPoller:
    """Samples this process's RSS in a background thread; ``peak`` in bytes."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self._process = psutil.Process()
        self._interval = interval_s
        self._stop = threading.Event()
        self.peak = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            self._stop.wait(self._interval)

    def __enter__(self) -> RssPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)


def measure(step: Callable[[], Any], *, warmup: int, rounds: int) -> dict[str, Any]:
    """Run ``step`` warmup + rounds times; return times and memory figures."""
    base = psutil.Process().memory_info().rss
    times = []
    cpu_times = []
    warmup_times = []
    with RssPoller() as poller:
        for i in range(warmup + rounds):
            start = time.perf_counter()
            cpu_start = time.process_time()
            step()
            if i < warmup:
                warmup_times.append(time.perf_counter() - start)
            else:
                times.append(time.perf_counter() - start)
                cpu_times.append(time.process_time() - cpu_start)
    times_sorted = sorted(times)
    mb = 1024 * 1024
    return {
        "times_s": times,
        # Warm-up steps (the first compiles numba kernels and fills caches).
        "warmup_s": warmup_times,
        # CPU seconds of the whole process per round (all threads): less
        # sensitive than wall time to other tenants of a shared machine.
        "cpu_s": cpu_times,
        "median_s": times_sorted[len(times) // 2],
        "min_s": times_sorted[0],
        "base_rss_mb": base / mb,
        "peak_rss_mb": poller.peak / mb,
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def emit(result: dict[str, Any]) -> None:
    """Print the result as one JSON line on stdout (the parent parses the last)."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
