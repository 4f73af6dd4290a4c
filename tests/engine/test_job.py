"""Loading jobs and coercing ``--set`` values to the parameters' types."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from strata.engine.cli import main
from strata.engine.job import JobError, JobSpec, coerce, load_job, overrides, parameters
from strata.engine.params import apply, function_parameters


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


# -- nested configs ---------------------------------------------------------------
class Kind(enum.Enum):
    FAST = "fast"
    EXACT = "exact"


@dataclass(frozen=True, slots=True)
class Inner:
    """Inner settings.

    Attributes:
        lr: the learning rate. More words.
        kind: how it runs
            (two lines).
    """

    lr: float = 0.01
    kind: Kind = Kind.FAST

    def __post_init__(self) -> None:
        if self.lr < 0:
            raise ValueError(f"lr in Inner: expected lr >= 0, got {self.lr}.")


@dataclass(frozen=True, slots=True)
class Extra:
    rank: int
    how: str = "kill"


@dataclass(frozen=True, slots=True)
class Config:
    """A job config.

    Attributes:
        inner: nested settings.
        out: where to write.
        mode: the mode.
        sizes: layer sizes.
        pair: two values.
        label: an optional label.
        extra: an optional nested config.
    """

    inner: Inner = field(default_factory=Inner)
    out: Path | None = None
    mode: Literal["a", "b"] = "a"
    sizes: tuple[int, ...] = (10, 5)
    pair: tuple[int, float] = (1, 2.0)
    label: str | None = None
    extra: Extra | None = None


def build_config_job(config: Config) -> None:
    pass


SPEC = JobSpec(
    "demo",
    build_config_job,
    Config,
    {"lr": "inner.lr", "kind": "inner.kind"},
    {"mode": {"b": {"inner.lr": 0.5}}},
)


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ("inner.lr=0.5", Config(Inner(lr=0.5))),
        ("lr=1e-3", Config(Inner(lr=0.001))),
        ("inner.kind=exact", Config(Inner(kind=Kind.EXACT))),
        ("kind=EXACT", Config(Inner(kind=Kind.EXACT))),
        ("out=/tmp/x", Config(out=Path("/tmp/x"))),
        ("out=none", Config()),
        ("sizes=15,10,5", Config(sizes=(15, 10, 5))),
        ("pair=3,0.25", Config(pair=(3, 0.25))),
        ("label=cora", Config(label="cora")),
        ("extra.rank=1", Config(extra=Extra(rank=1))),
        ("mode=b", Config(Inner(lr=0.5), mode="b")),  # the preset
    ],
)
def test_config_jobs_parse_every_type(assignment: str, expected: Config) -> None:
    assert SPEC.arguments([assignment]) == {"config": expected}


def test_set_values_win_over_a_preset_whatever_the_order() -> None:
    for order in (["mode=b", "lr=0.2"], ["lr=0.2", "mode=b"]):
        assert SPEC.arguments(order)["config"] == Config(Inner(lr=0.2), mode="b")


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("inner.lr=fast", r"--set inner.lr in Config: expected float, got 'fast'"),
        ("lr=fast", r"--set lr in Config: expected float, got 'fast'"),
        ("kind=slow", r"--set kind in Config: expected \{fast,exact\}, got 'slow'"),
        ("mode=c", r"--set mode in Config: expected \{a,b\}, got 'c'"),
        ("pair=1", "expected 2 comma-separated values"),
        ("inner.rate=1", r"--set inner.rate in demo.build: .*got 'inner.rate'"),
        ("lrr=1", "did you mean lr"),
        ("lr=-1", r"--set lr: lr in Inner: expected lr >= 0, got -1.0."),
        ("extra.how=raise", r"--set extra.how: .*rank"),
        ("lr", "expected key=value"),
    ],
)
def test_bad_config_values_name_the_key_the_value_and_the_expectation(
    assignment: str, message: str
) -> None:
    with pytest.raises(JobError, match=message):
        SPEC.arguments([assignment])


def test_an_alias_and_its_key_together_are_refused() -> None:
    with pytest.raises(JobError, match=r"sets 'inner\.lr' again"):
        SPEC.arguments(["lr=1", "inner.lr=2"])


def test_help_lists_every_parameter_with_type_default_and_doc() -> None:
    text = SPEC.help()
    rows = {line.split()[0]: line.split(None, 3)[1:] for line in text.splitlines()}
    assert rows["inner.lr"] == ["float", "0.01", "the learning rate."]
    assert rows["inner.kind"] == ["{fast,exact}", "fast", "how it runs (two lines)."]
    assert rows["out"][:2] == ["path", "|"]
    assert rows["sizes"] == ["int,...", "10,5", "layer sizes."]
    assert "lr    = inner.lr" in text


def test_plain_jobs_list_their_keyword_parameters() -> None:
    rows = {p.name: p for p in function_parameters(build, parameters(build))}
    assert (rows["fanouts"].type, rows["fanouts"].default) == ("int,...", "10,5")
    assert rows["sizes"].default == "none"


def test_report_params_are_dotted_and_json_friendly() -> None:
    args = SPEC.arguments(["kind=exact", "out=/tmp/x"])
    params = SPEC.report_params(args)
    assert params["inner.kind"] == "exact"
    assert params["out"] == "/tmp/x"
    assert params["sizes"] == [10, 5]


def test_run_help_lists_the_jobs_parameters(capsys) -> None:
    assert main(["run", "strata.engine._example_job", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: strata run" in out
    assert "job parameters of strata.engine._example_job" in out
    assert "count  int  3" in out


# -- tagged unions: a field whose type is a union of configs --------------------
@dataclass(frozen=True, slots=True)
class Whole:
    """Every row at once."""


@dataclass(frozen=True, slots=True)
class Chunked:
    """Chunk by chunk.

    Attributes:
        chunks: chunks per worker.
        budget: bytes per worker (None: any).
    """

    chunks: int = 1
    budget: int | None = None


@dataclass(frozen=True, slots=True)
class Split:
    """Attributes:
    splits: source chunks.
    redraw: derived from splits when None.
    """

    splits: int = 10
    redraw: int | None = None

    def __post_init__(self) -> None:
        if self.splits < 1:
            raise ValueError(
                f"splits in Split: expected splits >= 1, got {self.splits}"
            )
        if self.redraw is None:
            object.__setattr__(self, "redraw", self.splits)


@dataclass(frozen=True, slots=True)
class Gang:
    """Attributes:
    workers: gang size.
    mode: how each worker trains.
    """

    workers: int = 2
    mode: Whole | Chunked | Split = field(default_factory=Whole)


@dataclass(frozen=True, slots=True)
class UnionConfig:
    """Attributes:
    dist: the gang.
    """

    dist: Gang = field(default_factory=Gang)


def build_union_job(config: UnionConfig) -> None:
    pass


UNION = JobSpec(
    "union",
    build_union_job,
    UnionConfig,
    {"mode": "dist.mode", "chunks": "dist.mode.chunks", "splits": "dist.mode.splits"},
    {},
)


@pytest.mark.parametrize(
    ("assignments", "mode"),
    [
        (["dist.mode=chunked"], Chunked()),
        (["dist.mode=chunked", "dist.mode.chunks=4"], Chunked(chunks=4)),
        (["dist.mode.chunks=4", "dist.mode=Chunked"], Chunked(chunks=4)),  # any order
        (["mode=chunked", "chunks=4"], Chunked(chunks=4)),  # aliases
        (["mode=chunked", "dist.mode.budget=1.5KiB"], Chunked(budget=1536)),
        (["mode=split", "splits=4"], Split(splits=4)),  # derived fields: fresh
        (["dist.mode=whole"], Whole()),
    ],
)
def test_a_tagged_union_member_is_picked_by_tag_then_its_fields_set(
    assignments: list[str], mode: object
) -> None:
    assert UNION.arguments(assignments)["config"] == UnionConfig(Gang(mode=mode))


def test_fields_of_the_current_member_are_set_without_its_tag() -> None:
    config = apply(
        UnionConfig(Gang(mode=Chunked(chunks=2))), {"dist.mode.budget": "64MiB"}
    )
    assert config.dist.mode == Chunked(chunks=2, budget=64 << 20)


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (
            ["dist.mode=pipeline"],
            r"--set dist.mode in UnionConfig: expected \{whole,chunked,split\}, "
            r"got 'pipeline'",
        ),
        (
            ["chunks=4"],
            r"--set chunks in UnionConfig: expected a setting of dist.mode=whole, "
            r"got 4, a setting of chunked only. Hint: set dist.mode=chunked too",
        ),
        (["mode=split", "chunks=4"], r"--set chunks .*a setting of chunked only"),
        (["mode=split", "splits=0"], r"--set .*splits: splits in Split: expected"),
        (["dist.mode.chunk=4"], r"did you mean dist.mode.chunks"),
        (["mode=chunked", "chunks=many"], r"--set chunks in UnionConfig: expected int"),
    ],
)
def test_bad_tagged_union_settings_name_the_key_and_the_members(
    assignments: list[str], message: str
) -> None:
    with pytest.raises(JobError, match=message):
        UNION.arguments(assignments)


def test_help_and_report_of_a_tagged_union() -> None:
    rows = {p.name: p for p in UNION.parameters()}
    assert list(rows) == [
        "dist.workers",
        "dist.mode",
        "dist.mode.chunks",
        "dist.mode.budget",
        "dist.mode.splits",
        "dist.mode.redraw",
    ]
    assert (rows["dist.mode"].type, rows["dist.mode"].default) == (
        "{whole,chunked,split}",
        "whole",
    )
    assert rows["dist.mode.chunks"].doc == "(chunked) chunks per worker."
    assert rows["dist.mode.redraw"].default == "none"  # derived
    config = UNION.arguments(["mode=chunked", "chunks=3"])
    assert UNION.report_params(config) == {
        "dist.workers": 2,
        "dist.mode": "chunked",
        "dist.mode.chunks": 3,
        "dist.mode.budget": None,
    }
