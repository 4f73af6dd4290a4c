"""Frozen configurations of a GNN model and of a training run.

:class:`ModelConfig` names a model of :data:`strata.operators.layers.MODELS` and its
sizes; :class:`TrainConfig` holds the optimiser, the epoch loop, early stopping and
checkpointing. Both validate on construction, so a bad setting fails when the job is
built, not after the data loaded.

Decisions the issue left open:

* **Weight decay scope** (:class:`DecayScope`): ``ALL`` parameters (PyTorch's
  default, Velickovic et al.'s GAT) or the ``FIRST`` layer only (Kipf & Welling's
  GCN code and PyG's ``gcn.py`` example regularise only the first layer).
* **Early stopping** (:class:`Monitor`): the monitored validation metric is the
  validation loss (default; smooth) or the validation accuracy. An epoch *improves*
  when the metric beats the best so far (lower loss / higher accuracy); training
  stops after ``patience`` epochs without improvement (``patience=0`` never stops
  early). With ``restore_best`` (default) the final result is measured with the
  weights of the best epoch, else with the last epoch's.

Examples:
    >>> config = TrainConfig(ModelConfig("gcn", hidden=16), lr=0.01, epochs=200)
    >>> config.monitor, config.decay_scope
    (<Monitor.VAL_LOSS: 'val_loss'>, <DecayScope.ALL: 'all'>)
    >>> model = config.model.build(in_channels=1433, out_channels=7)
    >>> model
    GCN(1433, 7, num_layers=2)
    >>> TrainConfig(ModelConfig("gcn"), lr=-1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.operators.errors.OperatorError: lr in TrainConfig: expected lr >= 0, \
got -1.0.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.errors import OperatorError, as_enum, check
from strata.operators.layers import MODELS, BasicGNN, LayerStack
from strata.operators.trainers.optim import Adam, Constant, Optimizer, Schedule
from strata.operators.trainers.tasks import NodeClassification, Task

#: Activations a model may use between layers.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "elu": F.elu,
}


class Monitor(enum.Enum):
    """The validation metric early stopping and best-epoch selection watch."""

    VAL_LOSS = "val_loss"
    VAL_ACCURACY = "val_accuracy"


class DecayScope(enum.Enum):
    """Which parameters weight decay (L2 in Adam) applies to."""

    ALL = "all"
    FIRST = "first"


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Which GNN to build, and its sizes.

    Attributes:
        name: a key of :data:`strata.operators.layers.MODELS` (``gcn``, ``sage``,
            ``gat``,
            ``gin``).
        hidden: width of every hidden layer (per head for GAT).
        num_layers: message-passing layers.
        dropout: feature dropout before every layer.
        activation: ``relu`` or ``elu`` (GAT's paper uses ELU).
        heads: GAT heads of every hidden layer.
        output_heads: GAT heads of the last layer (averaged).
        attention_dropout: GAT dropout on attention coefficients.
        aggr: GraphSAGE aggregator (``mean``, ``max``, ``sum``).
        layer: a user's own layer (``layer(in, out)``, e.g. a
            :class:`~strata.operators.layers.MessagePassing` subclass): the model
            stacks it (:class:`~strata.operators.layers.LayerStack`) and ``name``
            is only its label.
        module: a user's whole model, ``module(in_channels, out_channels)``
            returning any ``nn.Module`` with ``forward(graph, x)`` (a PyG model
            through :class:`~strata.operators.layers.pyg_adapter.PyGAdapter`);
            ``name`` is only its label and the sizes above are unused.
    """

    name: str = "gcn"
    hidden: int = 16
    num_layers: int = 2
    dropout: float = 0.5
    activation: str = "relu"
    heads: int = 8
    output_heads: int = 1
    attention_dropout: float = 0.0
    aggr: str = "mean"
    layer: Callable[[int, int], nn.Module] | None = None
    module: Callable[[int, int], nn.Module] | None = None

    def __post_init__(self) -> None:
        where = "ModelConfig"
        check(
            self.layer is not None or self.module is not None or self.name in MODELS,
            "name",
            where,
            f"one of {sorted(MODELS)} (or a layer)",
            self.name,
        )
        check(self.hidden >= 1, "hidden", where, "hidden >= 1", self.hidden)
        check(self.num_layers >= 1, "num_layers", where, ">= 1", self.num_layers)
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            check(0 <= value < 1, name, where, "0 <= p < 1", value)
        check(
            self.activation in ACTIVATIONS,
            "activation",
            where,
            f"one of {sorted(ACTIVATIONS)}",
            self.activation,
        )
        check(self.heads >= 1, "heads", where, "heads >= 1", self.heads)
        check(self.output_heads >= 1, "output_heads", where, ">= 1", self.output_heads)

    def build_module(self, in_channels: int, out_channels: int) -> nn.Module:
        """Build the model, a user's ``module`` included (torch's current RNG)."""
        if self.module is not None:
            return self.module(in_channels, out_channels)
        return self.build(in_channels, out_channels)

    def build(self, in_channels: int, out_channels: int) -> BasicGNN:
        """Build a layer stack (parameters drawn from torch's current RNG).

        Raises:
            OperatorError: for a user's ``module`` (use :meth:`build_module`).
        """
        if self.module is not None:
            raise OperatorError.build(
                "module",
                "ModelConfig.build",
                "a layer stack (name or layer)",
                f"a user's module {_import_path(self.module)}",
                "this step trains layer stacks only; train a user's module with "
                "FullGraphTrainer or SampledTrainer",
            )
        if self.layer is not None:
            return LayerStack(
                in_channels,
                self.hidden,
                out_channels,
                self.num_layers,
                layer=self.layer,
                dropout=self.dropout,
                act=ACTIVATIONS[self.activation],
            )
        extra: dict[str, Any] = {}
        if self.name == "gat":
            extra = {
                "heads": self.heads,
                "output_heads": self.output_heads,
                "attention_dropout": self.attention_dropout,
            }
        elif self.name == "sage":
            extra = {"aggr": self.aggr}
        return MODELS[self.name](
            in_channels,
            self.hidden,
            out_channels,
            self.num_layers,
            dropout=self.dropout,
            act=ACTIVATIONS[self.activation],
            **extra,
        )


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """One training run: model, task, optimiser, epochs, early stopping, checkpoints.

    Attributes:
        model: the model to train.
        lr: the (initial) learning rate.
        weight_decay: weight decay (L2 for Adam and SGD, decoupled for AdamW).
        decay_scope: which parameters ``weight_decay`` applies to.
        epochs: the most epochs to run (a resumed run counts the epochs already
            done).
        patience: stop after this many epochs without improvement of ``monitor``
            (0: never stop early).
        monitor: the validation metric for early stopping and the best epoch.
        restore_best: measure the final result with the best epoch's weights.
        seed: seeds parameters, dropout and (sampled) shuffles and samples.
        device: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available).
        threads: torch's intra-op threads while the run lasts (0: leave torch's
            setting). The job decides; on a shared CPU, 1 is often fastest.
        checkpoint_dir: where to write checkpoints (None: no checkpoints).
        checkpoint_every: write one every this many epochs (and at the end).
        resume: continue from the checkpoint in ``checkpoint_dir`` if there is one.
        task: what to learn: node classification (default), node regression or
            link prediction (:mod:`strata.operators.trainers.tasks`).
        optimizer: Adam (default), AdamW or SGD, with their settings.
        schedule: the learning-rate schedule (constant, step decay, cosine).
        clip_grad_norm: clip the gradients' total 2-norm to this (None: no
            clipping).
        plan: ``fixed`` trains as the job builds it; ``auto`` lets the planner
            (``strata plan``) choose single-process, partition-parallel, HongTu
            or sampled training from its cost model, and logs the choice.
    """

    model: ModelConfig = ModelConfig()
    lr: float = 0.01
    weight_decay: float = 5e-4
    decay_scope: DecayScope = DecayScope.ALL
    epochs: int = 200
    patience: int = 0
    monitor: Monitor = Monitor.VAL_LOSS
    restore_best: bool = True
    seed: int = 0
    device: str = "auto"
    threads: int = 0
    checkpoint_dir: str | None = None
    checkpoint_every: int = 10
    resume: bool = False
    task: Task = field(default_factory=NodeClassification)
    optimizer: Optimizer = field(default_factory=Adam)
    schedule: Schedule = field(default_factory=Constant)
    clip_grad_norm: float | None = None
    plan: Literal["fixed", "auto"] = "fixed"

    def __post_init__(self) -> None:
        where = "TrainConfig"
        check(
            self.plan in ("fixed", "auto"),
            "plan",
            where,
            "'fixed' or 'auto'",
            self.plan,
        )
        if self.clip_grad_norm is not None:
            check(
                self.clip_grad_norm > 0,
                "clip_grad_norm",
                where,
                "clip_grad_norm > 0 (or None)",
                self.clip_grad_norm,
            )
        object.__setattr__(
            self, "monitor", as_enum(Monitor, self.monitor, "monitor", where)
        )
        object.__setattr__(
            self,
            "decay_scope",
            as_enum(DecayScope, self.decay_scope, "decay_scope", where),
        )
        check(self.lr >= 0, "lr", where, "lr >= 0", self.lr)
        check(self.weight_decay >= 0, "weight_decay", where, ">= 0", self.weight_decay)
        check(self.epochs >= 0, "epochs", where, "epochs >= 0", self.epochs)
        check(self.patience >= 0, "patience", where, "patience >= 0", self.patience)
        check(self.seed >= 0, "seed", where, "seed >= 0", self.seed)
        check(self.threads >= 0, "threads", where, "threads >= 0", self.threads)
        check(
            self.checkpoint_every >= 1,
            "checkpoint_every",
            where,
            "checkpoint_every >= 1",
            self.checkpoint_every,
        )
        if self.resume and self.checkpoint_dir is None:
            raise OperatorError.build(
                "resume",
                where,
                "a checkpoint_dir to resume from",
                "resume=True and checkpoint_dir=None",
                "set checkpoint_dir to the directory of the earlier run",
            )
        resolve_device(self.device)

    def trajectory(self) -> dict[str, Any]:
        """The settings that fix a run's trajectory (checkpoints must agree).

        Everything except ``epochs``, ``patience``, ``restore_best``, ``device``,
        ``threads``, ``plan`` and the checkpoint settings, which a resumed run may
        change.
        """
        data = asdict(self)
        for name in ("epochs", "patience", "restore_best", "device", "threads"):
            data.pop(name)
        data.pop("plan")  # how it runs, not what it computes
        for name in ("checkpoint_dir", "checkpoint_every", "resume"):
            data.pop(name)
        data["monitor"] = self.monitor.value
        data["decay_scope"] = self.decay_scope.value
        for name in ("layer", "module"):  # a user's code, by its import path
            value = getattr(self.model, name)
            if value is not None:
                data["model"][name] = _import_path(value)
        if self.task.loss is not None:
            data["task"]["loss"] = _import_path(self.task.loss)
        data["task"]["kind"] = type(self.task).__name__
        data["optimizer"]["kind"] = type(self.optimizer).__name__
        data["schedule"]["kind"] = type(self.schedule).__name__
        return data


def _import_path(value: Any) -> str:
    """``module:qualname`` of a function or class (of an instance, its class)."""
    name = getattr(value, "__qualname__", type(value).__qualname__)
    return f"{value.__module__}:{name}"


def resolve_device(name: str) -> torch.device:
    """Turn ``auto`` / ``cpu`` / ``cuda[:N]`` into a device.

    Raises:
        OperatorError: on an unknown name, or CUDA asked for where there is none.
    """
    where = "TrainConfig"
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise OperatorError.build(
            "device", where, "'auto', 'cpu' or 'cuda[:N]'", repr(name)
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise OperatorError.build(
            "device",
            where,
            "a CUDA device",
            f"{name!r} on a machine without CUDA",
            "use device='auto' to fall back to the CPU",
        )
    if device.type not in ("cpu", "cuda"):
        raise OperatorError.build("device", where, "'cpu' or 'cuda'", repr(name))
    return device


def build_model(config: TrainConfig, num_features: int, num_classes: int) -> BasicGNN:
    """The model as every trainer builds it: seeded by ``config.seed``.

    Every rank of a gang (and the step that evaluates its weights) builds the
    same initial parameters; the caller's random state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return config.model.build(num_features, num_classes)
