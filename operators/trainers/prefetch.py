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

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import numpy as np

from strata.operators.samplers.schedule import epoch_order as _epoch_order

T = TypeVar("T")
_POLL_S = 0.1


def epoch_order(ids: np.ndarray, seed: int, epoch: int, rank: int = 0) -> np.ndarray:
    """The training ids in the shuffled order of ``epoch`` (deterministic).

    The permutation comes from ``np.random.Generator(Philox(key=h(seed, epoch,
    rank)))``, the keyed schedule of ``systems/rapidgnn.md`` §3.2: any epoch's order
    can be computed alone, in any order, on any worker. One definition, in
    :func:`strata.operators.samplers.schedule.epoch_order`.
    """
    return _epoch_order(ids, seed, epoch, rank)


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_DONE = object()


class Prefetcher(Generic[T]):
    """Runs ``produce(0..num_batches-1)`` in a thread, ``depth`` batches ahead.

    Args:
        produce: builds batch ``index``; called in the background thread, in order.
        num_batches: how many batches the epoch has.
        depth: most batches waiting in the queue; ``0`` runs ``produce`` in the
            consumer's thread when it asks for the batch (no overlap: the
            on-demand baseline of ``systems/rapidgnn.md`` §4.3 R4).
        name: the thread's name.
        max_bytes: most bytes waiting in the queue (``size_of`` each batch); the
            thread waits while the queue holds a batch and the next one would
            pass the limit, so one oversized batch still goes through alone.
        size_of: a batch's bytes (needed with ``max_bytes``).

    Attributes:
        stall_s: seconds the consumer waited for a batch that was not ready
            (with ``depth=0``: the seconds ``produce`` took).
        peak_bytes: most bytes the queue held at once (with ``size_of``).
        depth_counts: how often the consumer found ``d`` batches waiting, by ``d``.
    """

    def __init__(
        self,
        produce: Callable[[int], T],
        num_batches: int,
        depth: int = 4,
        name: str = "strata-prefetch",
        *,
        max_bytes: int | None = None,
        size_of: Callable[[T], int] | None = None,
    ) -> None:
        if max_bytes is not None and size_of is None:
            raise ValueError("size_of: expected a function with max_bytes, got None")
        self._produce = produce
        self._num_batches = num_batches
        self._depth = max(0, depth)
        self._max_bytes = max_bytes
        self._size_of = size_of
        self._items: deque[tuple[Any, int]] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False
        self._next_sync = 0
        self.stall_s = 0.0
        self.peak_bytes = 0
        self.depth_counts: dict[int, int] = {}

    def start(self) -> Prefetcher[T]:
        """Start the thread (idempotent; none with ``depth=0``); return ``self``."""
        if not self._started:
            self._started = True
            if self._depth > 0:
                self._thread.start()
        return self

    def _run(self) -> None:
        try:
            for index in range(self._num_batches):
                if self._stop.is_set():
                    return
                item = self._produce(index)
                size = self._size_of(item) if self._size_of is not None else 0
                self._put(item, size)
        except BaseException as error:  # handed to the consumer, re-raised there
            self._put(_Failure(error), 0)
            return
        self._put(_DONE, 0)

    def _full(self, size: int) -> bool:
        if not self._items:
            return False
        if len(self._items) >= self._depth:
            return True
        limit = self._max_bytes
        return limit is not None and self._bytes + size > limit

    def _put(self, item: Any, size: int) -> None:
        with self._cond:
            while not self._stop.is_set() and self._full(size):
                self._cond.wait(_POLL_S)
            if self._stop.is_set():
                return
            self._items.append((item, size))
            self._bytes += size
            self.peak_bytes = max(self.peak_bytes, self._bytes)
            self._cond.notify_all()

    def _get(self) -> Any:
        with self._cond:
            waiting = len(self._items)
            self.depth_counts[waiting] = self.depth_counts.get(waiting, 0) + 1
            while not self._items:
                self._cond.wait(_POLL_S)
            item, size = self._items.popleft()
            self._bytes -= size
            self._cond.notify_all()
            return item

    def _get_sync(self) -> Any:
        index = self._next_sync
        if index >= self._num_batches:
            return _DONE
        self._next_sync += 1
        return self._produce(index)

    def __iter__(self) -> Iterator[T]:
        self.start()
        get = self._get if self._depth > 0 else self._get_sync
        while True:
            start = time.perf_counter()
            item = get()
            self.stall_s += time.perf_counter() - start
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item

    def close(self) -> None:
        """Stop producing and wait for the thread to end."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._started and self._depth > 0:
            self._thread.join()

    def __enter__(self) -> Prefetcher[T]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
