"""Jobs: Python files or modules exposing ``build(**params) -> Pipeline``.

Every parameter of ``build`` has a default; ``strata run JOB --set key=value``
overrides it, coercing the text to the parameter's annotation (or its default's
type): ``int``, ``float``, ``bool`` (true/false, yes/no, on/off, 1/0), ``str``,
``X | None`` (``none``), and ``tuple``/``list`` of those, comma-separated. A job may
also define ``render(outputs) -> str`` to print its outputs its own way.

Examples:
    >>> def build(num_edges: int = 1000, fanouts: tuple[int, ...] = (10, 5)) -> None:
    ...     pass
    >>> overrides(build, ["num_edges=4000000", "fanouts=15,10,5"])
    {'num_edges': 4000000, 'fanouts': (15, 10, 5)}
    >>> overrides(build, ["num_edge=1"])
    Traceback (most recent call last):
    ...
    strata.engine.job.JobError: unknown parameter 'num_edge'; valid parameters: num_edges: int = 1000, fanouts: tuple[int, ...] = (10, 5)
"""  # noqa: E501

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from strata.engine.errors import format_where

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class JobError(ValueError):
    """A job cannot be loaded, or a ``--set`` override is invalid."""


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
    """Parse ``key=value`` strings into ``build`` keyword arguments.

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
                    _type_name(target),
                    f"{text!r} ({exc})",
                    f"valid parameters: {valid}",
                )
            ) from exc
    return result


def coerce(text: str, target: Any) -> Any:
    """Convert ``text`` to ``target`` (a type or a simple annotation).

    Raises:
        ValueError: The text does not fit the type.
        TypeError: The annotation is not one ``--set`` supports.
    """
    origin = typing.get_origin(target)
    args = typing.get_args(target)
    if origin in (typing.Union, types.UnionType):
        if text.strip().lower() == "none" and type(None) in args:
            return None
        for option in args:
            if option is type(None):
                continue
            try:
                return coerce(text, option)
            except ValueError:
                continue
        raise ValueError(f"{text!r} fits none of {target}")
    if origin in (tuple, list) or target in (tuple, list):
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            kinds: Sequence[Any] = [args[0]] * len(parts)
        elif origin is tuple and args:
            if len(args) != len(parts):
                raise ValueError(f"expected {len(args)} comma-separated values")
            kinds = args
        else:
            kinds = [args[0] if args else str] * len(parts)
        values = [coerce(p, k) for p, k in zip(parts, kinds, strict=True)]
        return tuple(values) if (origin or target) is tuple else values
    if target is bool:
        lowered = text.strip().lower()
        if lowered in _TRUE | _FALSE:
            return lowered in _TRUE
        raise ValueError(f"expected true or false, got {text!r}")
    if target is int:
        return int(text.replace("_", ""))
    if target in (float, str):
        return target(text)
    if target is type(None):
        raise ValueError("the parameter has no default type; annotate it")
    raise TypeError(f"--set cannot set parameters of type {target}")


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


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _describe(param: inspect.Parameter) -> str:
    annotation = param.annotation
    if annotation is inspect.Parameter.empty:
        kind = type(param.default).__name__
    else:
        kind = _type_name(annotation)
    return f"{param.name}: {kind} = {param.default!r}"
