r"""User-item interactions: the :class:`Interactions` value and a table loader.

An interaction table has one row per event, with columns ``user``, ``item``,
``timestamp`` and, optionally, ``label`` (binary ``long_view``; missing means no
long-view task) and ``domain`` (the surface of the item, e.g. ``feed``/``search``;
missing means one domain, ``all``). User and item ids may be of any integer or
string type; each column is mapped on its own to dense ids ``0..n-1`` (the
edge-list loader's remap, :func:`strata.storage.loaders.edgelist.map_id_column`),
and :attr:`Interactions.user_ids` / :attr:`Interactions.item_ids` keep the original
ids for output. Timestamps are integers, or text/dates that parse as a timestamp
(kept as integer microseconds since the epoch).

Examples:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "events.csv"
    >>> _ = path.write_text("user,item,timestamp\nann,x,3\nbob,x,1\nann,y,2\n")
    >>> inter = load_interactions(path)
    >>> inter.user.tolist(), inter.item.tolist(), inter.user_ids.to_pylist()
    ([0, 1, 0], [0, 0, 1], ['ann', 'bob'])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.storage._types import Float32Array, Int64Array
from strata.storage.errors import FormatError
from strata.storage.loaders.edgelist import map_id_column
from strata.storage.loaders.tables import read_table_file

__all__ = ["REQUIRED_COLUMNS", "Interactions", "load_interactions"]

REQUIRED_COLUMNS: tuple[str, ...] = ("user", "item", "timestamp")
_WHERE = "load_interactions"


@dataclass(frozen=True, slots=True)
class Interactions:
    """Interactions with dense ids, in table order.

    Attributes:
        user: int64 user ids in ``[0, num_users)``, one per interaction.
        item: int64 item ids in ``[0, num_items)``.
        timestamp: int64 event times (any unit; only their order is used).
        label: float32 ``long_view`` labels in {0, 1}, or ``None``.
        num_users: user count.
        num_items: item count.
        item_domain: int64 domain index of every item (into ``domains``).
        domains: domain names, e.g. ``("feed", "search")``.
        user_ids: the original id of every dense user id (pyarrow array).
        item_ids: the original id of every dense item id.
        user_features: float32 ``[num_users, f]`` raw side features, or ``None``.
        item_features: float32 ``[num_items, f]`` raw side features, or ``None``.
    """

    user: Int64Array
    item: Int64Array
    timestamp: Int64Array
    label: Float32Array | None
    num_users: int
    num_items: int
    item_domain: Int64Array
    domains: tuple[str, ...]
    user_ids: pa.Array
    item_ids: pa.Array
    user_features: Float32Array | None = None
    item_features: Float32Array | None = None

    @property
    def num_interactions(self) -> int:
        """How many interactions (rows)."""
        return int(self.user.shape[0])

    def __post_init__(self) -> None:
        n = self.user.shape[0]
        for name in ("item", "timestamp"):
            if getattr(self, name).shape[0] != n:
                raise FormatError.build(
                    name, "Interactions", f"{n} rows (as user)", str(n)
                )
        if self.label is not None and self.label.shape[0] != n:
            raise FormatError.build(
                "label", "Interactions", f"{n} rows", str(self.label.shape[0])
            )
        if self.item_domain.shape[0] != self.num_items:
            raise FormatError.build(
                "item_domain",
                "Interactions",
                f"{self.num_items} rows (one per item)",
                str(self.item_domain.shape[0]),
            )


def _row(path: Path, index: int) -> str:
    """Where row ``index`` (0-based data row) is: a CSV line or a Parquet row."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return f"{path} row {index}"
    return f"{path}:{index + 2}"  # line 1 is the header


def _no_nulls(path: Path, table: pa.Table, name: str) -> None:
    column = table.column(name)
    if column.null_count:
        row = int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
        raise FormatError.build(
            f"column {name!r}",
            _row(path, row),
            "a value in every row",
            "an empty value",
        )


def _timestamps(path: Path, column: pa.ChunkedArray) -> Int64Array:
    """Integer timestamps; text and dates become microseconds since the epoch."""
    kind = column.type
    if pa.types.is_integer(kind):
        return np.asarray(column.to_numpy(), dtype=np.int64)
    if pa.types.is_floating(kind):
        values = np.asarray(column.to_numpy(), dtype=np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.argmax(bad))
            raise FormatError.build(
                "column 'timestamp'",
                _row(path, row),
                "a finite number or a date",
                f"{values[row]:g}",
            )
        return values.astype(np.int64)
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        micros = pc.cast(column, pa.timestamp("us"))
        return np.asarray(micros.cast(pa.int64()).to_numpy(), dtype=np.int64)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = column.to_pylist()
        try:
            as_int = pc.cast(column, pa.int64())
            return np.asarray(as_int.to_numpy(), dtype=np.int64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        try:
            micros = pc.cast(column, pa.timestamp("us"))
            return np.asarray(micros.cast(pa.int64()).to_numpy(), dtype=np.int64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        # Find the first value that parses neither way, to name its row.
        for row, value in enumerate(text):
            try:
                int(value)
            except ValueError:
                try:
                    pa.scalar(value).cast(pa.timestamp("us"))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise FormatError.build(
                        "column 'timestamp'",
                        _row(path, row),
                        "an integer or an ISO date/time such as 2024-05-01T12:00:00",
                        repr(value),
                    ) from None
    raise FormatError.build(
        "column 'timestamp'",
        str(path),
        "integers, numbers or dates",
        f"Arrow type {kind}",
    )


def _labels(path: Path, column: pa.ChunkedArray) -> Float32Array:
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        if pa.types.is_boolean(column.type):
            column = column.cast(pa.int8())
        else:
            raise FormatError.build(
                "column 'label'", str(path), "0/1 numbers", f"Arrow type {column.type}"
            )
    values = np.asarray(column.to_numpy(), dtype=np.float64)
    bad = ~np.isin(values, (0.0, 1.0))
    if bad.any():
        row = int(np.argmax(bad))
        raise FormatError.build(
            "column 'label'", _row(path, row), "0 or 1", f"{values[row]:g}"
        )
    return values.astype(np.float32)


def _item_domains(
    item: Int64Array, num_items: int, column: pa.ChunkedArray | None
) -> tuple[Int64Array, tuple[str, ...]]:
    """Each item's domain: the domain of its first interaction (``all`` if none)."""
    if column is None:
        return np.zeros(num_items, dtype=np.int64), ("all",)
    names, per_row = np.unique(
        np.asarray(column.cast(pa.string()).to_numpy(zero_copy_only=False), dtype=str),
        return_inverse=True,
    )
    domain = np.zeros(num_items, dtype=np.int64)
    # Reversed assignment: the first occurrence of each item is written last.
    domain[item[::-1]] = per_row[::-1]
    return domain, tuple(str(n) for n in names)


def load_interactions(path: str | Path) -> Interactions:
    """Read an interaction table from Parquet or CSV/TSV.

    Args:
        path: the table; columns ``user``, ``item``, ``timestamp`` and optionally
            ``label`` (0/1) and ``domain``. Other columns are ignored.

    Returns:
        The interactions with dense ids; the original ids in ``user_ids`` and
        ``item_ids``.

    Raises:
        FormatError: naming the file, column and row: a missing column (with the
            columns present), an empty value, a timestamp that parses as neither
            an integer nor a date, a label other than 0/1, float ids.
    """
    path = Path(path)
    if not path.is_file():
        raise FormatError.build(
            str(path), _WHERE, "an interaction table file", "no such file"
        )
    table = read_table_file(path, _WHERE, "interaction table", gzip=True)
    names = table.column_names
    for name in REQUIRED_COLUMNS:
        if name not in names:
            raise FormatError.build(
                f"column {name!r}",
                f"{_WHERE}({path})",
                f"columns {list(REQUIRED_COLUMNS)} (label, domain optional)",
                f"columns {names}",
                "rename the table's columns, e.g. user_id -> user",
            )
    present = [n for n in (*REQUIRED_COLUMNS, "label", "domain") if n in names]
    for name in present:
        _no_nulls(path, table, name)
    user, user_ids = map_id_column(table.column("user"), path, "user")
    item, item_ids = map_id_column(table.column("item"), path, "item")
    timestamp = _timestamps(path, table.column("timestamp"))
    label = _labels(path, table.column("label")) if "label" in names else None
    domain_col = table.column("domain") if "domain" in names else None
    item_domain, domains = _item_domains(item, len(item_ids), domain_col)
    return Interactions(
        user=user,
        item=item,
        timestamp=timestamp,
        label=label,
        num_users=len(user_ids),
        num_items=len(item_ids),
        item_domain=item_domain,
        domains=domains,
        user_ids=pa.array(user_ids),
        item_ids=pa.array(item_ids),
    )
