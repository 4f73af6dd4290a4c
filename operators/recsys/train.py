"""The single-process training loop of ``e2egrec.md`` §4.5, written to be wrapped.

A :class:`RecTrainer` trains one variant: batches of ``batch_size`` train positives
``(u, i+)`` with one uniform negative each; the seeds are the batch's distinct users
and items; the typed sampler builds the blocks **once per batch** (fan-outs
``(15, 10)``, seeds' hop first), and every loss reads them (only the GFAE pass
changes inputs). Adam at 1e-3; after each epoch, validation NDCG@20 from
full-neighbourhood inference decides early stopping (patience 3) and the best
weights are kept.

Determinism and resumption: every random choice is a pure function of the run's
seed and its coordinates -- the epoch's positive order of ``(seed, epoch)``, a
batch's negatives of ``(seed, epoch, batch)``, the sampler's draws of ``(seed,
epoch, batch, node)``, the GFAE mask of ``(seed, epoch, batch, node)`` -- so the loop
carries no generator state. :meth:`RecTrainer.state_dict` holds everything else
(model, optimiser, GradNorm ``w`` and ``L_base``, epoch and batch, early stopping,
logs) as tensors, numbers and lists for
:func:`strata.operators.trainers.checkpoint.save_checkpoint`; a trainer restored
from it mid-epoch continues on the same trajectory.

Data parallelism (for a gang step; see helper RC's ``operators/recsys/step.py``):
with ``rank``/``world_size``, every global batch is split by position across the
workers (rank ``r`` takes pairs ``r::world_size``); negatives, sampler draws and
masks are keyed by the **global** batch and the node, so workers see the same
neighbourhoods as one worker would. ``wrap`` wraps the model (e.g. in
``DistributedDataParallel``), and ``collective`` all-reduces GradNorm's per-task
gradients and losses.

Entry points: :func:`~strata.operators.recsys.step.train_variant` (which runs
this loop, both stages for B1, with optional checkpoints) and
:func:`evaluate_topk`; for a gang step or resumption, :class:`RecTrainer`
(``train_step``, ``end_epoch``, ``run``, ``state_dict``/``load_state_dict``).

Threads: the tensors are small (a 1,024-pair batch, 64-wide layers), so torch's
intra-op threads buy little; on the shared, oversubscribed 2-core box one thread
(``torch.set_num_threads(1)``) ran a smoke step ~30x faster than two (spinning
OpenMP workers), so harnesses should pin it.

Examples:
    >>> from strata.operators.recsys.synth import SynthConfig, synth_interactions
    >>> from strata.operators.recsys.split import temporal_split
    >>> from strata.operators.recsys.graph import build_typed_graph
    >>> from strata.operators.recsys.features import build_features
    >>> from strata.operators.recsys.step import train_variant
    >>> split = temporal_split(synth_interactions(SynthConfig(400, 200), seed=0))
    >>> graph, feats = build_typed_graph(split), build_features(split)
    >>> cfg = RecConfig(variant="E2E", epochs=1, batch_size=512)
    >>> trained = train_variant(cfg, graph, feats, split)
    >>> m = evaluate_topk(trained, graph, feats, split, ks=(20,))
    >>> 0.0 <= m.recall[20] <= 1.0
    True
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from strata.operators.errors import check
from strata.operators.recsys.features import RecFeatures
from strata.operators.recsys.gradnorm import Collective, GradNorm, GradNormConfig
from strata.operators.recsys.metrics import auc, topk_metrics
from strata.operators.recsys.model import ModelDims, RecBatch, RecModel
from strata.operators.recsys.split import Split, ranking_task, train_pairs
from strata.operators.recsys.variants import (
    GraphSignal,
    Variant,
    VariantSpec,
    variant_spec,
)
from strata.operators.samplers.typed import TypedNeighborSampler
from strata.storage._types import Int64Array
from strata.storage.hetero import TypedGraph
from strata.storage.hetero.features import gather_typed, typed_feature_store

__all__ = [
    "PhaseTimes",
    "RecConfig",
    "RecMetrics",
    "RecTrainer",
    "TrainedRec",
    "evaluate_topk",
    "frozen_z_table",
]


@dataclass(frozen=True, slots=True)
class RecConfig:
    """One training run (§4.5).

    Attributes:
        variant: B0, B1, A1, A2, E2E, F1 or F2.
        dims: model widths.
        fanouts: neighbours per relation per hop, the seeds' hop first (15, 10).
        lr: Adam learning rate (1e-3).
        epochs: at most this many epochs (20).
        patience: epochs without a better validation NDCG@20 before stopping (3).
        batch_size: positives per global batch (1,024).
        gradnorm: GradNorm settings (alpha 1.5, lr 0.025, floor 0.05).
        mask_rate: share of seed nodes masked in the GFAE pass (0.3).
        gfae_plain: the unmasked-reconstruction ablation (``gfae_mode="plain"``).
        seed: model seed (initialisation, batches, negatives, sampling, masks).
        log_every: steps between task-weight log entries.
    """

    variant: Variant | str = Variant.E2E
    dims: ModelDims = field(default_factory=ModelDims)
    fanouts: tuple[int, ...] = (15, 10)
    lr: float = 1e-3
    epochs: int = 20
    patience: int = 3
    batch_size: int = 1024
    gradnorm: GradNormConfig = field(default_factory=GradNormConfig)
    mask_rate: float = 0.3
    gfae_plain: bool = False
    seed: int = 0
    log_every: int = 10

    def __post_init__(self) -> None:
        where = "RecConfig"
        variant_spec(self.variant)  # names the variants on a typo
        check(self.epochs >= 1, "epochs", where, ">= 1", self.epochs)
        check(self.batch_size >= 1, "batch_size", where, ">= 1", self.batch_size)
        check(
            len(self.fanouts) == self.dims.layers,
            "fanouts",
            where,
            f"one fan-out per encoder layer ({self.dims.layers})",
            self.fanouts,
        )
        check(0 < self.mask_rate < 1, "mask_rate", where, "in (0, 1)", self.mask_rate)

    @property
    def spec(self) -> VariantSpec:
        """The variant's spec."""
        return variant_spec(self.variant)


@dataclass(slots=True)
class PhaseTimes:
    """Seconds spent per phase (§5 throughput), summed over the run.

    Attributes:
        sampling: batch building: negatives, typed sampling, feature gathering.
        encoder: the encoder's passes in the forward (both GFAE passes, the
            masked decoder included).
        towers: the rest of the forward (towers, fusion, heads, losses).
        gradnorm: GradNorm's per-task gradients and weight update.
        backward: the weighted loss's backward and the optimiser step.
        evaluation: validation (full inference and ranking).
        samples: training positives processed.
    """

    sampling: float = 0.0
    encoder: float = 0.0
    towers: float = 0.0
    gradnorm: float = 0.0
    backward: float = 0.0
    evaluation: float = 0.0
    samples: int = 0

    def as_dict(self) -> dict[str, float]:
        """The times as a plain dict (``forward`` = encoder + towers)."""
        return {
            "sampling": self.sampling,
            "encoder": self.encoder,
            "towers": self.towers,
            "forward": self.encoder + self.towers,
            "gradnorm": self.gradnorm,
            "backward": self.backward,
            "evaluation": self.evaluation,
            "samples": float(self.samples),
        }


def _mix(values: np.ndarray, salt: int) -> np.ndarray:
    """SplitMix64 of ``values ^ salt`` (uint64), for per-node keyed draws."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64) ^ np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _node_mask(
    ids: np.ndarray, rate: float, seed: int, epoch: int, batch: int, kind: int
) -> np.ndarray:
    """Whether each node is masked: a pure function of the coordinates and the id."""
    salt = int(
        _mix(np.array([seed, epoch, batch, kind], dtype=np.uint64), 0x5EED).sum(
            dtype=np.uint64
        )
    )
    draws = _mix(ids, salt) >> np.uint64(11)
    return draws.astype(np.float64) / float(1 << 53) < rate


class RecTrainer:
    """Trains one variant; step by step, with its complete state exposed.

    Args:
        cfg: the run.
        graph: the typed train graph.
        features: node features.
        split: the temporal split.
        spec: the variant spec to train (default ``cfg.spec``; B1's stage 1
            passes :data:`~strata.operators.recsys.variants.STAGE_ONE`).
        z_table: the frozen ``z`` for B1's stage 2.
        collective: GradNorm's all-reduce under a gang (identity alone).
        rank: this worker's rank.
        world_size: workers in the gang.
        wrap: wraps the model for the forward pass (e.g. DDP); identity default.
    """

    def __init__(
        self,
        cfg: RecConfig,
        graph: TypedGraph,
        features: RecFeatures,
        split: Split,
        *,
        spec: VariantSpec | None = None,
        z_table: dict[str, torch.Tensor] | None = None,
        collective: Collective | None = None,
        rank: int = 0,
        world_size: int = 1,
        wrap: Callable[[nn.Module], nn.Module] | None = None,
    ) -> None:
        self.cfg = cfg
        self.spec = spec or cfg.spec
        self.graph = graph
        self.features = features
        self.x = features.tensors()
        self.split = split
        self.rank = rank
        self.world_size = world_size
        inter = split.inter
        self.user, self.item = train_pairs(split)
        self.labels = None if inter.label is None else inter.label[split.train]
        torch.manual_seed(cfg.seed)
        self.model = RecModel(
            self.spec,
            dict(graph.num_nodes),
            features.dims,
            graph.relations,
            cfg.dims,
            z_table=z_table,
            gfae_plain=cfg.gfae_plain,
            towers=self.spec.towers,
        )
        self.forward_module = wrap(self.model) if wrap is not None else self.model
        self.optimiser = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.tasks = tuple(
            t for t in self.spec.tasks if t != "long_view" or self.labels is not None
        )
        gn_cfg = cfg.gradnorm
        if not self.spec.gradnorm:
            assert self.spec.fixed_weights is not None
            fixed = dict(zip(self.spec.tasks, self.spec.fixed_weights, strict=True))
            gn_cfg = GradNormConfig(
                gn_cfg.alpha,
                gn_cfg.lr,
                gn_cfg.floor,
                gn_cfg.warmup,
                tuple(fixed[t] for t in self.tasks),
            )
        self.gradnorm = GradNorm(self.tasks, gn_cfg, collective)
        # Sampler keyed by the global batch, rank 0 on every worker: each node's
        # neighbourhood is the same whatever the gang size.
        self.sampler = (
            TypedNeighborSampler(graph, list(reversed(cfg.fanouts)), seed=cfg.seed)
            if self.spec.graph is GraphSignal.JOINT
            else None
        )
        self.val = ranking_task(split, "val")
        self.times = PhaseTimes()
        # Loop state (all in state_dict).
        self.epoch = 0
        self.batch = 0
        self.step_count = 0
        self.best_ndcg = -1.0
        self.best_epoch = -1
        self.bad_epochs = 0
        self.stopped = False
        self.best_state: dict[str, torch.Tensor] = copy.deepcopy(
            self.model.state_dict()
        )
        self.val_history: list[float] = []
        self.weight_log: list[list[float]] = []  # [step, a, *weights]

    # ------------------------------------------------------------------ batches
    @property
    def num_batches(self) -> int:
        """Global batches per epoch."""
        return int(-(-self.user.shape[0] // self.cfg.batch_size))

    def _pairs(
        self, epoch: int, batch: int
    ) -> tuple[Int64Array, Int64Array, Int64Array, np.ndarray]:
        order = np.random.default_rng([self.cfg.seed, epoch]).permutation(
            self.user.shape[0]
        )
        rows = order[batch * self.cfg.batch_size : (batch + 1) * self.cfg.batch_size]
        draws = np.random.default_rng([self.cfg.seed, epoch, batch])
        neg = np.asarray(
            draws.integers(0, self.split.inter.num_items, size=rows.shape[0]), np.int64
        )
        mine = slice(self.rank, None, self.world_size)
        return self.user[rows][mine], self.item[rows][mine], neg[mine], rows[mine]

    def make_batch(self, epoch: int, batch: int) -> RecBatch:
        """The batch at ``(epoch, batch)`` for this worker (a pure function)."""
        u, pos, neg, rows = self._pairs(epoch, batch)
        users = np.unique(u)
        items = np.unique(np.concatenate([pos, neg]))
        labels = None
        if self.labels is not None and "long_view" in self.tasks:
            labels = torch.from_numpy(self.labels[rows])
        x_seed = {
            "user": self.x["user"][torch.from_numpy(users)],
            "item": self.x["item"][torch.from_numpy(items)],
        }
        blocks = x_input = mask = None
        if self.sampler is not None:
            blocks = self.sampler.sample({"user": users, "item": items}, epoch, batch)
            x_input = {
                t: self.x[t][torch.from_numpy(ids)]
                for t, ids in blocks[0].src_global_ids.items()
            }
            mask = {
                t: torch.from_numpy(
                    _node_mask(ids, self.cfg.mask_rate, self.cfg.seed, epoch, batch, k)
                )
                for k, (t, ids) in enumerate((("user", users), ("item", items)))
            }
        return RecBatch(
            users=torch.from_numpy(users),
            items=torch.from_numpy(items),
            user_pos=torch.from_numpy(np.searchsorted(users, u)),
            pos=torch.from_numpy(np.searchsorted(items, pos)),
            neg=torch.from_numpy(np.searchsorted(items, neg)),
            labels=labels,
            x_seed=x_seed,
            blocks=blocks,
            x_input=x_input,
            gfae_mask=mask,
        )

    # ------------------------------------------------------------------ steps
    def train_step(self) -> dict[str, float]:
        """Train on the next batch; returns the task losses."""
        t0 = time.perf_counter()
        batch = self.make_batch(self.epoch, self.batch)
        encoder_before = self.model.encoder_seconds
        t1 = time.perf_counter()
        losses = self.forward_module(batch)
        t2 = time.perf_counter()
        encoder = self.model.encoder_seconds - encoder_before
        ordered = [losses[t] for t in self.tasks]
        shared = self.model.encoder.shared if self.model.encoder is not None else None
        if shared is not None and self.gradnorm.adaptive:
            total = self.gradnorm.balance(ordered, shared)
        else:
            total = self.gradnorm.weighted(ordered)
        t3 = time.perf_counter()
        self.optimiser.zero_grad()
        total.backward()  # type: ignore[no-untyped-call]
        self.optimiser.step()
        t4 = time.perf_counter()
        self.times.sampling += t1 - t0
        self.times.encoder += encoder
        self.times.towers += t2 - t1 - encoder
        self.times.gradnorm += t3 - t2
        self.times.backward += t4 - t3
        self.times.samples += int(batch.user_pos.shape[0])
        if self.step_count % self.cfg.log_every == 0:
            a = float(self.model.a.detach()) if self.model.a is not None else 0.0
            self.weight_log.append(
                [float(self.step_count), a, *self.gradnorm.weights.tolist()]
            )
        self.step_count += 1
        self.batch += 1
        return {t: float(v.detach()) for t, v in losses.items()}

    def end_epoch(self) -> float:
        """Validate, update early stopping and move to the next epoch."""
        t0 = time.perf_counter()
        self.model.eval()
        users, items = self.model.score_vectors(self.graph, self.x)
        self.model.train()
        m = topk_metrics(
            users, items, self.val.users, self.val.seen, self.val.relevant, (20,)
        )
        ndcg = m.ndcg[20]
        self.val_history.append(ndcg)
        if ndcg > self.best_ndcg:
            self.best_ndcg, self.best_epoch, self.bad_epochs = ndcg, self.epoch, 0
            self.best_state = copy.deepcopy(self.model.state_dict())
        else:
            self.bad_epochs += 1
        self.epoch += 1
        self.batch = 0
        if self.bad_epochs >= self.cfg.patience or self.epoch >= self.cfg.epochs:
            self.stopped = True
        self.times.evaluation += time.perf_counter() - t0
        return ndcg

    def run(self, on_step: Callable[[RecTrainer], None] | None = None) -> None:
        """Train until early stopping or the epoch limit (resumes where it is).

        Args:
            on_step: called after every step and epoch end (e.g. to checkpoint).
        """
        while not self.stopped:
            while self.batch < self.num_batches:
                self.train_step()
                if on_step is not None:
                    on_step(self)
            self.end_epoch()
            if on_step is not None:
                on_step(self)
        self.model.load_state_dict(self.best_state)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The loop's complete state: tensors, numbers and lists."""
        return {
            "model": copy.deepcopy(self.model.state_dict()),
            "optimiser": copy.deepcopy(self.optimiser.state_dict()),
            "gradnorm": self.gradnorm.state_dict(),
            "epoch": self.epoch,
            "batch": self.batch,
            "step_count": self.step_count,
            "best_ndcg": self.best_ndcg,
            "best_epoch": self.best_epoch,
            "bad_epochs": self.bad_epochs,
            "stopped": self.stopped,
            "best_state": copy.deepcopy(self.best_state),
            "val_history": list(self.val_history),
            "weight_log": [list(r) for r in self.weight_log],
            "times": self.times.as_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (continues on the same trajectory)."""
        self.model.load_state_dict(state["model"])
        self.optimiser.load_state_dict(state["optimiser"])
        self.gradnorm.load_state_dict(state["gradnorm"])
        self.epoch = int(state["epoch"])
        self.batch = int(state["batch"])
        self.step_count = int(state["step_count"])
        self.best_ndcg = float(state["best_ndcg"])
        self.best_epoch = int(state["best_epoch"])
        self.bad_epochs = int(state["bad_epochs"])
        self.stopped = bool(state["stopped"])
        self.best_state = state["best_state"]
        self.val_history = list(state["val_history"])
        self.weight_log = [list(r) for r in state["weight_log"]]
        times = state["times"]
        self.times = PhaseTimes(
            **{
                k: float(v) for k, v in times.items() if k not in ("samples", "forward")
            },
            samples=int(times["samples"]),
        )


@dataclass(slots=True)
class TrainedRec:
    """A trained variant: the model at its best validation epoch, and its logs.

    Attributes:
        cfg: the run.
        model: the model, best weights loaded.
        val_history: validation NDCG@20 per epoch.
        best_epoch: the kept epoch.
        times: the phase times.
        weight_log: rows ``[step, a, w_task...]`` every ``log_every`` steps.
        tasks: the task names of the weight columns.
        stage_one_seconds: B1's stage-1 training time (refresh cost), else 0.
        inference_seconds: B1's full-graph inference time (refresh cost), else 0.
    """

    cfg: RecConfig
    model: RecModel
    val_history: list[float]
    best_epoch: int
    times: PhaseTimes
    weight_log: list[list[float]]
    tasks: tuple[str, ...]
    stage_one_seconds: float = 0.0
    inference_seconds: float = 0.0

    @classmethod
    def of(cls, trainer: RecTrainer, **extra: float) -> TrainedRec:
        """The result of ``trainer``'s run (``extra``: B1's refresh costs)."""
        return cls(
            trainer.cfg,
            trainer.model,
            trainer.val_history,
            trainer.best_epoch,
            trainer.times,
            trainer.weight_log,
            trainer.tasks,
            **extra,
        )


def frozen_z_table(
    model: RecModel, graph: TypedGraph, features: RecFeatures
) -> dict[str, torch.Tensor]:
    """B1's refresh product: full-graph ``z`` into the FeatureStore, read back.

    Stage 1's encoder infers ``z`` for every node; the table goes into a typed
    feature store (one group per node type, ``Key(type, "z")``), as a two-stage
    system would publish it, and stage 2 reads it back from there.
    """
    z_full = model.full_z(graph, features.tensors())
    assert z_full is not None, "stage 1's model has an encoder"
    store = typed_feature_store(
        {t: {"z": z.detach()} for t, z in z_full.items()}, graph=graph
    )
    return gather_typed(
        store, {t: np.arange(n) for t, n in graph.num_nodes.items()}, "z"
    )


@dataclass(frozen=True, slots=True)
class RecMetrics:
    """Test metrics of one trained variant (§5).

    Attributes:
        recall: ``{K: Recall@K}``.
        ndcg: ``{K: NDCG@K}``.
        long_view_auc: AUC of the long-view head on test interactions (nan
            without labels).
        users: the evaluated users (dense ids).
        top_items: int64 ``[users, max K]`` recommended items (dense ids).
        top_scores: their scores.
    """

    recall: dict[int, float]
    ndcg: dict[int, float]
    long_view_auc: float
    users: Int64Array
    top_items: Int64Array
    top_scores: np.ndarray


@torch.no_grad()
def evaluate_topk(
    trained: TrainedRec,
    graph: TypedGraph,
    features: RecFeatures,
    split: Split,
    ks: tuple[int, ...] = (20, 50),
    sampled: bool = False,
) -> RecMetrics:
    """Full-catalogue test Recall@K and NDCG@K, long-view AUC and top-K lists.

    Args:
        trained: a trained variant.
        graph: the typed train graph (full-neighbourhood inference).
        features: node features.
        split: the temporal split (train + validation items are excluded).
        ks: cut-offs.
        sampled: take ``z`` from sampled neighbourhoods with the training
            fan-outs instead of full-neighbourhood inference (pitfall 6: the
            train/eval mismatch); only for a joint encoder.

    Returns:
        The metrics and every evaluated user's top ``max(ks)`` items.
    """
    model = trained.model
    model.eval()
    x = features.tensors()
    task = ranking_task(split, "test")
    z_eval = None
    if sampled and model.encoder is not None:
        fanouts = list(reversed(trained.cfg.fanouts))
        sampler = TypedNeighborSampler(graph, fanouts, seed=trained.cfg.seed)
        z_eval = model.sampled_z(sampler, x)
    users, items = model.score_vectors(graph, x, z_eval)
    m = topk_metrics(users, items, task.users, task.seen, task.relevant, ks)
    inter = split.inter
    auc_value = float("nan")
    if inter.label is not None and model.has_towers:
        z = z_eval if z_eval is not None else model.full_z(graph, x)
        t = model.towers_full(x, z)
        u = torch.from_numpy(inter.user[split.test])
        i = torch.from_numpy(inter.item[split.test])
        zu = None if z is None else z["user"][u]
        zi = None if z is None else z["item"][i]
        logits = model.long_view_logit(t["user"][u], t["item"][i], zu, zi)
        auc_value = auc(inter.label[split.test], logits.numpy())
    model.train()
    return RecMetrics(m.recall, m.ndcg, auc_value, m.users, m.top_items, m.top_scores)
