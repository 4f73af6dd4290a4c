"""Per-node result tables of the commands, written atomically.

Examples:
    >>> import tempfile, numpy as np, pyarrow.csv as pa_csv
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp()) / "ranks.csv"
    >>> write_node_table(out, np.array([7, 9]), "value", np.array([0.25, 0.75]),
    ...                  argument="--out", where="strata algo")
    >>> pa_csv.read_csv(out).column_names
    ['node_id', 'value']
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from strata.engine.errors import UsageError


def write_node_table(
    path: Path,
    node_ids: np.ndarray,
    column: str,
    values: np.ndarray,
    *,
    argument: str,
    where: str,
) -> None:
    """Write ``node_id,<column>`` rows (Parquet, or CSV by suffix), atomically.

    Raises:
        UsageError: ``path`` cannot be written (names ``argument`` and ``where``).
    """
    table = pa.table({"node_id": pa.array(node_ids), column: pa.array(values)})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if path.suffix.lower() == ".csv":
            pa_csv.write_csv(table, str(tmp))
        else:
            pq.write_table(table, str(tmp))
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise UsageError.build(
            argument,
            where,
            "a writable file path",
            f"{str(path)!r} ({error.strerror or error})",
        ) from None
