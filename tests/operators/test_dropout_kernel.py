"""The fused counter-based dropout kernel against a brute-force reference.

The reference restates the mask's definition element by element in plain Python
integers: a 32-bit multiply-xorshift finaliser over (seed, epoch, layer), then the
row's global id, then the column; an element is kept when the hash's low 24 bits
are at least ``round(p * 2**24)``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
import torch

from strata.operators.trainers import dropout as D

M32 = 0xFFFFFFFF


def mix(h: int) -> int:
    h = (((h >> 16) ^ h) * 0x045D9F3B) & M32
    h = (((h >> 16) ^ h) * 0x045D9F3B) & M32
    return (h >> 16) ^ h


def reference_mask(
    ids: list[int], width: int, p: float, seed: int, epoch: int, layer: int
) -> np.ndarray:
    key = mix(seed & M32)
    for word in (seed >> 32, epoch, layer):
        key = mix(key ^ (word & M32))
    threshold = round(p * (1 << 24))
    out = np.zeros((len(ids), width), dtype=bool)
    for i, v in enumerate(ids):
        row = mix(key ^ (v & M32))
        if v > M32:
            row = mix(row ^ (v >> 32))
        for j in range(width):
            col = mix((j * 0x09E3779B) & M32)
            out[i, j] = (mix(row ^ col) & ((1 << 24) - 1)) >= threshold
    return out


IDS = [0, 1, 2, 7, 1000, 2**31 + 5, 2**32 + 3, 2**40 + 17]


@pytest.mark.parametrize(
    ("p", "seed", "epoch", "layer"), [(0.5, 0, 3, 0), (0.2, 2**33 + 9, 41, 1)]
)
def test_masks_equal_the_reference(p: float, seed: int, epoch: int, layer: int) -> None:
    want = reference_mask(IDS, 37, p, seed, epoch, layer)
    ids = torch.tensor(IDS)
    assert np.array_equal(
        D.keep_mask(ids, 37, p, seed=seed, epoch=epoch, layer=layer).numpy(), want
    )
    x = torch.randn(len(IDS), 37)
    scale = np.float32(1.0 / (1.0 - p))
    fused = D.counter_dropout(x, ids, p=p, seed=seed, epoch=epoch, layer=layer)
    assert np.array_equal(
        fused.numpy(), np.where(want, x.numpy() * scale, 0.0 * x.numpy())
    )
    # the torch path (CUDA's) draws the same bits
    key = D.stream_key(seed, epoch, layer)
    cols = D._column_keys(37, torch.device("cpu"))
    out = torch.empty((len(IDS), 37), dtype=torch.bool)
    bits = D._keep_mask_torch(ids, cols, key, round(p * (1 << 24)), out)
    assert np.array_equal(bits.numpy(), want)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_keep_rate_within_binomial_bounds(p: float) -> None:
    rows, width = 3000, 400
    mask = D.keep_mask(torch.arange(rows), width, p, seed=1, epoch=0, layer=0).numpy()
    n = rows * width
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(mask.sum() - n * (1 - p)) < 5 * sigma
    # every column and every row keeps about 1 - p of its elements
    for counts, size in ((mask.sum(axis=0), rows), (mask.sum(axis=1), width)):
        bound = 6 * math.sqrt(size * p * (1 - p))
        assert np.abs(counts - size * (1 - p)).max() < bound
    # a new epoch draws an independent mask: agreement (1-p)^2 + p^2
    other = D.keep_mask(torch.arange(rows), width, p, seed=1, epoch=1, layer=0).numpy()
    agree = (mask == other).sum()
    q = (1 - p) ** 2 + p**2
    assert abs(agree - n * q) < 5 * math.sqrt(n * q * (1 - q))


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_kept_elements_are_scaled_by_one_over_keep_probability(p: float) -> None:
    x = torch.ones(500, 64)
    y = D.counter_dropout(x, torch.arange(500), p=p, seed=4, epoch=2, layer=1)
    values = set(np.unique(y.numpy()).tolist())
    assert values == {0.0, float(np.float32(1.0 / (1.0 - p)))}
    assert x.eq(1.0).all()  # the input is left as it was


def test_same_mask_however_rows_are_split() -> None:
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.permutation(5000)[:1200].astype(np.int64) + 2**32 - 600)
    x = torch.randn(len(ids), 96)
    args = {"p": 0.5, "seed": 7, "epoch": 11, "layer": 0}
    whole = D.counter_dropout(x, ids, **args)
    # rows spread over 2 and 3 "workers" (contiguous and strided blocks)
    for parts in (
        np.array_split(np.arange(len(ids)), 2),
        [np.arange(len(ids))[k::3] for k in range(3)],
    ):
        for rows in parts:
            part = D.counter_dropout(x[rows], ids[rows], **args)
            assert torch.equal(part, whole[rows])
    # and however many threads the kernel runs on
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        assert torch.equal(D.counter_dropout(x, ids, **args), whole)
    finally:
        numba.set_num_threads(before)
    # the in-place form (chunked training's) gives the same values
    assert torch.equal(D.scale_rows_(x.clone(), ids, **args), whole)


def test_gradient_is_mask_times_scale() -> None:
    ids = torch.arange(100, 400)
    x = torch.randn(300, 50, requires_grad=True)
    p = 0.4
    y = D.counter_dropout(x, ids, p=p, seed=3, epoch=5, layer=1)
    upstream = torch.randn(300, 50)
    (y * upstream).sum().backward()
    want = reference_mask(ids.tolist(), 50, p, 3, 5, 1)
    scale = np.float32(1.0 / (1.0 - p))
    assert x.grad is not None
    assert np.array_equal(
        x.grad.numpy(), np.where(want, upstream.numpy() * scale, 0.0 * upstream.numpy())
    )
    # the gradient check of autograd itself, in double precision (torch path)
    xd = torch.randn(20, 6, dtype=torch.float64, requires_grad=True)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return D.counter_dropout(t, torch.arange(20), p=0.5, seed=0, epoch=0, layer=0)

    assert torch.autograd.gradcheck(fn, (xd,))
