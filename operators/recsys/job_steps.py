"""The batch steps of ``jobs/e2egrec.py`` (``e2egrec.md`` §4.7), in wire form.

Every step takes and returns the wire form of
:mod:`strata.operators.recsys.job_payloads`, so the job runs on every executor::

    generate | load -> split -> graph, features -> train-<variant> (RecTrainer)
      -> evaluate -> report

:func:`generate` draws the synthetic interactions (§4.1); :func:`load` reads a
user's own table instead. :func:`split` is the global temporal split;
:func:`graph` and :func:`features` read its train part only (G0).

Examples:
    >>> data = generate(num_users=50, num_items=30, communities=4, max_per_user=10)
    >>> parts = split(data)
    >>> parts["report"]["num_train"] > parts["report"]["num_test"] > 0
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strata.operators.errors import check
from strata.operators.recsys.features import build_features
from strata.operators.recsys.graph import build_typed_graph
from strata.operators.recsys.interactions import load_interactions
from strata.operators.recsys.job_payloads import (
    Payload,
    features_payload,
    graph_payload,
    interactions_from_payload,
    interactions_payload,
    split_from_payload,
    split_payload,
)
from strata.operators.recsys.split import temporal_split
from strata.operators.recsys.synth import SynthConfig, synth_interactions

__all__ = ["features", "generate", "graph", "load", "split"]


def generate(seed: int = 0, **settings: Any) -> Payload:
    """Batch step: synthetic interactions (``settings``: SynthConfig fields)."""
    if isinstance(settings.get("domains"), list):
        settings["domains"] = tuple(settings["domains"])
    if isinstance(settings.get("domain_bias"), list):
        settings["domain_bias"] = tuple(settings["domain_bias"])
    return interactions_payload(synth_interactions(SynthConfig(**settings), seed))


def load(path: str) -> Payload:
    """Batch step: a user's interaction table (Parquet or CSV; any id type)."""
    return interactions_payload(load_interactions(Path(path)))


def split(
    data: Payload, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
) -> Payload:
    """Batch step: the global temporal split (train / validation / test)."""
    check(len(fractions) == 3, "fractions", "split", "3 shares", fractions)
    train, val, test = (float(f) for f in fractions)
    inter = interactions_from_payload(data)
    return split_payload(temporal_split(inter, (train, val, test)))


def graph(parts: Payload, co_engaged_top: int = 10) -> Payload:
    """Batch step: the typed user-item graph of the train interactions."""
    return graph_payload(build_typed_graph(split_from_payload(parts), co_engaged_top))


def features(parts: Payload) -> Payload:
    """Batch step: user and item features (train statistics only)."""
    return features_payload(build_features(split_from_payload(parts)))
