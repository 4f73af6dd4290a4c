"""Job parameters: typed values from ``--set`` text, and nested frozen configs.

A job's parameters are either the keyword parameters of ``build`` or one nested
config: a frozen dataclass whose fields are values or further dataclasses. A dotted
key (``train.lr``) names a field of a nested config. Text converts to the field's
type (:func:`coerce`):

* ``int`` (``4_000_000``, or a byte size with a binary unit: ``64MiB``,
  ``1.5GiB``), ``float``, ``str``, ``Path``;
* ``bool``: true/false, yes/no, on/off, 1/0;
* an ``Enum``: a member's value or name (``val_loss``, ``VAL_LOSS``);
* a ``Literal``: one of its values;
* ``X | None``: ``none``, or text for ``X``; other unions take the first type
  the text fits;
* ``tuple``/``list`` of those: comma-separated (``15,10,5``);
* a *tagged union* of configs (``Exact | HongTu | Emma``): a field whose type is
  a union of two or more dataclasses. Each member's tag is its class name in
  lower case (``hongtu``); ``--set dist.mode=hongtu`` picks that member with its
  defaults, and ``--set dist.mode.chunks=4`` sets a field of the member chosen
  (given in the same call, else the current one). A field the chosen member
  does not have is an error naming the members that have it.

Each parameter's one line of documentation is the entry of its field in the
``Attributes:`` section of the dataclass docstring (Google style), the same
section the configs already carry; for a plain ``build`` it is the entry of the
``Args:`` section of ``build``'s docstring.

Examples:
    >>> from strata.engine.config import RunConfig
    >>> config = apply(RunConfig(), {"channel.max_items": "4", "seed": "3"})
    >>> config.channel.max_items, config.seed
    (4, 3)
    >>> coerce("15,10,5", tuple[int, ...]), coerce("none", Path | None)
    ((15, 10, 5), None)
    >>> coerce("1.5KiB", int)
    1536
    >>> [p for p in config_parameters(RunConfig) if p.name == "seed"]
    [JobParameter(name='seed', type='int', default='0', doc='Base seed; each task gets StepContext.seed derived from it, the step id and the shard, so seeds match across executors.')]
"""  # noqa: E501

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from strata.engine.errors import format_where

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class JobError(ValueError):
    """A job cannot be loaded, or a ``--set`` override is invalid."""


@dataclasses.dataclass(frozen=True, slots=True)
class JobParameter:
    """One parameter as ``strata run JOB --help`` lists it.

    Attributes:
        name: the key ``--set`` takes (dotted for a nested config).
        type: the type, as ``--set`` reads it (``{a,b}`` lists the choices).
        default: the default, written as ``--set`` would take it.
        doc: one line of documentation (empty where the docstring has none).
    """

    name: str
    type: str
    default: str
    doc: str


# ------------------------------------------------------------------- text -> value
def coerce(text: str, target: Any) -> Any:
    """Convert ``text`` to ``target`` (a type or a simple annotation).

    Raises:
        ValueError: The text does not fit the type (the message says why).
        TypeError: The annotation is not one ``--set`` supports.
    """
    origin = typing.get_origin(target)
    args = typing.get_args(target)
    if origin in (typing.Union, types.UnionType):
        if text.strip().lower() == "none" and type(None) in args:
            return None
        variants = tagged(target)
        if variants:
            if text.strip().lower() not in variants:
                raise ValueError(f"expected one of {type_name(target)}")
            return variants[text.strip().lower()]()
        for option in args:
            if option is type(None):
                continue
            try:
                return coerce(text, option)
            except ValueError:
                continue
        raise ValueError(f"{text!r} fits none of {type_name(target)}")
    if origin is typing.Literal:
        for option in args:
            if str(option) == text.strip():
                return option
        raise ValueError(f"expected one of {type_name(target)}")
    if origin in (tuple, list) or target in (tuple, list):
        return _sequence(text, target)
    if isinstance(target, type) and issubclass(target, enum.Enum):
        return _member(text, target)
    if target is bool:
        lowered = text.strip().lower()
        if lowered in _TRUE | _FALSE:
            return lowered in _TRUE
        raise ValueError(f"expected true or false, got {text!r}")
    if target is int:
        return _int(text)
    if target is float:
        return float(text.replace("_", ""))
    if target is str:
        return text
    if target is Path or (isinstance(target, type) and issubclass(target, Path)):
        return Path(text)
    if target is type(None):
        raise ValueError("the parameter has no default type; annotate it")
    raise TypeError(f"--set cannot set parameters of type {type_name(target)}")


_UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def _int(text: str) -> int:
    """An integer, or a byte size with a binary unit (``64MiB``, ``1.5GiB``)."""
    match = re.fullmatch(r"\s*([0-9_.]+)\s*([a-zA-Z]+)\s*", text)
    if match is None:
        return int(text.replace("_", ""))
    unit = match.group(2).lower()
    if unit not in _UNITS:
        raise ValueError(f"expected an integer or bytes with a unit ({_unit_names()})")
    return int(float(match.group(1).replace("_", "")) * _UNITS[unit])


def _unit_names() -> str:
    return ", ".join(u[0].upper() + u[1:-1] + "B" for u in _UNITS)


def tagged(annotation: Any) -> dict[str, type]:
    """The members of a tagged union of configs by tag (empty if it is none).

    A tagged union is a union of two or more dataclasses (``None`` may be one
    more option); a member's tag is its class name in lower case.
    """
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return {}
    options = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(options) < 2 or not all(is_config(a) for a in options):
        return {}
    return {tag(a): a for a in options}


def tag(cls: type) -> str:
    """The tag of a tagged union's member: its class name in lower case."""
    return cls.__name__.lower()


def _sequence(text: str, target: Any) -> tuple[Any, ...] | list[Any]:
    origin = typing.get_origin(target) or target
    args = typing.get_args(target)
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
    return tuple(values) if origin is tuple else values


def _member(text: str, kind: type[enum.Enum]) -> enum.Enum:
    key = text.strip()
    for member in kind:
        if str(member.value) == key or member.name.lower() == key.lower():
            return member
    raise ValueError(f"expected one of {type_name(kind)}")


def type_name(annotation: Any) -> str:
    """``annotation`` as ``--set`` reads it: ``int``, ``{a,b}``, ``int,...``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if tagged(annotation):
        names = [*tagged(annotation), *(["none"] if type(None) in args else [])]
        return "{" + ",".join(names) + "}"
    if origin in (typing.Union, types.UnionType):
        return " | ".join("none" if a is type(None) else type_name(a) for a in args)
    if origin is typing.Literal:
        return "{" + ",".join(str(a) for a in args) + "}"
    if origin is collections.abc.Callable:
        return "callable"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "{" + ",".join(str(m.value) for m in annotation) + "}"
    if origin in (tuple, list):
        if len(args) == 2 and args[1] is Ellipsis:
            return f"{type_name(args[0])},..."
        return ",".join(type_name(a) for a in args) or origin.__name__
    if isinstance(annotation, type):
        return "path" if issubclass(annotation, Path) else annotation.__name__
    return str(annotation).replace("typing.", "")


def show(value: Any) -> str:
    """A value written as ``--set`` would take it (``none``, ``true``, ``1,2``)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple | list):
        return ",".join(show(v) for v in value)
    if isinstance(value, str):
        return value if value else "''"
    return str(value)


def plain(value: Any) -> Any:
    """``value`` made JSON-friendly for a run report (enums, paths, tuples)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in _fields(value)}
    return value


# --------------------------------------------------------------- nested configs
def is_config(annotation: Any) -> bool:
    """Whether ``annotation`` is a dataclass type (a nested config)."""
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _fields(cls: Any) -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.init)


def hints(cls: type) -> dict[str, Any]:
    """The resolved field types of dataclass ``cls``."""
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):  # an unresolvable annotation: keep the text
        return {f.name: f.type for f in _fields(cls)}


def _config_of(annotation: Any) -> type | None:
    """The dataclass inside ``annotation`` (``C`` or ``C | None``), if any."""
    if is_config(annotation):
        return typing.cast(type, annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(options) == 1 and is_config(options[0]):
            return typing.cast(type, options[0])
    return None


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _members(annotation: Any, part: str) -> list[type]:
    """The configs whose field ``part`` a dotted key through ``annotation`` names."""
    config = _config_of(annotation)
    if config is not None:
        return [config]
    return [v for v in tagged(annotation).values() if part in _names(v)]


def _names(cls: type) -> set[str]:
    return {f.name for f in _fields(cls)}


def resolve(cls: type, key: str) -> Any:
    """The annotation of dotted ``key`` within config ``cls``.

    Through a tagged union, a field is looked up in the first member that has it.

    Raises:
        KeyError: no such field (the message is the missing name).
    """
    annotation: Any = cls
    for part in key.split("."):
        owners = [c for c in _members(annotation, part) if part in _names(c)]
        if not owners:
            raise KeyError(part)
        annotation = hints(owners[0])[part]
    return annotation


@dataclasses.dataclass(frozen=True, slots=True)
class _Leaf:
    name: str
    value: Any
    owner: type
    field: str
    member: str  # the tagged union's member it belongs to ("" if none)


def _walk(cls: type, value: Any, prefix: str, every: bool) -> Iterator[_Leaf]:
    """Every settable leaf below config ``cls`` (``value``: its current value).

    A tagged union is one leaf (its tag) followed by the fields of the member
    chosen, or of every member with ``every``.
    """
    types_ = hints(cls)
    for field in _fields(cls):
        current = _default(field) if value is None else getattr(value, field.name)
        name = f"{prefix}{field.name}"
        annotation = types_[field.name]
        inner = _config_of(annotation)
        variants = tagged(annotation)
        if variants and current is not None and current is not dataclasses.MISSING:
            yield _Leaf(name, tag(type(current)), cls, field.name, "")
            for member in variants.values() if every else [type(current)]:
                instance = current if type(current) is member else None
                for leaf in _walk(member, instance, f"{name}.", every):
                    yield dataclasses.replace(leaf, member=leaf.member or tag(member))
        elif inner is not None and current is not None:
            if current is dataclasses.MISSING:
                current = None
            yield from _walk(inner, current, f"{name}.", every)
        else:
            yield _Leaf(name, current, cls, field.name, "")


def leaves(cls: type, value: Any = None, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted name, current value)`` of every settable leaf of config ``cls``.

    Nested configs are walked into; an optional one that is None is one leaf; a
    tagged union is its tag (a string) and the chosen member's fields.
    """
    for leaf in _walk(cls, value, prefix, every=False):
        yield leaf.name, leaf.value


def keys(cls: type) -> list[str]:
    """Every dotted key of config ``cls``, every tagged union member's included."""
    return [leaf.name for leaf in _walk(cls, None, "", every=True)]


def config_parameters(cls: type, value: Any = None) -> list[JobParameter]:
    """Every leaf of config ``cls`` with its type, default and one line of doc.

    A tagged union lists the fields of every member, each doc led by the
    member's tag (``(hongtu) chunks per worker``).
    """
    result = []
    for leaf in _walk(cls, value, "", every=True):
        default = (
            "(required)" if leaf.value is dataclasses.MISSING else show(leaf.value)
        )
        doc = section_docs(leaf.owner.__doc__, "Attributes").get(leaf.field, "")
        if leaf.member:
            doc = f"({leaf.member}) {doc}".rstrip()
        annotation = hints(leaf.owner)[leaf.field]
        result.append(JobParameter(leaf.name, type_name(annotation), default, doc))
    return result


def apply(
    config: Any, changes: Mapping[str, Any], names: Mapping[str, str] | None = None
) -> Any:
    """``config`` with the dotted ``changes`` applied (text converts to the type).

    Values that are not text are taken as they are (the dataclasses validate
    them). ``names`` maps a key to the name the user gave it (an alias), for
    messages. Every config on a changed path is rebuilt, so its ``__post_init__``
    checks run again; a tagged union's member chosen by text in the same call
    is built from its defaults and the fields given.

    Raises:
        JobError: an unknown key, text that does not fit the type, a field of
            another member of a tagged union, or a value a config rejects; the
            message names the dotted key and the value.
    """
    cls = type(config)
    for key in changes:
        _field_type(cls, key)
    typed = {tuple(key.split(".")): value for key, value in changes.items()}
    return _rebuild(cls, config, typed, _Context(cls.__qualname__, names or {}))


@dataclasses.dataclass(frozen=True, slots=True)
class _Context:
    root: str  # the config's name, for messages
    names: Mapping[str, str]  # dotted key -> the name the user gave


def _field_type(cls: type, key: str) -> Any:
    try:
        return resolve(cls, key)
    except KeyError:
        close = difflib.get_close_matches(key, keys(cls), n=3)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise JobError(
            format_where(
                f"--set {key}",
                cls.__qualname__,
                "a parameter of the job",
                f"{key!r}, which is none",
                f"{hint}strata run JOB --help lists every parameter",
            )
        ) from None


def _takes_text(annotation: Any) -> bool:
    """Whether a ``str`` value is already of the annotated type."""
    if annotation is str:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return str in typing.get_args(annotation)
    return False


def _typed(value: Any, annotation: Any, key: str, ctx: _Context) -> Any:
    """``value`` converted to ``annotation`` if it is text (``key``: dotted)."""
    if not isinstance(value, str) or _takes_text(annotation):
        return value
    try:
        return coerce(value, annotation)
    except (TypeError, ValueError) as exc:
        raise JobError(
            format_where(
                f"--set {ctx.names.get(key, key)}",
                ctx.root,
                type_name(annotation),
                f"{value!r} ({exc})",
                "strata run JOB --help lists every parameter",
            )
        ) from exc


def _rebuild(
    cls: type,
    current: Any,
    changes: dict[tuple[str, ...], Any],
    ctx: _Context,
    prefix: str = "",
) -> Any:
    types_ = hints(cls)
    direct: dict[str, Any] = {}
    nested: dict[str, dict[tuple[str, ...], Any]] = {}
    for path, value in changes.items():
        if len(path) == 1:
            direct[path[0]] = _typed(value, types_[path[0]], prefix + path[0], ctx)
        else:
            nested.setdefault(path[0], {})[path[1:]] = value
    for name, inner_changes in nested.items():
        base = direct.get(name, None if current is None else getattr(current, name))
        inner = _config_of(types_[name])
        if inner is None:  # a tagged union: the chosen member
            inner = _chosen(types_[name], base, inner_changes, f"{prefix}{name}", ctx)
            if isinstance(changes.get((name,)), str):
                base = None  # chosen by its tag just now: its defaults
        inner_prefix = f"{prefix}{name}."
        direct[name] = _rebuild(inner, base, inner_changes, ctx, inner_prefix)
    try:
        if current is None:
            return cls(**direct)
        return dataclasses.replace(current, **direct)
    except (TypeError, ValueError) as exc:
        full = [prefix + ".".join(p) for p in changes]
        keys = ", ".join(ctx.names.get(k, k) for k in full)
        raise JobError(f"--set {keys}: {exc}") from exc


def _chosen(
    annotation: Any,
    chosen: Any,
    changes: Mapping[tuple[str, ...], Any],
    key: str,
    ctx: _Context,
) -> type:
    """The tagged union's member ``chosen`` is, checked to have every field set."""
    variants = tagged(annotation)
    current = "none" if chosen is None else tag(type(chosen))
    for path, value in changes.items():
        if chosen is None or path[0] not in _names(type(chosen)):
            owners = [t for t, v in variants.items() if path[0] in _names(v)]
            field = f"{key}.{'.'.join(path)}"
            raise JobError(
                format_where(
                    f"--set {ctx.names.get(field, field)}",
                    ctx.root,
                    f"a setting of {key}={current}",
                    f"{show(value)}, a setting of {' and '.join(owners)} only",
                    f"set {ctx.names.get(key, key)}={owners[0]} too",
                )
            )
    return type(chosen)


def section_docs(doc: str | None, section: str) -> dict[str, str]:
    """One line per entry of a Google-style docstring section (``Attributes``).

    The line is the entry's first sentence, with reST markup removed.

    Examples:
        >>> section_docs('''Summary.
        ...
        ... Args:
        ...     k: the number of parts
        ...         (at least 2). More.
        ...     seed: seeds it.
        ... ''', "Args")
        {'k': 'the number of parts (at least 2).', 'seed': 'seeds it.'}
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    try:
        start = lines.index(f"{section}:") + 1
    except ValueError:
        return {}
    entries: dict[str, list[str]] = {}
    indent: int | None = None
    name = ""
    for line in lines[start:]:
        if line.strip() and not line[:1].isspace():
            break  # the next section
        depth = len(line) - len(line.lstrip())
        match = re.match(r"\s+(\*{0,2}\w+)(?: \(.*?\))?:(?:\s+(.*))?$", line)
        if match and (indent is None or depth <= indent):
            indent = depth
            name = match.group(1)
            entries[name] = [match.group(2) or ""]
        elif name and line.strip():
            entries[name].append(line.strip())
    return {key: _first_sentence(" ".join(parts)) for key, parts in entries.items()}


def _first_sentence(text: str) -> str:
    text = re.sub(r":\w+:`~?([^`]*)`", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    text = text.replace("``", "").strip()
    match = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s|$)", text)
    return text[: match.start() + 1] if match else text


def function_parameters(
    function: Callable[..., Any], params: Mapping[str, inspect.Parameter]
) -> list[JobParameter]:
    """A plain ``build``'s parameters; docs from its ``Args:`` section."""
    docs = section_docs(function.__doc__, "Args")
    result = []
    for name, param in params.items():
        annotation = param.annotation
        if annotation is inspect.Parameter.empty:
            kind = type(param.default).__name__
        else:
            kind = type_name(annotation)
        default = (
            "(required)"
            if param.default is inspect.Parameter.empty
            else show(param.default)
        )
        result.append(JobParameter(name, kind, default, docs.get(name, "")))
    return result


def table(rows: Sequence[JobParameter]) -> str:
    """The parameters as aligned columns: name, type, default, doc."""
    if not rows:
        return "  (none)"
    widths = [
        max(len(getattr(r, column)) for r in rows)
        for column in ("name", "type", "default")
    ]
    return "\n".join(
        f"  {r.name:<{widths[0]}}  {r.type:<{widths[1]}}  "
        f"{r.default:<{widths[2]}}  {r.doc}".rstrip()
        for r in rows
    )
