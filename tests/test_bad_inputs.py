"""Every ``strata`` command against a catalogue of bad inputs (issue 12, item 5).

Each case is an argv, the exit status it must end with (``ANY``: any non-zero
status) and substrings its one-line error must contain: the argument's name and
the bad value. No case may print a traceback. Most cases run in-process through
the ``strata`` console script's function (``strata.operators.cli.main:main``); a few run
as real subprocesses to show that the installed entry point behaves the same.

Placeholders in the argv (``{tmp}``, ``{file}``, ``{binary}``, ``{edges}``,
``{updates}``, ``{job}``, and the malformed data-in files ``{parquet}``,
``{truncated}``, ``{badweight}``, ``{strays}``, ``{metis}``, ``{mtx}``) are filled per
test with paths under ``tmp_path``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.operators.cli.main import main

ANY = -1  # any non-zero exit status

SBM = "sbm:n=200,blocks=2,features=0"
EXAMPLE = "strata.engine._example_job"
NOWHERE = "/proc/strata-no-such-dir/out"  # /proc refuses new files, even for root

MARKER_JOB = '''
"""A job whose first step leaves a marker file: it shows whether work started."""

from pathlib import Path

from strata.engine import Pipeline


def touch(marker: str) -> list[int]:
    Path(marker).write_text("ran")
    print("the job chatters on stdout")
    return [1, 2]


def total(values: list[int]) -> dict[str, int]:
    return {"total": sum(values)}


def build(marker: str = "marker.txt") -> Pipeline:
    p = Pipeline("marker")
    p.step("touch", touch, marker=marker)
    p.step("total", total, "touch")
    p.record("total")
    return p
'''


@dataclass(frozen=True)
class Case:
    """One bad invocation: ``strata *argv`` must exit ``code`` and name ``says``."""

    id: str
    argv: tuple[str, ...]
    code: int
    says: tuple[str, ...]


def case(id: str, argv: str | list[str], code: int, *says: str) -> Case:
    """Build a case; a string argv is split on spaces."""
    parts = argv.split() if isinstance(argv, str) else argv
    return Case(id, tuple(parts), code, says)


CASES = [
    # -- strata run ----------------------------------------------------------------
    case(
        "run-report-under-proc",
        f"run {EXAMPLE} --quiet --report {NOWHERE}.json",
        2,
        "--report",
        f"'{NOWHERE}.json'",
        "writable file path",
    ),
    case(
        "run-report-parent-is-file",
        f"run {EXAMPLE} --quiet --report {{file}}/r.json",
        2,
        "--report",
        "is a file",
    ),
    case(
        "run-report-is-dir",
        f"run {EXAMPLE} --quiet --report {{tmp}}",
        2,
        "--report",
        "(a directory)",
    ),
    case(
        "run-checkpoint-dir-is-file",
        f"run {EXAMPLE} --quiet --checkpoint-dir {{file}}",
        2,
        "--checkpoint-dir",
        "(a file)",
    ),
    case(
        "run-checkpoint-every-0",
        f"run {EXAMPLE} --checkpoint-dir {{tmp}}/ck --checkpoint-every 0",
        2,
        "--checkpoint-every",
        "got 0",
    ),
    case(
        "run-checkpoint-keep-0",
        f"run {EXAMPLE} --checkpoint-dir {{tmp}}/ck --checkpoint-keep 0",
        2,
        "--checkpoint-keep",
        "got 0",
    ),
    case(
        "run-checkpoint-interval-0",
        f"run {EXAMPLE} --checkpoint-dir {{tmp}}/ck --checkpoint-interval 0",
        2,
        "--checkpoint-interval",
        "got 0.0",
    ),
    case(
        "run-checkpoint-every-without-dir",
        f"run {EXAMPLE} --checkpoint-every 5",
        2,
        "--checkpoint-every",
        "--checkpoint-dir",
    ),
    case(
        "run-set-bad-int",
        f"run {EXAMPLE} --set count=four",
        2,
        "--set count",
        "'four'",
        "expected int",
    ),
    case("run-set-unknown-key", f"run {EXAMPLE} --set size=4", 2, "'size'"),
    case("run-set-no-equals", f"run {EXAMPLE} --set count", 2, "'count'", "key=value"),
    case("run-missing-job", "run no/such/job.py", 2, "JOB", "'no/such/job.py'"),
    case("run-missing-module", "run no_such_job_module", 2, "'no_such_job_module'"),
    case("run-job-is-dir", "run {tmp}", 2, "JOB", "is a directory"),
    case("run-executor", f"run {EXAMPLE} --executor spark", 2, "--executor", "'spark'"),
    case(
        "run-degree-negative-edges",
        "run jobs/degree_stats.py --quiet --set num_edges=-5",
        2,
        "num_edges",
        "-5",
        ">= 1",
    ),
    case(
        "run-degree-zero-shards",
        "run jobs/degree_stats.py --quiet --set shards=0",
        2,
        "shards",
        "got 0",
    ),
    case(
        "run-degree-zero-batch",
        "run jobs/degree_stats.py --quiet --set batch_rows=0",
        2,
        "batch_rows",
        "got 0",
    ),
    case(
        "run-degree-zero-nodes",
        "run jobs/degree_stats.py --quiet --set num_nodes=0",
        2,
        "num_nodes",
        "got 0",
    ),
    case(
        "run-sampled-sage-negative-nodes",
        "run jobs/sampled_sage.py --quiet --set num_nodes=-5",
        2,
        "num_nodes",
        "-5",
    ),
    case(
        "run-fullgraph-zero-splits",
        "run jobs/fullgraph_dist.py --quiet --set splits=0",
        2,
        "splits",
        "got 0",
    ),
    case(
        "run-stream-ingest-zero-batch",
        "run jobs/stream_ingest.py --quiet --set batch_rows=0",
        2,
        "batch_rows",
        "got 0",
    ),
    # -- strata describe -----------------------------------------------------------
    case("describe-missing-job", "describe no/such/job.py", 2, "'no/such/job.py'"),
    case("describe-set-bad-int", f"describe {EXAMPLE} --set count=x", 2, "--set count"),
    # -- strata dataset --------------------------------------------------------------
    case("dataset-no-subcommand", "dataset", 2, "dataset_command"),
    case(
        "dataset-import-missing",
        "dataset import {tmp}/missing.csv --out {tmp}/o",
        1,
        "EDGES",
        "missing.csv",
        "no such file",
    ),
    case(
        "dataset-import-binary",
        "dataset import {binary} --out {tmp}/o",
        1,
        "binary.csv",
        "binary data",
    ),
    case(
        "dataset-import-out-under-proc",
        f"dataset import {{edges}} --out {NOWHERE}",
        1,
        "--out",
        f"'{NOWHERE}'",
    ),
    case(
        "dataset-import-out-is-file",
        "dataset import {edges} --out {file}",
        1,
        "--out",
        "(a file)",
    ),
    case(
        "dataset-import-format",
        "dataset import {edges} --out {tmp}/o --format xyz",
        2,
        "--format",
        "'xyz'",
    ),
    case("dataset-info-file", "dataset info {file}", 1, "DIR", "(a file)"),
    case(
        "dataset-info-missing",
        "dataset info {tmp}/nope",
        1,
        "DIR",
        "no such directory",
    ),
    case("dataset-info-empty-dir", "dataset info {tmp}", 1, "manifest.json"),
    case(
        "dataset-info-verify-file",
        "dataset info {file} --verify",
        1,
        "DIR",
        "(a file)",
    ),
    case(
        "dataset-generate-unknown",
        "dataset generate foo:bar --out {tmp}/o",
        1,
        "unknown generator 'foo'",
        "rmat",
        "planetoid",
    ),
    case(
        "dataset-generate-bad-value",
        "dataset generate rmat:scale=x --out {tmp}/o",
        1,
        "rmat:scale=x",
        "'scale=x'",
    ),
    case(
        "dataset-generate-missing-key",
        "dataset generate sbm:n=10 --out {tmp}/o",
        1,
        "sbm:n=10",
        "missing ['blocks']",
    ),
    case(
        "dataset-generate-huge-scale",
        "dataset generate rmat:scale=100 --out {tmp}/o",
        1,
        "scale",
        "got 100",
    ),
    case(
        "dataset-generate-zero-blocks",
        "dataset generate sbm:n=10,blocks=0 --out {tmp}/o",
        1,
        "num_blocks",
        "got 0",
    ),
    case(
        "dataset-import-unknown-column",
        "dataset import {edges} --out {tmp}/o --src-col nope",
        1,
        "'nope'",
        "columns",
    ),
    # -- data in (issue 14, item 1): file, row or column, and what was expected
    case(
        "dataset-import-wrong-column-name",
        "dataset import {parquet} --out {tmp}/o --src from",
        1,
        "--src column 'from'",
        "edges.parquet",
        "['src', 'dst', 'weight']",
    ),
    case(
        "dataset-import-non-numeric-weight",
        "dataset import {badweight} --out {tmp}/o",
        1,
        "badweight.csv:3",
        "expected a number in field 3",
    ),
    case(
        "dataset-import-truncated-parquet",
        "dataset import {truncated} --out {tmp}/o",
        1,
        "truncated.parquet",
        "expected a complete Parquet file",
    ),
    case(
        "dataset-import-feature-id-not-in-graph",
        "dataset import {parquet} --out {tmp}/o --nodes {strays}",
        1,
        "strays.csv",
        "row 1, column 'id'",
        "got id 99",
    ),
    case(
        "dataset-import-nodes-missing",
        "dataset import {parquet} --out {tmp}/o --nodes {tmp}/none.csv",
        1,
        "--nodes",
    ),
    case(
        "dataset-import-metis-truncated",
        "dataset import {metis} --out {tmp}/o",
        1,
        "short.graph",
        "expected 3 vertex lines",
    ),
    case(
        "dataset-import-mtx-bad-entry",
        "dataset import {mtx} --out {tmp}/o",
        1,
        "bad.mtx:3",
        "ids in 1..2",
    ),
    case(
        "partition-assignments-suffix",
        f"partition {SBM} --k 2 --assignments {{tmp}}/parts.json",
        1,
        "--assignments",
        ".parquet",
    ),
    case(
        "partition-assignments-is-dir",
        f"partition {SBM} --k 2 --assignments {{tmp}}",
        1,
        "--assignments",
    ),
    case(
        "dataset-generate-out-under-proc",
        f"dataset generate rmat:scale=4 --out {NOWHERE}",
        1,
        "--out",
        f"'{NOWHERE}'",
    ),
    case(
        "dataset-generate-out-below-file",
        "dataset generate rmat:scale=4 --out {file}/sub",
        1,
        "--out",
        "is a file",
    ),
    case(
        "dataset-generate-data-dir",
        "dataset generate planetoid:cora --out {tmp}/o --data-dir {tmp}/none",
        1,
        "--data-dir",
        "none'",
    ),
    # -- strata partition ------------------------------------------------------------
    case("partition-k-0", f"partition {SBM} --k 0", 1, "--k", "got 0"),
    case("partition-k-negative", f"partition {SBM} --k -3", 1, "--k", "got -3"),
    case("partition-k-text", f"partition {SBM} --k x", 2, "--k", "'x'"),
    case("partition-k-too-big", f"partition {SBM} --k 201", 1, "k", "got 201"),
    case(
        "partition-imbalance-negative",
        f"partition {SBM} --k 2 --imbalance -1",
        1,
        "--imbalance",
        "-1",
    ),
    case(
        "partition-imbalance-nan",
        f"partition {SBM} --k 2 --imbalance nan",
        1,
        "--imbalance",
        "nan",
    ),
    case(
        "partition-chunks-negative",
        f"partition {SBM} --k 2 --chunks -1 --out {{tmp}}/o",
        1,
        "--chunks",
        "-1",
    ),
    case(
        "partition-chunks-0",
        f"partition {SBM} --k 2 --chunks 0 --out {{tmp}}/o",
        1,
        "--chunks",
        "got 0",
    ),
    case(
        "partition-passes-0",
        f"partition {SBM} --k 2 --method ldg --passes 0",
        1,
        "--passes",
        "got 0",
    ),
    case(
        "partition-halo-negative",
        f"partition {SBM} --k 2 --halo-hops -1 --out {{tmp}}/o",
        1,
        "--halo-hops",
        "-1",
    ),
    case("partition-seed-negative", f"partition {SBM} --k 2 --seed -1", 1, "--seed"),
    case(
        "partition-report-under-proc",
        f"partition {SBM} --k 2 --report {NOWHERE}.json",
        1,
        "--report",
        f"'{NOWHERE}.json'",
    ),
    case(
        "partition-report-is-dir",
        f"partition {SBM} --k 2 --report {{tmp}}",
        1,
        "--report",
        "(a directory)",
    ),
    case(
        "partition-out-is-file",
        f"partition {SBM} --k 2 --out {{file}}",
        1,
        "--out",
        "(a file)",
    ),
    case(
        "partition-out-under-proc",
        f"partition {SBM} --k 2 --out {NOWHERE}",
        1,
        "--out",
        f"'{NOWHERE}'",
    ),
    case("partition-method", f"partition {SBM} --k 2 --method nope", 2, "'nope'"),
    case(
        "partition-missing-graph",
        "partition {tmp}/missing.csv --k 2",
        1,
        "missing.csv",
    ),
    case(
        "partition-unknown-generator",
        "partition foo:bar --k 2",
        1,
        "unknown generator 'foo'",
    ),
    case(
        "partition-binary-graph",
        "partition {binary} --k 2",
        1,
        "binary.csv",
        "binary data",
    ),
    # -- strata ingest (checks owned by the streaming engineer) -------------------
    case(
        "ingest-batch-rows-0",
        "ingest tcp://127.0.0.1:1 {updates} --batch-rows 0",
        ANY,
        "--batch-rows",
        "0",
    ),
    case(
        "ingest-window-0",
        "ingest tcp://127.0.0.1:1 {updates} --window 0",
        ANY,
        "--window",
        "0",
    ),
    case(
        "ingest-rate-0",
        "ingest tcp://127.0.0.1:1 {updates} --rate 0",
        ANY,
        "--rate",
        "0",
    ),
    case(
        "ingest-endpoint-malformed",
        "ingest not-an-endpoint {updates}",
        ANY,
        "not-an-endpoint",
    ),
    case(
        "ingest-endpoint-no-port",
        "ingest tcp://127.0.0.1 {updates}",
        ANY,
        "tcp://127.0.0.1",
    ),
    case(
        "ingest-missing-file",
        "ingest tcp://127.0.0.1:1 {tmp}/missing.csv",
        ANY,
        "missing.csv",
    ),
    case(
        "ingest-binary-file",
        "ingest tcp://127.0.0.1:1 {binary}",
        ANY,
        "binary.csv",
    ),
    case(
        "ingest-nobody-listens",
        "ingest tcp://127.0.0.1:1 {updates}",
        ANY,
        "tcp://127.0.0.1:1",
    ),
]

#: Cases that also run through the installed console script and ``python -m``.
SUBPROCESS_CASES = [
    "run-report-under-proc",
    "run-set-bad-int",
    "dataset-info-file",
    "dataset-generate-unknown",
    "partition-imbalance-negative",
]


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, str]:
    """The placeholder paths, created under ``tmp_path``."""
    file = tmp_path / "a-file.txt"
    file.write_text("not a directory\n")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 16)
    edges = tmp_path / "edges.csv"
    edges.write_text("0,1\n1,2\n2,0\n")
    updates = tmp_path / "updates.csv"
    updates.write_text("kind,src,dst\nadd_edge,0,1\nadd_edge,1,2\n")
    job = tmp_path / "marker_job.py"
    job.write_text(MARKER_JOB)
    parquet = tmp_path / "edges.parquet"
    pq.write_table(
        pa.table({"src": [1, 2], "dst": [2, 3], "weight": [0.5, 1.0]}), parquet
    )
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(parquet.read_bytes()[:-30])
    badweight = tmp_path / "badweight.csv"
    badweight.write_text("src,dst,weight\n1,2,0.5\n2,3,heavy\n")
    strays = tmp_path / "strays.csv"
    strays.write_text("id,f\n1,0.1\n99,0.2\n")
    metis = tmp_path / "short.graph"
    metis.write_text("3 2\n2\n1 3\n")
    mtx = tmp_path / "bad.mtx"
    mtx.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 5 1\n")
    return {
        "parquet": str(parquet),
        "truncated": str(truncated),
        "badweight": str(badweight),
        "strays": str(strays),
        "metis": str(metis),
        "mtx": str(mtx),
        "tmp": str(tmp_path),
        "file": str(file),
        "binary": str(binary),
        "edges": str(edges),
        "updates": str(updates),
        "job": str(job),
    }


def _argv(c: Case, paths: dict[str, str]) -> list[str]:
    return [part.format(**paths) for part in c.argv]


def _check(c: Case, code: int, out: str, err: str, paths: dict[str, str]) -> None:
    text = out + err
    assert "Traceback" not in text, f"{c.id} printed a traceback:\n{text}"
    assert code != 0, f"{c.id} exited 0:\n{text}"
    if c.code != ANY:
        assert code == c.code, f"{c.id} exited {code}, not {c.code}:\n{text}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, f"{c.id} printed no error"
    for want in c.says:
        want = want.format(**paths)
        assert any(want in line for line in lines), (
            f"{c.id}: no stderr line names {want!r}:\n{err}"
        )


def test_the_catalogue_covers_every_command() -> None:
    commands = {c.argv[0] for c in CASES}
    assert commands == {"run", "describe", "dataset", "partition", "ingest"}
    subcommands = {c.argv[1] for c in CASES if c.argv[0] == "dataset" and c.argv[1:]}
    assert subcommands >= {"import", "info", "generate"}
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_error(
    c: Case,
    paths: dict[str, str],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # for jobs/*.py
    start = time.monotonic()
    try:
        code = main(_argv(c, paths))
    except SystemExit as exc:  # a command that exits instead of returning
        code = exc.code if isinstance(exc.code, int) else 1
    elapsed = time.monotonic() - start
    out, err = capfd.readouterr()
    _check(c, code, out, err, paths)
    if c.id == "ingest-nobody-listens":  # the default deadline, not a hang
        assert elapsed < 12, f"ingest took {elapsed:.1f} s to give up"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["console-script", "python-m"])
@pytest.mark.parametrize("case_id", SUBPROCESS_CASES)
def test_the_console_entry_point_behaves_the_same(
    case_id: str, how: str, paths: dict[str, str]
) -> None:
    c = next(c for c in CASES if c.id == case_id)
    root = Path(__file__).resolve().parents[1]
    if how == "console-script":
        script = Path(sys.executable).with_name("strata")
        if not script.exists():
            pytest.skip("the strata console script is not installed")
        command = [str(script)]
    else:
        command = [sys.executable, "-c", _ENTRY]
    start = time.monotonic()
    proc = subprocess.run(
        [*command, *_argv(c, paths)],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - start
    _check(c, proc.returncode, proc.stdout, proc.stderr, paths)
    if case_id == "ingest-nobody-listens":
        assert elapsed < 15, f"ingest took {elapsed:.1f} s to give up"


# ``python -m strata.operators.cli.main`` would need a __main__ block; call the entry
# point the console script calls instead.
_ENTRY = "import sys; from strata.operators.cli.main import main; sys.exit(main())"


def test_unwritable_report_refuses_before_the_job_runs(
    paths: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    marker = Path(paths["tmp"]) / "ran.txt"
    job = paths["job"]
    argv = ["run", job, "--quiet", "--set", f"marker={marker}"]
    assert main([*argv, "--report", f"{NOWHERE}.json"]) == 2
    assert "--report" in capfd.readouterr().err
    assert not marker.exists(), "the job ran although its report could not be written"
    assert main([*argv, "--report", paths["file"] + "/r.json"]) == 2
    assert not marker.exists()
    # the same job with a good report path runs and leaves its marker
    report = Path(paths["tmp"]) / "report.json"
    assert main([*argv, "--report", str(report)]) == 0
    assert marker.read_text() == "ran"
    assert report.exists()


def test_unwritable_partition_output_refuses_before_loading(
    paths: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    start = time.monotonic()
    # a graph far too large to generate in a second: refused before loading it
    big = "rmat:scale=26,edge_factor=16"
    assert main(["partition", big, "--k", "2", "--report", f"{NOWHERE}.json"]) == 1
    assert main(["partition", big, "--k", "2", "--out", paths["file"]]) == 1
    assert time.monotonic() - start < 10
    assert "Traceback" not in capfd.readouterr().err


def test_report_dash_writes_json_alone_to_stdout(
    paths: dict[str, str],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(paths["tmp"])
    assert main(["run", EXAMPLE, "--report", "-"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["outputs"] == {"total": 3}
    assert "total = 3" in err
    assert not Path("-").exists()
    assert main(["partition", SBM, "--k", "2", "--report", "-"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["k"] == 2
    assert "metis k=2" in err


def test_report_dash_keeps_what_the_job_prints_off_stdout(
    paths: dict[str, str],
) -> None:
    marker = Path(paths["tmp"]) / "ran.txt"
    argv = ["run", paths["job"], "--set", f"marker={marker}", "--report", "-"]
    proc = subprocess.run(
        [sys.executable, "-c", _ENTRY, *argv],
        capture_output=True,
        text=True,
        cwd=paths["tmp"],
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outputs"] == {"total": 3}
    assert "the job chatters on stdout" in proc.stderr
    assert "total = 3" in proc.stderr
