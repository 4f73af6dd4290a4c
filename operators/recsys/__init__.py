"""Joint GNN + recommender training (E2E-GRec, ``systems/e2egrec.md``).

Data (the synthetic generator of §4.1, a loader for a user's interaction table,
the temporal split, the typed graph and the features), the model (heterogeneous
SAGE encoder, two towers, two fusion levels, long-view head), losses, GradNorm,
the variants B0/B1/A1/A2/E2E/F1/F2, LightGCN (R), full-catalogue metrics and the
single-process training loop.
"""

from __future__ import annotations
