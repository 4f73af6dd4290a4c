"""The recommender's training step: :class:`RecTrainStep`, one run on 1 or N workers.

A ``RecTrainStep`` is a batch step (a callable): given the job's typed graph,
features and split (their wire form, :mod:`strata.operators.recsys.job_payloads`)
it trains one variant with the loop of :mod:`strata.operators.recsys.train`
(:func:`train_variant`) and returns the run's wire form: the best weights, the
validation history, GradNorm's weights over training and the phase times
(:func:`trained_from_payload` rebuilds the model from it). :class:`LightGCNStep`
is the same shell around LightGCN, the collaborative-filtering reference R.

**One worker** trains in the step's own process (no process started). Training
runs one at a time per process (a lock): torch's thread pool and its global
random state are process-wide, and the local executor runs independent steps in
threads.

**N workers** train data-parallel on a gang (:mod:`strata.engine.gang`, gloo on
CPU, NCCL on CUDA): every rank builds the same model from the same seed and
trains on its share of every global batch (rank ``r`` takes pairs
``r::world_size``; negatives, neighbourhoods and GFAE masks are keyed by the
global batch and the node, so they do not depend on the gang's size). The model
is wrapped in ``DistributedDataParallel`` (gradients averaged in its backward),
and GradNorm reduces through :class:`GangCollective`: each task's gradient of the
shared layer ``W`` is averaged over the ranks *before* its norm, and so are the
task losses, so ``w`` is updated identically on every rank (``e2egrec.md`` §4.4).
GradNorm's ``autograd.grad`` calls run no ``AccumulateGrad`` node, so they neither
trigger nor double-count DDP's reduction. Rank 0's result is the step's result.

**Checkpoints** (:class:`RecCheckpoint`): with a ``checkpoint_dir`` the loop's
complete state (model, optimiser, GradNorm ``w`` and ``L_base``, epoch, early
stopping, logs; B1 also its stage and its frozen ``z`` table) is written
atomically to ``<dir>/<name>.pt`` (:mod:`strata.operators.trainers.checkpoint`) by
rank 0 every ``every`` epochs and after the last; with ``resume`` a run continues
from it on the same trajectory (the loop draws every random choice from its
coordinates, so it carries no generator state). A checkpoint of other settings
(variant, seed, widths, batch size, learning rate, gang size) is refused.
LightGCN (:func:`train_reference`, :class:`LightGCNStep`) checkpoints and resumes
through the same code: its loop (:class:`LightGCNTrainer`) keeps the same state
protocol, and its settings are its trajectory's.

Examples:
    >>> import torch
    >>> IdentityCollective().allreduce_mean(torch.ones(2)).tolist()
    [1.0, 1.0]
    >>> ckpt = RecCheckpoint(None, "train-E2E")
    >>> ckpt.enabled, ckpt.load()
    (False, None)
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from strata.operators.errors import OperatorError, check
from strata.operators.recsys.features import RecFeatures
from strata.operators.recsys.gradnorm import Collective, IdentityCollective
from strata.operators.recsys.job_payloads import (
    Payload,
    features_from_payload,
    graph_from_payload,
    split_from_payload,
)
from strata.operators.recsys.lightgcn import (
    LightGCNConfig,
    LightGCNResult,
    LightGCNTrainer,
)
from strata.operators.recsys.model import RecModel
from strata.operators.recsys.split import Split
from strata.operators.recsys.train import (
    PhaseTimes,
    RecConfig,
    RecTrainer,
    TrainedRec,
    frozen_z_table,
)
from strata.operators.recsys.variants import STAGE_ONE, GraphSignal, VariantSpec
from strata.operators.trainers.checkpoint import (
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)
from strata.storage.hetero import TypedGraph

if TYPE_CHECKING:
    from strata.engine.gang import GangContext

__all__ = [
    "GangCollective",
    "IdentityCollective",
    "LightGCNStep",
    "RecCheckpoint",
    "RecTrainStep",
    "train_reference",
    "train_variant",
    "trained_from_payload",
    "trained_payload",
]

# One in-process training at a time (see the module docs).
_ONE_AT_A_TIME = threading.Lock()


class GangCollective:
    """The loop's collective on a gang: an element-wise mean over the ranks.

    Args:
        ctx: this rank's gang context.
    """

    def __init__(self, ctx: GangContext) -> None:
        self._ctx = ctx

    def allreduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """The mean of ``tensor`` over the ranks (a new tensor on its device)."""
        reduced = tensor.detach().to(self._ctx.device, copy=True).contiguous()
        self._ctx.all_reduce(reduced, op="mean")
        return reduced.to(tensor.device)


def _check_checkpointing(
    where: str, every: int, resume: bool, directory: str | None
) -> None:
    """Check the checkpoint settings both training steps take.

    The interval must be >= 1, and ``resume`` needs a directory to continue from.
    """
    check(every >= 1, "checkpoint_every", where, ">= 1", every)
    check(
        not resume or directory is not None,
        "resume",
        where,
        "a checkpoint_dir to resume from",
        "resume=True and checkpoint_dir=None",
    )


@dataclass(frozen=True, slots=True)
class RecCheckpoint:
    """Where one training run checkpoints, and whether it resumes.

    Attributes:
        directory: the checkpoint directory (None: no checkpoints).
        name: the run's name (its step id): the file is ``<directory>/<name>.pt``.
        resume: continue from the file if it exists.
        every: write one after every this many epochs (and after the last).
        rank: the worker's rank; only rank 0 writes.
    """

    directory: str | Path | None
    name: str
    resume: bool = False
    every: int = 1
    rank: int = 0

    @property
    def enabled(self) -> bool:
        """Whether the run checkpoints at all."""
        return self.directory is not None

    @property
    def path(self) -> Path | None:
        """The checkpoint file (None without a directory)."""
        if self.directory is None:
            return None
        return checkpoint_path(self.directory, self.name)

    def load(self) -> dict[str, Any] | None:
        """The saved state to resume from, or None (no resume, or no file yet)."""
        path = self.path
        if path is None or not self.resume or not path.exists():
            return None
        return load_checkpoint(path)

    def due(self, epochs_done: int, last: bool) -> bool:
        """Whether to write after ``epochs_done`` epochs (always after the last)."""
        return self.enabled and (last or epochs_done % self.every == 0)

    def save(self, state: Mapping[str, Any]) -> None:
        """Write ``state`` atomically (rank 0 only; other ranks return)."""
        path = self.path
        if path is not None and self.rank == 0:
            save_checkpoint(path, dict(state))


def trajectory(cfg: RecConfig, world_size: int) -> dict[str, Any]:
    """The settings a resumed run must share with the run that checkpointed."""
    return {
        "variant": cfg.spec.variant.value,
        "seed": cfg.seed,
        "dims": dataclasses.asdict(cfg.dims),
        "fanouts": list(cfg.fanouts),
        "lr": cfg.lr,
        "batch_size": cfg.batch_size,
        "mask_rate": cfg.mask_rate,
        "gfae_plain": cfg.gfae_plain,
        "gradnorm": dataclasses.asdict(cfg.gradnorm),
        "world_size": world_size,
    }


#: Called at every epoch's end with (stage, epochs done); raising stops the run.
EpochHook = Callable[[int, int], None]


def train_variant(
    cfg: RecConfig,
    graph: TypedGraph,
    features: RecFeatures,
    split: Split,
    *,
    checkpoint: RecCheckpoint | None = None,
    collective: Collective | None = None,
    rank: int = 0,
    world_size: int = 1,
    wrap: Callable[[nn.Module], nn.Module] | None = None,
    on_epoch: EpochHook | None = None,
) -> TrainedRec:
    """Train ``cfg.variant`` to early stopping, checkpointing and resuming.

    B1 trains its stage 1 (the encoder alone), infers the frozen ``z`` table
    into the FeatureStore (:func:`~strata.operators.recsys.train.frozen_z_table`),
    then trains stage 2 on it; its checkpoint names the stage (and holds the
    table). Without ``checkpoint`` nothing is saved or resumed.

    Args:
        cfg: the run.
        graph: the typed train graph.
        features: node features.
        split: the temporal split.
        checkpoint: where to checkpoint and whether to resume (None: neither).
        collective: GradNorm's all-reduce under a gang.
        rank: this worker's rank.
        world_size: the gang's size.
        wrap: wraps the model for its forward (DDP under a gang).
        on_epoch: called after every epoch (and its checkpoint).

    Returns:
        The trained model (best validation weights) and its logs.

    Raises:
        OperatorError: when resuming from a checkpoint of other settings.
    """
    ckpt = checkpoint or RecCheckpoint(None, "train")
    settings = trajectory(cfg, world_size)
    saved = _resume_from(ckpt, settings, f"train_variant({ckpt.name})")
    frozen = cfg.spec.graph is GraphSignal.FROZEN
    extra: dict[str, float] = {}
    z_table: dict[str, torch.Tensor] | None = None

    def make(
        spec: VariantSpec | None = None, z: dict[str, torch.Tensor] | None = None
    ) -> RecTrainer:
        return RecTrainer(
            cfg,
            graph,
            features,
            split,
            spec=spec,
            z_table=z,
            collective=collective,
            rank=rank,
            world_size=world_size,
            wrap=wrap,
        )

    if frozen:
        stage_saved = saved if saved is not None and saved["stage"] == 1 else None
        if saved is None or stage_saved is not None:
            start = time.perf_counter()
            stage_one = make(STAGE_ONE)
            _run(stage_one, 1, ckpt, settings, stage_saved, on_epoch, {})
            mid = time.perf_counter()
            z_table = frozen_z_table(stage_one.model, graph, features)
            extra = {
                "stage_one_seconds": mid - start,
                "inference_seconds": time.perf_counter() - mid,
            }
            saved = None
        else:
            z_table = saved["z_table"]
            extra = {
                k: float(saved[k]) for k in ("stage_one_seconds", "inference_seconds")
            }
        assert z_table is not None
    trainer = make(z=z_table)
    stage = 2 if frozen else 0
    kept: dict[str, Any] = dict(extra)
    if z_table is not None:
        kept["z_table"] = z_table
    _run(trainer, stage, ckpt, settings, saved, on_epoch, kept)
    return TrainedRec.of(trainer, **extra)


def _resume_from(
    ckpt: RecCheckpoint, settings: dict[str, Any], where: str
) -> dict[str, Any] | None:
    """The checkpoint to resume from (None: start afresh).

    Raises:
        OperatorError: when it was written with other ``settings``.
    """
    saved = ckpt.load()
    if saved is not None and saved.get("settings") != settings:
        diff = sorted(
            k for k in settings if saved.get("settings", {}).get(k) != settings[k]
        )
        raise OperatorError.build(
            "resume",
            where,
            "a checkpoint of the same settings",
            f"{ckpt.path} with other {', '.join(diff) or 'settings'}",
            "resume with the earlier run's settings, or use a new checkpoint_dir",
        )
    return saved


def reference_trajectory(config: LightGCNConfig) -> dict[str, Any]:
    """LightGCN's settings a resumed run must share.

    All but the epoch limit and the patience, which a resume may change (as for
    :func:`trajectory`).
    """
    fixed = dataclasses.asdict(config)
    del fixed["epochs"], fixed["patience"]
    return {"variant": "R", **fixed}


def train_reference(
    config: LightGCNConfig,
    split: Split,
    *,
    checkpoint: RecCheckpoint | None = None,
    on_epoch: EpochHook | None = None,
) -> LightGCNResult:
    """Train LightGCN (the reference R) to early stopping, checkpointing and resuming.

    Args:
        config: LightGCN's settings.
        split: the temporal split.
        checkpoint: where to checkpoint and whether to resume (None: neither).
        on_epoch: called after every epoch (and its checkpoint), stage 0.

    Returns:
        The best validation epoch's embeddings and the validation history.

    Raises:
        OperatorError: when resuming from a checkpoint of other settings.
    """
    ckpt = checkpoint or RecCheckpoint(None, "train-R")
    settings = reference_trajectory(config)
    saved = _resume_from(ckpt, settings, f"train_reference({ckpt.name})")
    trainer = LightGCNTrainer(split, config)
    _run(trainer, 0, ckpt, settings, saved, on_epoch, {})
    return trainer.result()


class _Loop(Protocol):
    """What :func:`_run` drives: :class:`RecTrainer` and :class:`LightGCNTrainer`."""

    @property
    def epoch(self) -> int: ...

    @property
    def batch(self) -> int: ...

    @property
    def stopped(self) -> bool: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    # Any: each loop calls back with itself.
    def run(self, on_step: Callable[[Any], None] | None = None) -> None: ...


def _run(
    trainer: _Loop,
    stage: int,
    ckpt: RecCheckpoint,
    settings: dict[str, Any],
    saved: dict[str, Any] | None,
    on_epoch: EpochHook | None,
    kept: dict[str, Any],
) -> None:
    """Run ``trainer`` (from ``saved`` when given), checkpointing at epoch ends."""
    if saved is not None:
        trainer.load_state_dict(saved["loop"])

    def after(loop: _Loop) -> None:
        if loop.batch != 0:  # mid-epoch: a step, not an epoch's end
            return
        if ckpt.due(loop.epoch, loop.stopped):
            state = {"settings": settings, "stage": stage, "loop": loop.state_dict()}
            ckpt.save({**state, **kept})
        if on_epoch is not None:
            on_epoch(stage, loop.epoch)

    trainer.run(after)


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """Torch's intra-op threads set to ``threads`` (0: as they are) for a while."""
    before = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def trained_payload(trained: TrainedRec, *, seconds: float, workers: int) -> Payload:
    """The wire form of a trained variant (rank 0's result)."""
    state = {k: v.detach().cpu().clone() for k, v in trained.model.state_dict().items()}
    return {
        "variant": trained.cfg.spec.variant.value,
        "seed": trained.cfg.seed,
        "state": state,
        "val_history": [float(v) for v in trained.val_history],
        "best_epoch": int(trained.best_epoch),
        "epochs_run": len(trained.val_history),
        "tasks": list(trained.tasks),
        "weight_log": [[float(v) for v in row] for row in trained.weight_log],
        "timing": {
            **trained.times.as_dict(),
            "train_s": seconds,
            "stage_one_s": trained.stage_one_seconds,
            "inference_s": trained.inference_seconds,
        },
        "workers": workers,
    }


def trained_from_payload(
    cfg: RecConfig, payload: Payload, graph: TypedGraph, features: RecFeatures
) -> TrainedRec:
    """Rebuild the trained variant of :func:`trained_payload` (``cfg``: its run).

    Raises:
        OperatorError: when ``cfg`` is not the payload's variant and seed.
    """
    where = "trained_from_payload"
    spec = cfg.spec
    check(
        spec.variant.value == payload["variant"] and cfg.seed == payload["seed"],
        "cfg",
        where,
        f"variant {payload['variant']}, seed {payload['seed']} (the payload's)",
        f"variant {spec.variant.value}, seed {cfg.seed}",
    )
    state: dict[str, torch.Tensor] = payload["state"]
    z_table = None
    if spec.graph is GraphSignal.FROZEN:
        z_table = {"user": state["z_user"], "item": state["z_item"]}
    model = RecModel(
        spec,
        dict(graph.num_nodes),
        features.dims,
        graph.relations,
        cfg.dims,
        z_table=z_table,
        gfae_plain=cfg.gfae_plain,
        towers=spec.towers,
    )
    model.load_state_dict(state)
    timing = payload["timing"]
    times = PhaseTimes(
        **{
            f.name: float(timing.get(f.name, 0.0))
            for f in dataclasses.fields(PhaseTimes)
            if f.name != "samples"
        },
        samples=int(timing.get("samples", 0)),
    )
    return TrainedRec(
        cfg,
        model,
        list(payload["val_history"]),
        int(payload["best_epoch"]),
        times,
        [list(row) for row in payload["weight_log"]],
        tuple(payload["tasks"]),
        float(timing["stage_one_s"]),
        float(timing["inference_s"]),
    )


@dataclass(frozen=True, slots=True)
class RecTrainStep:
    """Batch step: train one variant on 1 or ``workers`` workers (module docs).

    Attributes:
        config: the run (variant, widths, fan-outs, optimiser, seed).
        name: the step's id: names the gang and the checkpoint file.
        workers: data-parallel workers (1: in this process).
        device: the gang's device (``cpu``, ``cuda``, ``auto``).
        threads: torch threads per in-process run (0: leave torch's setting).
        checkpoint_dir: where to checkpoint (None: no checkpoints).
        checkpoint_every: epochs between checkpoints (and after the last).
        resume: continue from the checkpoint in ``checkpoint_dir``.
        timeout_s: the gang's wall-clock limit (None: none).
    """

    config: RecConfig
    name: str = "train"
    workers: int = 1
    device: str = "cpu"
    threads: int = 1
    checkpoint_dir: str | None = None
    checkpoint_every: int = 1
    resume: bool = False
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        where = f"RecTrainStep({self.name})"
        check(self.workers >= 1, "workers", where, ">= 1", self.workers)
        check(self.threads >= 0, "threads", where, ">= 0", self.threads)
        _check_checkpointing(
            where, self.checkpoint_every, self.resume, self.checkpoint_dir
        )

    def checkpoint(self, rank: int = 0) -> RecCheckpoint:
        """This run's checkpoint for ``rank``."""
        return RecCheckpoint(
            self.checkpoint_dir, self.name, self.resume, self.checkpoint_every, rank
        )

    def __call__(self, graph: Payload, features: Payload, split: Payload) -> Payload:
        """Train on the job's data (wire form); return :func:`trained_payload`."""
        if self.workers == 1:
            with _ONE_AT_A_TIME, _torch_threads(self.threads):
                return self.train(graph, features, split)
        from strata.engine.gang import GangSpec, run_gang_report

        spec = GangSpec(
            workers=self.workers,
            device=self.device,  # type: ignore[arg-type]
            timeout_s=self.timeout_s,
            seed=self.config.seed,
            name=self.name,
        )
        report = run_gang_report(_gang_rank, spec, self, graph, features, split)
        result: Payload = report.results[0]
        return result

    def train(
        self,
        graph: Payload,
        features: Payload,
        split: Payload,
        ctx: GangContext | None = None,
    ) -> Payload:
        """One rank's run (``ctx`` None: the only one, in this process)."""
        start = time.perf_counter()
        typed = graph_from_payload(graph)
        feats = features_from_payload(features)
        parts = split_from_payload(split)
        rank, world = (0, 1) if ctx is None else (ctx.rank, ctx.world_size)
        wrap = None
        collective: Collective | None = None
        if ctx is not None and world > 1:
            collective = GangCollective(ctx)
            wrap = _ddp(ctx)
        trained = train_variant(
            self.config,
            typed,
            feats,
            parts,
            checkpoint=self.checkpoint(rank),
            collective=collective,
            rank=rank,
            world_size=world,
            wrap=wrap,
        )
        return trained_payload(
            trained, seconds=time.perf_counter() - start, workers=world
        )


def _ddp(ctx: GangContext) -> Callable[[nn.Module], nn.Module]:
    """Wraps a model in DDP on ``ctx``'s device (gradients averaged)."""

    def wrap(model: nn.Module) -> nn.Module:
        from torch.nn.parallel import DistributedDataParallel

        ids = [ctx.device] if ctx.device.type == "cuda" else None
        return DistributedDataParallel(
            model.to(ctx.device),
            device_ids=ids,
            find_unused_parameters=True,  # the GFAE mask token of unmasked batches
        )

    return wrap


def _gang_rank(
    ctx: GangContext,
    step: RecTrainStep,
    graph: Payload,
    features: Payload,
    split: Payload,
) -> Payload | None:
    """One rank of a gang run: train; rank 0 returns the result."""
    result = step.train(graph, features, split, ctx)
    return result if ctx.is_main else None


@dataclass(frozen=True, slots=True)
class LightGCNStep:
    """Batch step: LightGCN (the reference R) on the split's train interactions.

    Attributes:
        config: LightGCN's settings.
        threads: torch threads for the run (0: leave torch's setting).
        name: the step's id: names the checkpoint file.
        checkpoint_dir: where to checkpoint (None: no checkpoints).
        checkpoint_every: epochs between checkpoints (and after the last).
        resume: continue from the checkpoint in ``checkpoint_dir``.
    """

    config: LightGCNConfig
    threads: int = 1
    name: str = "train-R"
    checkpoint_dir: str | None = None
    checkpoint_every: int = 1
    resume: bool = False

    def __post_init__(self) -> None:
        where = f"LightGCNStep({self.name})"
        check(self.threads >= 0, "threads", where, ">= 0", self.threads)
        _check_checkpointing(
            where, self.checkpoint_every, self.resume, self.checkpoint_dir
        )

    def checkpoint(self) -> RecCheckpoint:
        """This run's checkpoint."""
        return RecCheckpoint(
            self.checkpoint_dir, self.name, self.resume, self.checkpoint_every
        )

    def __call__(self, graph: Payload, features: Payload, split: Payload) -> Payload:
        """Train (the graph and features are unused: LightGCN reads the split)."""
        with _ONE_AT_A_TIME, _torch_threads(self.threads):
            start = time.perf_counter()
            result = train_reference(
                self.config, split_from_payload(split), checkpoint=self.checkpoint()
            )
            seconds = time.perf_counter() - start
        return {
            "variant": "R",
            "seed": self.config.seed,
            "user": result.user.detach().clone(),
            "item": result.item.detach().clone(),
            "val_history": [float(v) for v in result.val_ndcg],
            "best_epoch": int(result.best_epoch),
            "epochs_run": len(result.val_ndcg),
            "timing": {"train_s": seconds},
            "workers": 1,
        }
