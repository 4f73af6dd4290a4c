"""Joint GNN + recommender training (E2E-GRec, ``systems/e2egrec.md``).

Data (the synthetic generator of §4.1, a loader for a user's interaction table,
the temporal split, the typed graph and the features), the model (heterogeneous
SAGE encoder, two towers, two fusion levels, long-view head), losses, GradNorm,
the variants B0/B1/A1/A2/E2E/F1/F2, LightGCN (R), full-catalogue metrics and the
single-process training loop.
"""

from __future__ import annotations

from strata.operators.recsys.features import RecFeatures, build_features
from strata.operators.recsys.gradnorm import (
    Collective,
    GradNorm,
    GradNormConfig,
    IdentityCollective,
)
from strata.operators.recsys.graph import build_typed_graph
from strata.operators.recsys.interactions import Interactions, load_interactions
from strata.operators.recsys.lightgcn import (
    LightGCNConfig,
    LightGCNResult,
    LightGCNTrainer,
    train_lightgcn,
)
from strata.operators.recsys.metrics import TopKMetrics, auc, topk_metrics
from strata.operators.recsys.model import ModelDims, RecModel
from strata.operators.recsys.split import (
    Split,
    SplitReport,
    ranking_task,
    temporal_split,
)
from strata.operators.recsys.step import train_variant
from strata.operators.recsys.synth import SynthConfig, synth_interactions
from strata.operators.recsys.train import (
    RecConfig,
    RecMetrics,
    RecTrainer,
    TrainedRec,
    evaluate_topk,
)
from strata.operators.recsys.variants import Variant, VariantSpec, variant_spec

__all__ = [
    "Collective",
    "GradNorm",
    "GradNormConfig",
    "IdentityCollective",
    "Interactions",
    "LightGCNConfig",
    "LightGCNResult",
    "LightGCNTrainer",
    "ModelDims",
    "RecConfig",
    "RecFeatures",
    "RecMetrics",
    "RecModel",
    "RecTrainer",
    "Split",
    "SplitReport",
    "SynthConfig",
    "TopKMetrics",
    "TrainedRec",
    "Variant",
    "VariantSpec",
    "auc",
    "build_features",
    "build_typed_graph",
    "evaluate_topk",
    "load_interactions",
    "ranking_task",
    "synth_interactions",
    "temporal_split",
    "topk_metrics",
    "train_lightgcn",
    "train_variant",
    "variant_spec",
]
