"""Full-graph training across a gang of workers (issue 6).

Built so far:

* :mod:`~operators.trainers.distributed.halo`: :class:`HaloPlan`,
  :func:`halo_exchange` (autograd all_to_all of boundary rows), :func:`all_to_all_rows`;
* :mod:`~operators.trainers.distributed.dropout`: counter-based dropout masks, the
  same for every worker count;
* :mod:`~operators.trainers.distributed.counters`: :class:`TransferCounters`.
"""

from operators.trainers.distributed.counters import TransferCounters
from operators.trainers.distributed.dropout import counter_dropout, keep_mask
from operators.trainers.distributed.halo import (
    HaloPlan,
    all_to_all_rows,
    halo_exchange,
)

__all__ = [
    "HaloPlan",
    "TransferCounters",
    "all_to_all_rows",
    "counter_dropout",
    "halo_exchange",
    "keep_mask",
]
