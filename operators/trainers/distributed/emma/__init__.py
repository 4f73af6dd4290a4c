"""Emma: source chunking with moving (stale) aggregation (``emma.md``, issue 6).

An approximate option of partition-parallel full-graph training: iteration ``t``
exchanges and aggregates only the sources of chunk ``t mod S`` (about ``1/S`` of
the halo rows and edges); each destination keeps a moving aggregate for the
rest; every iteration still computes all destinations and steps the optimizer;
every reported metric comes from an exact evaluation pass.

* the settings are the mode value
  :class:`~strata.operators.trainers.distributed.modes.Emma` (``EmmaConfig``,
  its earlier name, is an alias); :func:`check_emma` (rejected combinations);
* :class:`SourceChunker` (:mod:`.chunker`): counter-based chunk ids, restricted
  halo plans and filtered CSR per iteration;
* :class:`MovingState` (:mod:`.state`): the per-layer buffers, with
  snapshot/restore;
* :class:`EmmaEngine` (:mod:`.engine`): one rank's iteration, refresh and exact
  evaluation, with Emma's counters;
* :mod:`.trainer`: :func:`emma_summary`, the report's ``emma`` section,
  :func:`emma_outputs` for jobs, and :func:`EmmaTrainer`, a compatibility shim
  for ``DistributedTrainer(config, dist.with_mode(Emma(...)))``.

The moving sum itself is :func:`strata.operators.kernels.moving_aggr.moving_sum`.
"""

from strata.operators.trainers.distributed.emma.chunker import (
    SourceChunker,
    chunk_ids,
    mix64,
)
from strata.operators.trainers.distributed.emma.config import EmmaConfig, check_emma
from strata.operators.trainers.distributed.emma.engine import EmmaEngine
from strata.operators.trainers.distributed.emma.state import MovingState
from strata.operators.trainers.distributed.emma.trainer import (
    EmmaTrainer,
    emma_outputs,
    emma_summary,
)

__all__ = [
    "EmmaConfig",
    "EmmaEngine",
    "EmmaTrainer",
    "MovingState",
    "SourceChunker",
    "check_emma",
    "chunk_ids",
    "emma_outputs",
    "emma_summary",
    "mix64",
]
