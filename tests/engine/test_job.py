"""Loading jobs and coercing ``--set`` values to the parameters' types."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.engine.job import JobError, coerce, load_job, overrides


def build(
    num_edges: int = 1000,
    rate: float = 0.5,
    directed: bool = False,
    name: str = "g",
    fanouts: tuple[int, ...] = (10, 5),
    shape: tuple[int, float] = (1, 2.0),
    sizes: list[int] | None = None,
    untyped=3,
) -> None:
    pass


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ("num_edges=4_000_000", {"num_edges": 4_000_000}),
        ("rate=1e-3", {"rate": 0.001}),
        ("directed=yes", {"directed": True}),
        ("directed=False", {"directed": False}),
        ("name=cora", {"name": "cora"}),
        ("fanouts=15,10,5", {"fanouts": (15, 10, 5)}),
        ("shape=3,0.25", {"shape": (3, 0.25)}),
        ("sizes=1,2", {"sizes": [1, 2]}),
        ("sizes=none", {"sizes": None}),
        ("untyped=9", {"untyped": 9}),
    ],
)
def test_overrides_coerce_to_annotations(assignment: str, expected: dict) -> None:
    assert overrides(build, [assignment]) == expected


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        (
            "num_edge=1",
            "unknown parameter 'num_edge'; valid parameters: num_edges: int",
        ),
        ("num_edges=many", "--set num_edges in "),
        ("directed=maybe", "expected true or false"),
        ("shape=1", "expected 2 comma-separated values"),
        ("rate", "expected key=value"),
    ],
)
def test_bad_overrides_are_explained(assignment: str, message: str) -> None:
    with pytest.raises(JobError, match=message) as info:
        overrides(build, [assignment])
    if "parameter" in message or "--set" in message:
        assert "fanouts: tuple[int, ...] = (10, 5)" in str(info.value)


def test_coerce_refuses_unsupported_types() -> None:
    with pytest.raises(TypeError):
        coerce("1", dict)


def test_job_file_in_a_package_loads_by_module_name() -> None:
    module = load_job(str(Path("engine") / "_example_job.py"))
    assert module.__name__ == "strata.engine._example_job"


def test_missing_jobs_are_job_errors(tmp_path: Path) -> None:
    with pytest.raises(JobError, match="does not exist"):
        load_job(str(tmp_path / "nothing.py"))
    with pytest.raises(JobError, match="no job module"):
        load_job("no_such_module_here")
    empty = tmp_path / "empty_job.py"
    empty.write_text("x = 1\n")
    with pytest.raises(JobError, match="defines no build"):
        load_job(str(empty))
