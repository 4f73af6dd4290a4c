"""Per-producer high-water marks: the exactly-once dedup state of the log.

A producer numbers its batches with increasing ``seq``; a batch whose ``seq`` is at or
below the producer's high-water mark was logged before (or deliberately skipped) and is
not logged again. Each segment header carries a snapshot of the table as of the
segment's start, so the table is rebuilt from the last segment alone, and an old
resend is found by reading only the one segment that can hold it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.update_log import _format as fmt
from storage.update_log._segment import Segment

Offsets = tuple[int, int]


@dataclass(slots=True)
class _Producer:
    high_water: int
    offsets: Offsets  # of the high-water record
    recent: dict[int, Offsets] = field(default_factory=dict)  # insertion-ordered


class ProducerTable:
    """High-water seq and recent record offsets of every producer.

    Args:
        window: how many recent seqs per producer to answer from memory.
    """

    def __init__(self, window: int) -> None:
        self._window = window
        self._producers: dict[str, _Producer] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def load(self, snapshot: fmt.ProducerSnapshot) -> None:
        """Start from a segment header's snapshot."""
        for pid, (seq, first, last) in snapshot.items():
            self._producers[pid] = _Producer(seq, (first, last))

    def snapshot(self) -> fmt.ProducerSnapshot:
        """The table as a segment header stores it."""
        return {p: (s.high_water, *s.offsets) for p, s in self._producers.items()}

    def high_water(self, producer_id: str) -> int | None:
        """Highest seq logged for ``producer_id``; None if never seen."""
        state = self._producers.get(producer_id)
        return None if state is None else state.high_water

    def remember(self, header: fmt.RecordHeader) -> None:
        """Record a logged record (in log order)."""
        if header.producer_id is None:
            return
        offsets = (header.first_offset, header.last_offset)
        state = self._producers.setdefault(
            header.producer_id, _Producer(header.seq, offsets)
        )
        if header.seq >= state.high_water:
            state.high_water, state.offsets = header.seq, offsets
        state.recent[header.seq] = offsets
        if len(state.recent) > self._window:
            del state.recent[next(iter(state.recent))]

    def find(
        self, producer_id: str, seq: int, segments: list[Segment]
    ) -> Offsets | None:
        """Offsets of an already-logged ``(producer_id, seq)``; None when it is new.

        Raises:
            KeyError: when ``seq`` is at or below the high-water mark but not in the
                retained log (a gap, or truncated away); the caller words the error.
        """
        state = self._producers.get(producer_id)
        if state is None or seq > state.high_water:
            return None
        if seq == state.high_water:
            return state.offsets
        if seq in state.recent:
            return state.recent[seq]
        for segment in reversed(segments):
            before = segment.header.producers.get(producer_id)
            if before is None or before[0] < seq:  # logged in this segment, if at all
                found = segment.find_seq(producer_id, seq)
                if found is not None:
                    return found
                break
        raise KeyError(seq)
