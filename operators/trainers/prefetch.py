"""A background thread that prepares the next mini-batches into a bounded queue.

The sampled trainer's epoch is a fixed list of batches (its *schedule*, see
:func:`epoch_order`). A :class:`Prefetcher` walks it in a thread, calling a
``produce(index)`` function (sample the blocks, gather the features) and putting
each batch into a queue of at most ``depth`` batches; the training loop only pops.
Sampling and gathering run in numba kernels that release the GIL, and torch releases
it inside its ops, so preparing batch ``b + 1`` overlaps training on batch ``b``
(RapidGNN's prefetcher, ``systems/rapidgnn.md`` §3.5, without the remote cache).

An exception in ``produce`` is re-raised in the consumer at the batch it failed on.
:meth:`Prefetcher.close` (or leaving the ``with`` block) stops the thread early and
waits for it, so an early-stopped epoch leaves no thread behind.

Examples:
    >>> with Prefetcher(lambda b: b * b, num_batches=4, depth=2) as batches:
    ...     list(batches)
    [0, 1, 4, 9]
    >>> order = epoch_order(np.arange(6), seed=0, epoch=1)
    >>> sorted(order.tolist()), bool((order == epoch_order(np.arange(6), 0, 1)).all())
    ([0, 1, 2, 3, 4, 5], True)
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import numpy as np

from strata.operators.samplers.rng import hash3

T = TypeVar("T")
_POLL_S = 0.1


def epoch_order(ids: np.ndarray, seed: int, epoch: int, rank: int = 0) -> np.ndarray:
    """The training ids in the shuffled order of ``epoch`` (deterministic).

    The permutation comes from ``np.random.Generator(Philox(key=h(seed, epoch,
    rank)))``, the keyed schedule of ``systems/rapidgnn.md`` §3.2: any epoch's order
    can be computed alone, in any order, on any worker.
    """
    key = int(hash3(np.uint64(seed), np.uint64(epoch), np.uint64(rank)))
    rng = np.random.Generator(np.random.Philox(key=key))
    return rng.permutation(ids)


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_DONE = object()


class Prefetcher(Generic[T]):
    """Runs ``produce(0..num_batches-1)`` in a thread, ``depth`` batches ahead.

    Args:
        produce: builds batch ``index``; called in the background thread, in order.
        num_batches: how many batches the epoch has.
        depth: most batches waiting in the queue (at least 1).
        name: the thread's name.

    Attributes:
        stall_s: seconds the consumer waited for a batch that was not ready.
    """

    def __init__(
        self,
        produce: Callable[[int], T],
        num_batches: int,
        depth: int = 4,
        name: str = "strata-prefetch",
    ) -> None:
        self._produce = produce
        self._num_batches = num_batches
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False
        self.stall_s = 0.0

    def start(self) -> Prefetcher[T]:
        """Start the thread (idempotent); return ``self``."""
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def _run(self) -> None:
        try:
            for index in range(self._num_batches):
                if self._stop.is_set():
                    return
                self._put(self._produce(index))
        except BaseException as error:  # handed to the consumer, re-raised there
            self._put(_Failure(error))
            return
        self._put(_DONE)

    def _put(self, item: Any) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    def __iter__(self) -> Iterator[T]:
        self.start()
        while True:
            start = time.perf_counter()
            item = self._queue.get()
            self.stall_s += time.perf_counter() - start
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item

    def close(self) -> None:
        """Stop producing and wait for the thread to end."""
        self._stop.set()
        if self._started:
            self._thread.join()

    def __enter__(self) -> Prefetcher[T]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
