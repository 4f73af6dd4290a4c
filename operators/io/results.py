"""Results out: predictions, embeddings and the trained model, in open formats.

A training job with an ``output_dir`` adds an ``export`` step after its trainer
(:func:`export_results`): it rebuilds the model from the trainer's ``model`` port
(the weights its result was measured with) and writes

* ``predictions.parquet``: ``node_id`` (the original id), ``split`` (``train``,
  ``val``, ``test`` or ``none``), ``label`` (null where unknown), ``pred`` and
  ``probabilities`` (one float per class);
* ``embeddings.parquet``: ``node_id`` and ``embedding``, the final hidden
  representation (the input of the last layer);
* ``model/``: ``weights.pt`` (a plain ``state_dict``, loaded with
  ``torch.load(weights_only=True)``: no pickle of arbitrary objects) and
  ``config.json`` (the model's settings, widths and feature preprocessing).

Every file is written to a temporary name and renamed into place.
:func:`load_model` reads ``model/`` back; ``strata predict MODEL GRAPH --out FILE``
(:mod:`strata.operators.cli.predict`) runs it on a graph.

Examples:
    >>> import tempfile, torch
    >>> from strata.operators.trainers import ModelConfig
    >>> model = ModelConfig("gcn", hidden=4).build(3, 2)
    >>> directory = tempfile.mkdtemp()
    >>> _ = save_model(directory, model, ModelConfig("gcn", hidden=4), 3, 2)
    >>> loaded, saved = load_model(directory)
    >>> saved.in_channels, saved.out_channels, type(loaded).__name__
    (3, 2, 'GCN')
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.io.datasets import dataset_from_payload
from strata.operators.layers import BasicGNN
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.data import FEATURES, TrainingData, as_training_data

MODEL_DIR = "model"
WEIGHTS = "weights.pt"
CONFIG = "config.json"
FORMAT = "strata-model/1"


@dataclass(frozen=True, slots=True)
class SavedModel:
    """What ``model/config.json`` holds.

    Attributes:
        model: the model's settings (a user's layer by its import path).
        in_channels: input feature width.
        out_channels: output width (classes).
        normalize_features: whether training row-normalised the features.
    """

    model: ModelConfig
    in_channels: int
    out_channels: int
    normalize_features: bool = False


def _write_atomic(path: Path, write: Any) -> None:
    temporary = path.with_name(path.name + ".tmp")
    write(temporary)
    os.replace(temporary, path)


#: ModelConfig fields holding a user's code, saved by import path.
_CODE_FIELDS = ("layer", "module")


def _model_json(config: ModelConfig) -> dict[str, Any]:
    data = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name not in _CODE_FIELDS
    }
    for name in _CODE_FIELDS:
        code = getattr(config, name)
        if code is not None:
            label = getattr(code, "__qualname__", type(code).__qualname__)
            data[name] = f"{code.__module__}:{label}"
    return data


def _model_config(data: dict[str, Any]) -> ModelConfig:
    for field_name in _CODE_FIELDS:
        path = data.pop(field_name, None)
        if isinstance(path, str):
            module, _, name = path.partition(":")
            target: Any = importlib.import_module(module)
            for part in name.split("."):
                target = getattr(target, part)
            data[field_name] = target
    return ModelConfig(**data)


def save_model(
    directory: str | os.PathLike[str],
    model: nn.Module,
    config: ModelConfig,
    in_channels: int,
    out_channels: int,
    *,
    normalize_features: bool = False,
) -> Path:
    """Write ``model``'s weights and settings to ``directory`` (atomically).

    Returns:
        The directory.
    """
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    _write_atomic(path / WEIGHTS, lambda p: torch.save(state, p))
    body = {
        "format": FORMAT,
        "model": _model_json(config),
        "in_channels": in_channels,
        "out_channels": out_channels,
        "normalize_features": normalize_features,
    }
    _write_atomic(path / CONFIG, lambda p: p.write_text(json.dumps(body, indent=2)))
    return path


def load_model(directory: str | os.PathLike[str]) -> tuple[nn.Module, SavedModel]:
    """The model saved in ``directory`` (eval mode) and its settings.

    Raises:
        OperatorError: when the directory holds no saved model, or another format.
    """
    path = Path(directory)
    where = f"load_model({path})"
    if not (path / CONFIG).is_file() or not (path / WEIGHTS).is_file():
        raise OperatorError.build(
            "directory",
            where,
            f"a saved model ({CONFIG} and {WEIGHTS})",
            "no such files",
            "a training job writes it under OUTPUT_DIR/model",
        )
    try:
        body = json.loads((path / CONFIG).read_text())
    except ValueError as exc:
        raise OperatorError.build(CONFIG, where, "JSON", str(exc)) from None
    if body.get("format") != FORMAT:
        raise OperatorError.build(
            "format", where, repr(FORMAT), repr(body.get("format"))
        )
    saved = SavedModel(
        _model_config(dict(body["model"])),
        int(body["in_channels"]),
        int(body["out_channels"]),
        bool(body.get("normalize_features", False)),
    )
    model = saved.model.build_module(saved.in_channels, saved.out_channels)
    model.load_state_dict(torch.load(path / WEIGHTS, weights_only=True))
    return model.eval(), saved


@torch.no_grad()
def predict(model: nn.Module, data: TrainingData) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logits, embeddings)`` of every node: the embedding is the last layer's input.

    Runs the model's own layers in eval mode (no dropout). A user's module
    without a layer stack (``convs``) gives its output as both.
    """
    model.eval()
    x = data.features.get(FEATURES, torch.arange(data.graph.num_nodes))
    if not isinstance(model, BasicGNN):
        out = model(data.graph, x)
        return out, out
    seen: list[torch.Tensor] = []  # the last layer's input, from the model's forward
    hook = model.convs[-1].register_forward_pre_hook(
        lambda _, args: seen.append(args[1])
    )
    try:
        logits = model(data.graph, x)
    finally:
        hook.remove()
    return logits, seen[-1]


def _splits(data: TrainingData) -> np.ndarray:
    split = np.full(data.graph.num_nodes, "none", dtype=object)
    for name in ("train", "val", "test"):
        mask = data.masks.get(name)
        if mask is not None:
            split[np.asarray(mask.cpu().numpy(), dtype=bool)] = name
    return split


def _fixed_lists(values: np.ndarray) -> pa.FixedSizeListArray:
    flat = pa.array(np.ascontiguousarray(values, dtype=np.float32).ravel())
    return pa.FixedSizeListArray.from_arrays(flat, int(values.shape[1]))


def write_predictions(
    path: str | os.PathLike[str],
    node_ids: np.ndarray,
    logits: torch.Tensor,
    data: TrainingData,
) -> Path:
    """``predictions.parquet`` (module docstring) for every node."""
    probabilities = F.softmax(logits.float(), dim=1).numpy()
    labels = np.asarray(data.y.cpu().numpy(), dtype=np.int64)
    table = pa.table(
        {
            "node_id": pa.array(node_ids),
            "split": pa.array(_splits(data).tolist(), pa.string()),
            "label": pa.array(labels, pa.int64(), mask=labels < 0),
            "pred": pa.array(probabilities.argmax(axis=1).astype(np.int64)),
            "probabilities": _fixed_lists(probabilities),
        }
    )
    out = Path(path)
    _write_atomic(out, lambda p: pq.write_table(table, p))
    return out


def write_embeddings(
    path: str | os.PathLike[str], node_ids: np.ndarray, embeddings: torch.Tensor
) -> Path:
    """``embeddings.parquet``: ``node_id`` and ``embedding`` for every node."""
    table = pa.table(
        {
            "node_id": pa.array(node_ids),
            "embedding": _fixed_lists(embeddings.float().numpy()),
        }
    )
    out = Path(path)
    _write_atomic(out, lambda p: pq.write_table(table, p))
    return out


def node_ids(data: Any) -> np.ndarray:
    """The original ids of the nodes: a dataset payload's id column, if it has one.

    An edge list with 1-based, sparse or string ids is stored with dense ids and
    its original ids (:attr:`strata.storage.GraphDataset.original_ids`); every
    output names nodes by those. Data without any gets ``0..n-1``.
    """
    if isinstance(data, Mapping) and "node" in data:
        return np.asarray(dataset_from_payload(data).original_ids)
    training = as_training_data(data, "node_ids")
    return np.arange(training.graph.num_nodes, dtype=np.int64)


def export_results(
    data: Any,
    weights: list[dict[str, Any]],
    *,
    train: TrainConfig,
    output_dir: str,
    normalize_features: bool = False,
) -> dict[str, Any]:
    """Batch step: write predictions, embeddings and the model to ``output_dir``.

    Args:
        data: the training data the trainer read (a dataset step's payload).
        weights: the trainer's ``model`` port (one ``{"state": ...}`` item).
        train: the trainer's settings (the model is rebuilt from them).
        output_dir: where the files go (created if missing).
        normalize_features: recorded with the model, for ``strata predict``.

    Returns:
        The paths written, for the job's outputs.
    """
    training = as_training_data(data, "export_results")
    (item,) = weights
    model = train.model.build_module(training.num_features, training.num_classes)
    model.load_state_dict(item["state"])
    logits, embeddings = predict(model, training)
    ids = node_ids(data)
    root = Path(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    saved = save_model(
        root / MODEL_DIR,
        model,
        train.model,
        training.num_features,
        training.num_classes,
        normalize_features=normalize_features,
    )
    predictions = write_predictions(root / "predictions.parquet", ids, logits, training)
    vectors = write_embeddings(root / "embeddings.parquet", ids, embeddings)
    return {
        "predictions_path": str(predictions),
        "embeddings_path": str(vectors),
        "model_path": str(saved),
    }
