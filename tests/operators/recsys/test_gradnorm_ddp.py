"""GradNorm under DistributedDataParallel (e2egrec.md §4.4, last bullet).

GradNorm's per-task ``autograd.grad`` calls into ``W`` run before the weighted
loss's ``backward()``. They must neither trigger DDP's gradient reduction nor make
it count a parameter twice: DDP raises "Expected to mark a variable ready only
once" when its hooks fire twice in one iteration. A one-worker gloo group (in
process, no spawn) runs the real DDP reducer; the wrapped run must match the bare
run exactly.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from strata.operators.recsys.features import build_features
from strata.operators.recsys.graph import build_typed_graph
from strata.operators.recsys.split import temporal_split
from strata.operators.recsys.synth import SynthConfig, synth_interactions
from strata.operators.recsys.train import RecConfig, RecTrainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def one_worker_group():  # type: ignore[no-untyped-def]
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_gradnorm_steps_under_ddp_match_the_bare_loop(one_worker_group) -> None:  # type: ignore[no-untyped-def]
    split = temporal_split(
        synth_interactions(SynthConfig(num_users=120, num_items=60), 0)
    )
    graph, feats = build_typed_graph(split), build_features(split)
    cfg = RecConfig(variant="E2E", epochs=1, batch_size=256, fanouts=(4, 3))
    bare = RecTrainer(cfg, graph, feats, split)
    wrapped = RecTrainer(cfg, graph, feats, split, wrap=DistributedDataParallel)
    for _ in range(3):
        bare.train_step()
        wrapped.train_step()  # raises if DDP's hooks fired twice
    torch.testing.assert_close(wrapped.gradnorm.weights, bare.gradnorm.weights)
    for key, value in bare.model.state_dict().items():
        torch.testing.assert_close(wrapped.model.state_dict()[key], value)
