"""Reading a user's table file (Parquet, CSV or TSV) into Arrow, with clear errors.

Node tables (:mod:`.nodes`) and interaction tables
(``strata.operators.recsys.interactions``) are both a file a user hands in whole;
both read it here, so the accepted formats and the errors are the same.

Examples:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "t.csv").write_text("a,b" + chr(10) + "1,2")
    >>> read_table_file(folder / "t.csv", "example", "table").to_pylist()
    [{'a': 1, 'b': 2}]
    >>> try:
    ...     read_table_file(folder / "t.json", "example", "table")
    ... except FormatError as error:
    ...     print(str(error).split(": ", 1)[1])
    expected a .parquet, .pq, .csv or .tsv table, got '.json'.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pv
import pyarrow.parquet as pq

from strata.storage.errors import FormatError

__all__ = ["read_table_file"]

_PARQUET = (".parquet", ".pq")
_TEXT = (".csv", ".tsv")
_GZIP = (".csv.gz", ".tsv.gz")


def read_table_file(
    path: Path, where: str, what: str, *, gzip: bool = False
) -> pa.Table:
    """``path`` as an Arrow table, by its suffix.

    Args:
        path: a ``.parquet``/``.pq``, ``.csv`` or ``.tsv`` file (with ``gzip``,
            also ``.csv.gz`` and ``.tsv.gz``).
        where: the caller, named in errors.
        what: the kind of table, named in errors ("node table").
        gzip: whether gzipped CSV/TSV are accepted.

    Raises:
        FormatError: an unreadable or truncated file, or another suffix.
    """
    suffix = "".join(path.suffixes).lower() if gzip else path.suffix.lower()
    text = _TEXT + _GZIP if gzip else _TEXT
    try:
        if suffix.endswith(_PARQUET):
            return pq.read_table(str(path))
        if suffix.endswith(text):
            delimiter = "\t" if ".tsv" in suffix else ","
            return pv.read_csv(
                str(path), parse_options=pv.ParseOptions(delimiter=delimiter)
            )
    except (pa.ArrowException, OSError) as err:
        raise FormatError.build(
            str(path),
            where,
            f"a complete Parquet or CSV {what}",
            f"{type(err).__name__}: {err}",
            "a truncated file must be written again",
        ) from err
    formats = ".parquet, .pq, .csv or .tsv" + (" (CSV/TSV may be .gz)" if gzip else "")
    raise FormatError.build(
        str(path), where, f"a {formats} {what}", repr(path.suffix or "no suffix")
    )
