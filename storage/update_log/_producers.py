"""Per-producer seq state: the exactly-once dedup rule of the log.

A producer numbers its batches ``first_seq, first_seq + 1, ...`` and the log accepts
them **only in that order**: a batch is logged when its ``seq`` is the producer's
high-water mark plus one (or its ``first_seq``, for a producer the log has not seen),
a batch at or below the high-water mark is a resend of a batch the log holds (or held,
before retention truncated it), and a batch beyond the next expected seq is a gap and
is refused, naming the seq the log expects. Because nothing is ever logged out of
order, every seq from a producer's first up to its high-water mark was logged: an
answer "duplicate" is never given for a batch that was lost in flight, whatever order
the network and the producer's resends deliver batches in.

Each segment header carries a snapshot of the table as of the segment's start, so the
table is rebuilt from the last segment alone, and an old resend is found by reading
only the one segment that can hold it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strata.storage.update_log import _format as fmt
from strata.storage.update_log._segment import Segment

Offsets = tuple[int, int]
#: Offsets answered for a resend whose record retention has deleted.
TRUNCATED: Offsets = (-1, -1)


class SeqGap(Exception):
    """``seq`` is past the next one the log expects from its producer."""

    def __init__(self, expected: int) -> None:
        super().__init__(expected)
        self.expected = expected


class SeqBelowStart(Exception):
    """``seq`` is below the producer's first logged seq: never logged."""

    def __init__(self, start: int) -> None:
        super().__init__(start)
        self.start = start


@dataclass(slots=True)
class _Producer:
    high_water: int
    offsets: Offsets  # of the high-water record
    start: int  # the producer's first logged seq
    recent: dict[int, Offsets] = field(default_factory=dict)  # insertion-ordered


class ProducerTable:
    """High-water seq, first seq and recent record offsets of every producer.

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
        for pid, (seq, first, last, start) in snapshot.items():
            self._producers[pid] = _Producer(seq, (first, last), start)

    def snapshot(self) -> fmt.ProducerSnapshot:
        """The table as a segment header stores it."""
        return {
            p: (s.high_water, *s.offsets, s.start) for p, s in self._producers.items()
        }

    def high_water(self, producer_id: str) -> int | None:
        """Highest seq logged for ``producer_id``; None if never seen."""
        state = self._producers.get(producer_id)
        return None if state is None else state.high_water

    def first_seq(self, producer_id: str) -> int | None:
        """First seq logged for ``producer_id``; None if never seen."""
        state = self._producers.get(producer_id)
        return None if state is None else state.start

    def remember(self, header: fmt.RecordHeader) -> None:
        """Record a logged record (in log order)."""
        if header.producer_id is None:
            return
        offsets = (header.first_offset, header.last_offset)
        state = self._producers.setdefault(
            header.producer_id, _Producer(header.seq, offsets, header.seq)
        )
        if header.seq >= state.high_water:
            state.high_water, state.offsets = header.seq, offsets
        state.recent[header.seq] = offsets
        if len(state.recent) > self._window:
            del state.recent[next(iter(state.recent))]

    def find(
        self,
        producer_id: str,
        seq: int,
        segments: list[Segment],
        first_seq: int | None = None,
    ) -> Offsets | None:
        """Offsets of an already-logged ``(producer_id, seq)``; None when it is next.

        Args:
            producer_id: the producer.
            seq: its batch number.
            segments: the log's segments, to look up old resends.
            first_seq: the producer's first seq, which an unseen producer must
                start with; None lets an unseen producer start anywhere (for
                callers that append in order themselves).

        Returns:
            None when ``seq`` is the one to log now; the record's offsets when the
            log holds it; :data:`TRUNCATED` when it was logged and retention has
            deleted it since.

        Raises:
            SeqGap: when ``seq`` is past the next expected seq (nothing is logged
                out of order, so the earlier batches come first).
            SeqBelowStart: when ``seq`` is below the producer's first seq.
        """
        state = self._producers.get(producer_id)
        if state is None:
            if first_seq is not None and seq != first_seq:
                raise SeqGap(first_seq)
            return None
        if seq == state.high_water + 1:
            return None
        if seq > state.high_water:
            raise SeqGap(state.high_water + 1)
        if seq < state.start:
            raise SeqBelowStart(state.start)
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
        # Logged (seqs are contiguous from ``start``), then truncated away.
        return TRUNCATED
