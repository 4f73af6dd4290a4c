"""The global temporal split (80/10/10) with no leakage (``e2egrec.md`` §4.1, G0).

Interactions are ordered by ``(timestamp, table row)`` and cut at the fractions:
the earliest 80% train, the next 10% validation, the last 10% test. A ``(user,
item)`` pair is kept only at its first occurrence (a later repeat of a pair seen
in train would otherwise be a test "hit" that no ranking excludes, or a test pair
among the graph's edges); the repeats dropped are counted.

Evaluation users have at least one train and at least one test interaction
(validation users: one train, one validation). Users with no train interaction
cannot be scored from the graph or their id embedding: they are **skipped** from
evaluation and counted in :attr:`SplitReport.users_without_train` (documented
skip, not an error).

Everything that summarises interactions (graph edges, co-engagement, popularity,
feature statistics) must read :attr:`Split.train` only; :func:`train_pairs`
is the one accessor they use.

Examples:
    >>> from strata.operators.recsys.synth import SynthConfig, synth_interactions
    >>> split = temporal_split(synth_interactions(SynthConfig.smoke(), seed=0))
    >>> round(split.train.shape[0] / split.inter.num_interactions, 2)
    0.8
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from strata.operators.errors import check
from strata.operators.recsys.interactions import Interactions
from strata.storage._types import Int64Array

__all__ = [
    "RankingTask",
    "Split",
    "SplitReport",
    "items_by_user",
    "ranking_task",
    "temporal_split",
    "train_pairs",
]


@dataclass(frozen=True, slots=True)
class SplitReport:
    """What the split kept, dropped and skipped.

    Attributes:
        num_train: train interactions.
        num_val: validation interactions.
        num_test: test interactions.
        duplicates_dropped: repeated ``(user, item)`` pairs dropped (first kept).
        users_without_train: users with no train interaction (skipped in eval).
        eval_users: users with >= 1 train and >= 1 test interaction.
        val_users: users with >= 1 train and >= 1 validation interaction.
    """

    num_train: int
    num_val: int
    num_test: int
    duplicates_dropped: int
    users_without_train: int
    eval_users: int
    val_users: int


@dataclass(frozen=True, slots=True)
class Split:
    """Row indices (into ``inter``) of each part, and the users each part scores.

    Attributes:
        inter: the interactions split.
        train: row indices of train interactions, in time order.
        val: row indices of validation interactions.
        test: row indices of test interactions.
        eval_users: sorted users with >= 1 train and >= 1 test interaction.
        val_users: sorted users with >= 1 train and >= 1 validation interaction.
        report: counts of what was kept, dropped and skipped.
    """

    inter: Interactions
    train: Int64Array
    val: Int64Array
    test: Int64Array
    eval_users: Int64Array
    val_users: Int64Array
    report: SplitReport


def train_pairs(split: Split) -> tuple[Int64Array, Int64Array]:
    """The ``(user, item)`` ids of the train interactions (the only graph source)."""
    return split.inter.user[split.train], split.inter.item[split.train]


def items_by_user(
    user: Int64Array, item: Int64Array, num_users: int
) -> tuple[Int64Array, Int64Array]:
    """CSR ``(indptr, items)`` of each user's items, items sorted per user.

    Examples:
        >>> indptr, items = items_by_user(np.array([1, 0, 1]), np.array([5, 3, 2]), 3)
        >>> indptr.tolist(), items.tolist()
        ([0, 1, 3, 3], [3, 2, 5])
    """
    order = np.lexsort((item, user))
    indptr = np.zeros(num_users + 1, dtype=np.int64)
    np.cumsum(np.bincount(user, minlength=num_users), out=indptr[1:])
    return indptr, item[order].astype(np.int64)


def _first_occurrences(inter: Interactions, order: Int64Array) -> Int64Array:
    """``order`` without the later repeats of a ``(user, item)`` pair."""
    key = inter.user[order] * np.int64(inter.num_items) + inter.item[order]
    _, first = np.unique(key, return_index=True)
    kept: Int64Array = order[np.sort(first)]
    return kept


def temporal_split(
    inter: Interactions, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
) -> Split:
    """Split interactions globally by time.

    Args:
        inter: the interactions.
        fractions: train, validation and test shares; they must sum to 1.

    Returns:
        The split (row indices per part, evaluation users, a report).

    Raises:
        OperatorError: for fractions that are not positive or do not sum to 1.
    """
    where = "temporal_split"
    check(
        len(fractions) == 3 and all(f > 0 for f in fractions),
        "fractions",
        where,
        "three positive shares (train, val, test)",
        fractions,
    )
    check(abs(sum(fractions) - 1.0) < 1e-9, "fractions", where, "a sum of 1", fractions)
    rows = np.arange(inter.num_interactions, dtype=np.int64)
    order = rows[np.lexsort((rows, inter.timestamp))]
    kept = _first_occurrences(inter, order)
    n = kept.shape[0]
    n_train = round(fractions[0] * n)
    n_val = round(fractions[1] * n)
    train, val = kept[:n_train], kept[n_train : n_train + n_val]
    test = kept[n_train + n_val :]
    has_train = np.bincount(inter.user[train], minlength=inter.num_users) > 0
    has_val = np.bincount(inter.user[val], minlength=inter.num_users) > 0
    has_test = np.bincount(inter.user[test], minlength=inter.num_users) > 0
    eval_users = np.flatnonzero(has_train & has_test).astype(np.int64)
    val_users = np.flatnonzero(has_train & has_val).astype(np.int64)
    active = np.bincount(inter.user, minlength=inter.num_users) > 0
    report = SplitReport(
        num_train=int(train.shape[0]),
        num_val=int(val.shape[0]),
        num_test=int(test.shape[0]),
        duplicates_dropped=int(inter.num_interactions - n),
        users_without_train=int((active & ~has_train).sum()),
        eval_users=int(eval_users.shape[0]),
        val_users=int(val_users.shape[0]),
    )
    return Split(inter, train, val, test, eval_users, val_users, report)


@dataclass(frozen=True, slots=True)
class RankingTask:
    """What a full-catalogue evaluation ranks: users, excluded and relevant items.

    Attributes:
        users: the users scored.
        seen: per-user CSR ``(indptr, items)`` of excluded items.
        relevant: per-user CSR of the items to find.
    """

    users: Int64Array
    seen: tuple[Int64Array, Int64Array]
    relevant: tuple[Int64Array, Int64Array]


def ranking_task(split: Split, part: Literal["val", "test"]) -> RankingTask:
    """The ranking of validation (train excluded) or test (train + val excluded).

    Examples:
        >>> from strata.operators.recsys.synth import SynthConfig, synth_interactions
        >>> split = temporal_split(synth_interactions(SynthConfig.smoke(), seed=0))
        >>> task = ranking_task(split, "test")
        >>> task.users.shape[0] == split.report.eval_users
        True
    """
    inter = split.inter
    if part == "val":
        seen_rows, rows, users = split.train, split.val, split.val_users
    else:
        seen_rows = np.concatenate([split.train, split.val])
        rows, users = split.test, split.eval_users
    seen = items_by_user(inter.user[seen_rows], inter.item[seen_rows], inter.num_users)
    relevant = items_by_user(inter.user[rows], inter.item[rows], inter.num_users)
    return RankingTask(users, seen, relevant)
