import numpy as np
import pytest

from strata.partition.chunking import ChunkConfig, split_chunks
from strata.partition.errors import PartitionError
from strata.partition.load_plan import LoadMode, plan_loads
from strata.partition.multilevel import MultilevelPartitioner


@pytest.fixture(scope="module")
def schedule(community):
    k = 3
    part = MultilevelPartitioner(k, seed=0).partition(community).assignment
    s = split_chunks(community, part, k, ChunkConfig(5))
    sources = [[s.src_of(int(c)) for c in s.order[g]] for g in range(k)]
    return sources, part


def _sizes(sources):
    k, steps = len(sources), len(sources[0])
    union = [
        np.unique(np.concatenate([sources[g][s] for g in range(k)]))
        for s in range(steps)
    ]
    return k, steps, union


def test_formulas(schedule):
    sources, owner = schedule
    k, steps, union = _sizes(sources)
    total = sum(x.size for row in sources for x in row)
    fresh = sum(
        np.setdiff1d(sources[g][s], sources[g][s - 1] if s else []).size
        for g in range(k)
        for s in range(steps)
    )
    new = sum(
        np.setdiff1d(union[s], union[s - 1] if s else []).size for s in range(steps)
    )
    naive = plan_loads(sources, owner, LoadMode.NAIVE)
    intra = plan_loads(sources, owner, LoadMode.INTRA)
    inter = plan_loads(sources, owner, LoadMode.INTER)
    both = plan_loads(sources, owner, LoadMode.BOTH)
    assert naive.host_rows == total
    assert naive.peer_rows == 0
    assert intra.host_rows == fresh
    assert intra.peer_rows == 0
    assert inter.host_rows == sum(u.size for u in union)
    assert inter.peer_rows == total - sum(u.size for u in union)
    assert both.host_rows == new
    assert both.peer_rows == fresh - new
    assert both.host_rows <= intra.host_rows <= naive.host_rows


def test_every_worker_gets_every_row(schedule):
    sources, owner = schedule
    plan = plan_loads(sources, owner, LoadMode.BOTH)
    for s, step in enumerate(plan.steps):
        for g in range(len(sources)):
            got = [step.keep[g], step.host[g]] + [r for _, h, r in step.peer if h == g]
            assert np.array_equal(np.sort(np.concatenate(got)), sources[g][s])
    assert plan.host_load.sum() == plan.host_rows


def test_owner_loads_its_rows_first():
    sources = [[np.array([0, 1])], [np.array([0, 1])]]
    plan = plan_loads(sources, np.array([1, 0]), LoadMode.BOTH)
    step = plan.steps[0]
    assert step.host[0].tolist() == [1]
    assert step.host[1].tolist() == [0]
    assert plan.bytes(16) == (2 * 16 * 4, 2 * 16 * 4)


def test_mismatched_steps():
    with pytest.raises(PartitionError, match="same number of steps"):
        plan_loads([[np.array([0])], []], np.array([0]))
