"""Jobs: Python files or modules exposing ``build(...) -> Pipeline``.

A job's parameters take one of two forms:

* **One nested config.** ``build(config: JobConfig)`` takes one frozen dataclass
  whose fields are values or further configs (reused from the operators: a
  ``TrainConfig`` inside the job's config). ``--set train.lr=0.005`` sets a field
  by its dotted key. The module may declare ``ALIASES`` (a flat name to a dotted
  key: ``{"lr": "train.lr"}``) and ``PRESETS`` (a dotted key, then one of its
  values, then the dotted keys that value sets unless ``--set`` sets them too:
  ``{"train.model.name": {"gat": {"train.lr": 0.005}}}``).
* **Plain keywords.** ``build(**params)`` where every parameter has a default;
  ``--set key=value`` sets one.

Text converts to the field's or parameter's type (:func:`~strata.engine.params.coerce`:
``int``, ``float``, ``bool``, ``str``, ``Path``, an ``Enum``, a ``Literal``,
``X | None``, tuples and lists, byte sizes such as ``64MiB`` for an ``int``). A
field typed as a union of configs is a *tagged union*: ``--set dist.mode=hongtu``
picks the member whose lower-cased class name is the tag, ``--set
dist.mode.chunks=4`` sets its fields (:mod:`strata.engine.params`).
``strata run JOB --help`` lists every parameter
with its type, default and one line of doc (:meth:`JobSpec.help`). A job may also
define ``render(outputs) -> str`` to print its outputs its own way.

Examples:
    >>> def build(num_edges: int = 1000, fanouts: tuple[int, ...] = (10, 5)) -> None:
    ...     pass
    >>> overrides(build, ["num_edges=4000000", "fanouts=15,10,5"])
    {'num_edges': 4000000, 'fanouts': (15, 10, 5)}
    >>> overrides(build, ["num_edge=1"])
    Traceback (most recent call last):
    ...
    strata.engine.params.JobError: unknown parameter 'num_edge'; valid parameters: num_edges: int = 1000, fanouts: tuple[int, ...] = (10, 5)

    A config job sets nested fields by dotted key or through its aliases:

    >>> from strata.engine.config import RunConfig
    >>> def build_job(config: RunConfig) -> None:
    ...     pass
    >>> spec = JobSpec("demo", build_job, RunConfig, {"items": "channel.max_items"}, {})
    >>> config = spec.arguments(["items=4", "seed=3"])["config"]
    >>> config.channel.max_items, config.seed
    (4, 3)
"""  # noqa: E501

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from strata.engine.errors import format_where
from strata.engine.params import (
    JobError,
    JobParameter,
    apply,
    coerce,
    config_parameters,
    function_parameters,
    is_config,
    keys,
    leaves,
    plain,
    resolve,
    table,
    type_name,
)

__all__ = [
    "JobError",
    "JobParameter",
    "JobSpec",
    "coerce",
    "job_config",
    "job_spec",
    "load_job",
    "overrides",
    "parameters",
]


def load_job(spec: str) -> types.ModuleType:
    """Import a job from a file path (``jobs/degree_stats.py``) or a module name.

    A file inside a package directory is imported under its package name
    (``strata.jobs.degree_stats``), so worker processes can import it again by name.
    """
    path = Path(spec)
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            got = f"{spec!r}, which " + (
                "is a directory" if path.is_dir() else "does not exist"
            )
            raise JobError(
                format_where(
                    "JOB",
                    "load_job",
                    "a job file (.py) or module",
                    got,
                    "give a path like jobs/degree_stats.py or a module name",
                )
            )
        name, root = _module_name(path.resolve())
        if not name.startswith("strata.") and str(root) not in sys.path:
            sys.path.insert(0, str(root))
        spec = name
    try:
        module = importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if exc.name and spec.startswith(exc.name):
            raise JobError(
                format_where(
                    "JOB",
                    "load_job",
                    "a job file (.py) or module",
                    f"{spec!r}: no job module or file by that name",
                )
            ) from exc
        raise
    if not callable(getattr(module, "build", None)):
        raise JobError(
            format_where(
                "JOB",
                "load_job",
                "a module defining build(**params) -> Pipeline",
                f"{spec!r}, which defines no build",
            )
        )
    return module


@dataclasses.dataclass(frozen=True, slots=True)
class JobSpec:
    """What a job module declares about its parameters (see the module docstring).

    Attributes:
        name: the job's module name.
        build: its ``build`` function.
        config: the config class ``build`` takes, or None for a plain job.
        aliases: flat names accepted for dotted keys.
        presets: per value of a key, the keys that value sets by default.
    """

    name: str
    build: Callable[..., Any]
    config: type | None
    aliases: Mapping[str, str]
    presets: Mapping[str, Mapping[Any, Mapping[str, Any]]]

    def parameters(self) -> list[JobParameter]:
        """Every parameter: dotted name, type, default and one line of doc."""
        if self.config is None:
            return function_parameters(self.build, parameters(self.build))
        return config_parameters(self.config, self.config())

    def configure(self, values: Mapping[str, Any]) -> Any:
        """The job's config with ``values`` (text or typed) over its defaults.

        Keys are dotted or aliases. A preset chosen by a key's value (given or
        default) sets its keys first; ``values`` win over it.

        Raises:
            JobError: a plain job, an unknown key, or a value that does not fit.
        """
        if self.config is None:
            raise JobError(f"{self.name}.build takes keyword parameters, no config")
        changes: dict[str, Any] = {}
        names: dict[str, str] = {}
        for key, value in values.items():
            canonical = self.aliases.get(key, key)
            self._check_key(key, canonical)
            names[canonical] = key
            if canonical in changes:
                raise JobError(
                    format_where(
                        f"--set {key}",
                        f"{self.name}.build",
                        "each parameter set once",
                        f"{key!r}, which sets {canonical!r} again",
                    )
                )
            changes[canonical] = value
        base = self.config()
        chosen = apply(base, changes, names) if changes else base
        preset: dict[str, Any] = {}
        for key, table_ in self.presets.items():
            value = _get(chosen, key)
            values_ = table_.get(value, table_.get(getattr(value, "value", None), {}))
            preset.update({k: v for k, v in values_.items() if k not in changes})
        if not preset:
            return chosen
        return apply(base, {**preset, **changes}, names)

    def _check_key(self, key: str, canonical: str) -> None:
        assert self.config is not None
        try:
            resolve(self.config, canonical)
        except KeyError:
            known = keys(self.config) + list(self.aliases)
            close = difflib.get_close_matches(key, known, n=3)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise JobError(
                format_where(
                    f"--set {key}",
                    f"{self.name}.build",
                    "a parameter of the job",
                    f"{key!r}, which is none",
                    f"{hint}strata run JOB --help lists every parameter",
                )
            ) from None

    def arguments(self, assignments: Sequence[str]) -> dict[str, Any]:
        """``build``'s keyword arguments from ``key=value`` strings."""
        if self.config is None:
            return overrides(self.build, assignments)
        values: dict[str, str] = {}
        for assignment in assignments:
            key, eq, text = assignment.partition("=")
            if not eq:
                raise JobError(f"--set {assignment!r}: expected key=value")
            key = key.strip()
            values[key] = text
        return {self._argument(): self.configure(values)}

    def report_params(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters a run report records: every one, dotted, JSON-friendly."""
        if self.config is None:
            return {
                name: plain(arguments.get(name, param.default))
                for name, param in parameters(self.build).items()
            }
        config = arguments[self._argument()]
        return {name: plain(value) for name, value in leaves(self.config, config)}

    def help(self) -> str:
        """The parameter listing of ``strata run JOB --help``."""
        form = "KEY=VALUE, KEY dotted" if self.config else "KEY=VALUE"
        lines = [
            f"job parameters of {self.name} (--set {form}):",
            table(self.parameters()),
        ]
        if self.aliases:
            width = max(len(a) for a in self.aliases)
            lines.append("aliases:")
            lines += [f"  {a:<{width}}  = {k}" for a, k in self.aliases.items()]
        for key, table_ in self.presets.items():
            names = ", ".join(str(getattr(v, "value", v)) for v in table_)
            lines.append(
                f"presets: {key} ({names}) sets defaults of other keys "
                "(--set overrides them); see the job's docs"
            )
        return "\n".join(lines)

    def _argument(self) -> str:
        (name,) = parameters(self.build)
        return name


def job_spec(module: types.ModuleType) -> JobSpec:
    """The parameter declaration of a loaded job module.

    Raises:
        JobError: an alias or preset naming a key the config does not have.
    """
    build = module.build
    params = parameters(build)
    config = None
    if len(params) == 1:
        (param,) = params.values()
        if is_config(param.annotation):
            config = typing.cast(type, param.annotation)
    aliases: Mapping[str, str] = getattr(module, "ALIASES", {}) if config else {}
    presets = getattr(module, "PRESETS", {}) if config else {}
    spec = JobSpec(module.__name__, build, config, aliases, presets)
    if config is not None:
        keys = [*aliases.values(), *presets]
        keys += [k for table_ in presets.values() for v in table_.values() for k in v]
        for key in keys:
            try:
                resolve(config, key)
            except KeyError:
                raise JobError(
                    format_where(
                        "ALIASES/PRESETS",
                        module.__name__,
                        f"keys of {config.__qualname__}",
                        repr(key),
                    )
                ) from None
    return spec


def job_config(
    module: types.ModuleType, values: Mapping[str, Any] | None = None, **named: Any
) -> Any:
    """A config job's config from dotted ``values`` and flat ``named`` ones.

    The same path as ``--set`` (aliases and presets included), with values
    that may already be typed: ``job_config(cora_gcn, model="gat", epochs=3)``.
    """
    return job_spec(module).configure({**(values or {}), **named})


def _get(config: Any, key: str) -> Any:
    value = config
    for part in key.split("."):
        value = getattr(value, part)
    return value


def parameters(build: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """Return ``build``'s parameters, with annotations resolved where possible."""
    try:
        hints = typing.get_type_hints(build)
    except Exception:  # an unresolvable annotation: fall back to default types
        hints = {}
    params = {}
    for name, param in inspect.signature(build).parameters.items():
        annotation = hints.get(name, param.annotation)
        params[name] = param.replace(annotation=annotation)
    return params


def describe_parameters(build: Callable[..., Any]) -> str:
    """``name: type = default`` for every parameter, comma-separated."""
    return ", ".join(_describe(p) for p in parameters(build).values())


def overrides(build: Callable[..., Any], assignments: Sequence[str]) -> dict[str, Any]:
    """Parse ``key=value`` strings into a plain ``build``'s keyword arguments.

    Raises:
        JobError: A malformed assignment, an unknown key, or a value that does not
            fit the parameter's type; the message lists the valid parameters.
    """
    params = parameters(build)
    valid = describe_parameters(build)
    result: dict[str, Any] = {}
    for assignment in assignments:
        key, eq, text = assignment.partition("=")
        key = key.strip()
        if not eq:
            raise JobError(f"--set {assignment!r}: expected key=value")
        if key not in params:
            raise JobError(f"unknown parameter {key!r}; valid parameters: {valid}")
        param = params[key]
        target = param.annotation
        if target is inspect.Parameter.empty:
            target = type(param.default)
        try:
            result[key] = coerce(text, target)
        except (TypeError, ValueError) as exc:
            where = f"{getattr(build, '__module__', 'job')}.build"
            raise JobError(
                format_where(
                    f"--set {key}",
                    where,
                    type_name(target),
                    f"{text!r} ({exc})",
                    f"valid parameters: {valid}",
                )
            ) from exc
    return result


def _describe(param: inspect.Parameter) -> str:
    annotation = param.annotation
    if annotation is inspect.Parameter.empty:
        kind = type(param.default).__name__
    else:
        kind = _annotation_text(annotation)
    return f"{param.name}: {kind} = {param.default!r}"


def _annotation_text(annotation: Any) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _module_name(path: Path) -> tuple[str, Path]:
    """Dotted name of a file within its packages, and the directory above them.

    A file of an installed ``strata.*`` package (``jobs/cora_gcn.py`` in a
    checkout) gets its installed name (``strata.jobs.cora_gcn``), so it is the
    same module that worker processes and other imports see.
    """
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    if len(parts) > 1 and _installed_as_strata(parts[0], folder / parts[0]):
        parts.insert(0, "strata")
    return ".".join(parts), folder


def _installed_as_strata(top: str, directory: Path) -> bool:
    """Whether ``directory`` is the installed package ``strata.<top>``."""
    try:
        spec = importlib.util.find_spec(f"strata.{top}")
    except (ImportError, ValueError):
        return False
    locations = spec.submodule_search_locations if spec is not None else None
    return any(Path(loc).resolve() == directory.resolve() for loc in locations or ())
