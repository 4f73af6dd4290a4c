"""The wire form of the recommender job's data: plain dicts of arrays and tables.

The process and Ray executors move a step's value between processes as frames
(:mod:`strata.engine.wire`): numbers, strings, numpy arrays, tensors, Arrow tables,
and dicts and lists of them, never pickled objects. The job's steps therefore
pass :class:`~strata.operators.recsys.interactions.Interactions`,
:class:`~strata.operators.recsys.split.Split`,
:class:`~strata.storage.hetero.TypedGraph` and
:class:`~strata.operators.recsys.features.RecFeatures` in this form; each
``*_payload`` has an inverse ``*_from_payload`` that rebuilds the value (the
original ids, of any Arrow type, travel as one-column tables).

Examples:
    >>> from strata.operators.recsys.synth import SynthConfig, synth_interactions
    >>> inter = synth_interactions(SynthConfig.smoke(), seed=0)
    >>> back = interactions_from_payload(interactions_payload(inter))
    >>> bool((back.item == inter.item).all()), back.user_ids.equals(inter.user_ids)
    (True, True)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa

from strata.operators.recsys.features import RecFeatures
from strata.operators.recsys.interactions import Interactions
from strata.operators.recsys.split import Split, SplitReport
from strata.storage.hetero import Relation, RelationCSR, TypedGraph

__all__ = [
    "Payload",
    "features_from_payload",
    "features_payload",
    "graph_from_payload",
    "graph_payload",
    "interactions_from_payload",
    "interactions_payload",
    "split_from_payload",
    "split_payload",
]

#: A wire-safe value: a dict of arrays, tables, numbers and nested dicts.
Payload = dict[str, Any]


def _array(value: Any, dtype: type) -> np.ndarray:
    """``value`` as a writable array of ``dtype``.

    Frames arrive as read-only views, and ``torch.from_numpy`` warns on those.
    """
    return np.require(value, dtype=dtype, requirements=("C", "W"))


def _ids_table(ids: pa.Array | pa.ChunkedArray) -> pa.Table:
    return pa.table({"id": ids})


def _ids(table: pa.Table) -> pa.Array:
    return table.column("id").combine_chunks()


def interactions_payload(inter: Interactions) -> Payload:
    """``inter`` as a wire-safe dict (arrays; ids as one-column Arrow tables)."""
    payload: Payload = {
        "user": inter.user,
        "item": inter.item,
        "timestamp": inter.timestamp,
        "num_users": inter.num_users,
        "num_items": inter.num_items,
        "item_domain": inter.item_domain,
        "domains": list(inter.domains),
        "user_ids": _ids_table(inter.user_ids),
        "item_ids": _ids_table(inter.item_ids),
    }
    for name in ("label", "user_features", "item_features"):
        value = getattr(inter, name)
        if value is not None:
            payload[name] = value
    return payload


def interactions_from_payload(payload: Payload) -> Interactions:
    """Inverse of :func:`interactions_payload`."""

    def array(name: str, dtype: type) -> Any:
        value = payload.get(name)
        return None if value is None else _array(value, dtype)

    return Interactions(
        user=array("user", np.int64),
        item=array("item", np.int64),
        timestamp=array("timestamp", np.int64),
        label=array("label", np.float32),
        num_users=int(payload["num_users"]),
        num_items=int(payload["num_items"]),
        item_domain=array("item_domain", np.int64),
        domains=tuple(payload["domains"]),
        user_ids=_ids(payload["user_ids"]),
        item_ids=_ids(payload["item_ids"]),
        user_features=array("user_features", np.float32),
        item_features=array("item_features", np.float32),
    )


def split_payload(split: Split) -> Payload:
    """``split`` (with its interactions) as a wire-safe dict."""
    return {
        "inter": interactions_payload(split.inter),
        "train": split.train,
        "val": split.val,
        "test": split.test,
        "eval_users": split.eval_users,
        "val_users": split.val_users,
        "report": dataclasses.asdict(split.report),
    }


def split_from_payload(payload: Payload) -> Split:
    """Inverse of :func:`split_payload`."""

    def rows(name: str) -> np.ndarray:
        return _array(payload[name], np.int64)

    return Split(
        inter=interactions_from_payload(payload["inter"]),
        train=rows("train"),
        val=rows("val"),
        test=rows("test"),
        eval_users=rows("eval_users"),
        val_users=rows("val_users"),
        report=SplitReport(**payload["report"]),
    )


def graph_payload(graph: TypedGraph) -> Payload:
    """``graph`` as a wire-safe dict: node counts, then one CSR per relation."""
    relations: list[Payload] = []
    for rel, csr in graph.relations.items():
        entry: Payload = {
            "src": rel.src,
            "name": rel.name,
            "dst": rel.dst,
            "indptr": csr.indptr,
            "indices": csr.indices,
        }
        if csr.weights is not None:
            entry["weights"] = csr.weights
        relations.append(entry)
    return {"num_nodes": dict(graph.num_nodes), "relations": relations}


def graph_from_payload(payload: Payload) -> TypedGraph:
    """Inverse of :func:`graph_payload`."""
    relations: dict[Relation, RelationCSR] = {}
    for entry in payload["relations"]:
        weights = entry.get("weights")
        relations[Relation(entry["src"], entry["name"], entry["dst"])] = RelationCSR(
            _array(entry["indptr"], np.int64),
            _array(entry["indices"], np.int64),
            None if weights is None else _array(weights, np.float32),
        )
    counts = {str(k): int(v) for k, v in payload["num_nodes"].items()}
    return TypedGraph(counts, relations)


def features_payload(features: RecFeatures) -> Payload:
    """``features`` as a wire-safe dict of arrays."""
    return {
        "user": features.user,
        "item": features.item,
        "item_popularity": features.item_popularity,
    }


def features_from_payload(payload: Payload) -> RecFeatures:
    """Inverse of :func:`features_payload`."""
    return RecFeatures(
        user=_array(payload["user"], np.float32),
        item=_array(payload["item"], np.float32),
        item_popularity=_array(payload["item_popularity"], np.float32),
    )
