"""Top-K recommendations out: one Parquet file, original ids, written atomically.

Each row is one recommendation: ``user_id`` and ``item_id`` are the ids of the
user's interaction table (any Arrow type: strings stay strings), ``rank`` counts
from 1 (best first) and ``score`` is the model's score. The file is written to a
temporary name in the same directory and renamed into place, so a crash leaves the
previous file or the new one, never a torn one.

Examples:
    >>> import tempfile, pathlib
    >>> import numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "topk.parquet"
    >>> write_topk(
    ...     path,
    ...     users=np.array([1]),
    ...     top_items=np.array([[2, 0]]),
    ...     top_scores=np.array([[0.9, 0.5]], dtype=np.float32),
    ...     user_ids=pa.array(["ann", "bob"]),
    ...     item_ids=pa.array(["x", "y", "z"]),
    ... )
    2
    >>> row = pq.read_table(path).to_pylist()[0]
    >>> row["user_id"], row["rank"], row["item_id"], round(row["score"], 4)
    ('bob', 1, 'z', 0.9)
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from strata.operators.errors import OperatorError, check

__all__ = ["TOPK_COLUMNS", "write_topk"]

#: The columns of a top-K file, in order.
TOPK_COLUMNS = ("user_id", "rank", "item_id", "score")


def write_topk(
    path: str | os.PathLike[str],
    *,
    users: np.ndarray,
    top_items: np.ndarray,
    top_scores: np.ndarray,
    user_ids: pa.Array,
    item_ids: pa.Array,
) -> int:
    """Write ``user_id, rank, item_id, score`` rows to ``path`` (Parquet), atomically.

    Args:
        path: the file; its directory is created if missing.
        users: dense ids of the users, one per row of ``top_items``.
        top_items: int ``[len(users), K]`` dense item ids, best first; entries
            below 0 (a user with fewer than K rankable items) are left out.
        top_scores: float ``[len(users), K]`` their scores.
        user_ids: the original id of every dense user id.
        item_ids: the original id of every dense item id.

    Returns:
        How many rows were written.

    Raises:
        OperatorError: on shapes that disagree, or a path that cannot be written.
    """
    where = "write_topk"
    users = np.asarray(users, dtype=np.int64)
    top_items = np.asarray(top_items, dtype=np.int64).reshape(users.shape[0], -1)
    top_scores = np.asarray(top_scores, dtype=np.float32)
    check(
        top_scores.shape == top_items.shape,
        "top_scores",
        where,
        f"shape {top_items.shape} (as top_items)",
        top_scores.shape,
    )
    k = top_items.shape[1]
    keep = (top_items >= 0).reshape(-1)
    user_rows = np.repeat(users, k)[keep]
    ranks = np.tile(np.arange(1, k + 1, dtype=np.int32), users.shape[0])[keep]
    items = top_items.reshape(-1)[keep]
    table = pa.table(
        {
            "user_id": user_ids.take(pa.array(user_rows)),
            "rank": pa.array(ranks),
            "item_id": item_ids.take(pa.array(items)),
            "score": pa.array(top_scores.reshape(-1)[keep]),
        }
    )
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{secrets.token_hex(4)}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, str(tmp))
        os.replace(tmp, target)
    except OSError as error:
        raise OperatorError.build(
            "path",
            where,
            "a writable file path",
            f"{str(target)!r} ({error.strerror or error})",
        ) from error
    finally:
        tmp.unlink(missing_ok=True)
    return int(table.num_rows)
