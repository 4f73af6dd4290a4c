"""RapidGNN R4/R5 as a pytest benchmark: the four modes of the sampled gang.

Runs :mod:`run_rapidgnn_throughput` (a 2-trainer gloo gang on CPU, feature
servers with ``NetworkModel(2 ms, 1 GB/s)``, modes a b c d interleaved) and
checks what must hold whatever the machine: R5 (every mode takes exactly the
same per-step losses; the runner asserts it per round), the clients' traffic
counters equal the servers', the cache cuts the remote rows, the prefetcher
leaves the traffic alone, and the results rows are well formed. The throughput
figures are measured and reported, not asserted (targets ``>= 1.3`` and
``>= 0.8`` are judged in the results file).

The figures of ``benchmarks/results/rapidgnn_throughput.json`` come from the
runner itself (``--rounds 5``, see its docstring); this test writes to a
temporary file::

    .venv/bin/python -m pytest -p no:cacheprovider -m large -s \
        benchmarks/operators/test_rapidgnn_throughput.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from results_table import load_rows
from run_rapidgnn_throughput import main

pytestmark = [pytest.mark.large, pytest.mark.slow, pytest.mark.multiprocess]


@pytest.mark.timeout(1800)
def test_four_modes_same_steps_and_honest_traffic(tmp_path: Path) -> None:
    out = tmp_path / "rapidgnn_throughput.json"
    run = main(["--nodes", "100000", "--rounds", "3", "--out", str(out)])
    assert run["losses_equal"] == [True, True, True]
    fits = run["fits"]
    for mode in "abcd":
        assert len(fits[mode]) == 3
        for fit in fits[mode]:
            assert fit["traffic_agrees"] is True
            assert fit["seeds_per_s"] > 0
    for a, b, c, d in zip(*(fits[m] for m in "abcd"), strict=True):
        # Prefetching moves the fetches in time, never changes them.
        assert c["remote_rows_per_epoch"] == a["remote_rows_per_epoch"]
        # The cache (half the epoch's remote rows) cuts them, fills included.
        assert b["remote_rows_per_epoch"] < 0.6 * a["remote_rows_per_epoch"]
        assert d["remote_rows_per_epoch"] == b["remote_rows_per_epoch"]
        assert 0.49 <= d["coverage"] <= 0.51
        assert a["hit_rate"] == 0
        assert d["hit_rate"] > 0.5
    written = json.loads(out.read_text())
    assert written["topic"] == "rapidgnn_throughput"
    rows = load_rows(tmp_path)
    assert {row.topic for row in rows} == {"rapidgnn_throughput"}
    r5 = [row for row in rows if row.work.startswith("R5")]
    assert len(r5) == 1
    assert r5[0].met
