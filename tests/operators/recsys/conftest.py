"""Recsys tests run torch single-threaded: their tensors are tiny, and on a shared,
oversubscribed CPU torch's spinning worker threads made tiny steps ~30x slower."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
