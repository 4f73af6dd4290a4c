"""The single-device oracle with the distributed trainers' dropout rule.

:class:`~strata.operators.trainers.FullGraphTrainer` draws dropout masks from torch's
generator, which no partitioned run can reproduce. :class:`CounterDropoutTrainer`
is the same trainer (same model, optimiser, epoch loop, evaluation) whose
training forward pass draws masks with
:func:`~strata.operators.trainers.distributed.dropout.counter_dropout`, keyed by
(seed, epoch, layer, node id): exactly the masks every distributed worker draws.
With ``dropout=0`` both trainers are the plain ``FullGraphTrainer``.

Examples:
    >>> from strata.storage import load_planetoid
    >>> from strata.operators.trainers import ModelConfig, TrainConfig
    >>> config = TrainConfig(ModelConfig("gcn", hidden=16), epochs=2, device="cpu")
    >>> result = CounterDropoutTrainer(config).fit(load_planetoid("cora"))
    >>> result.epochs_run
    2
"""

from __future__ import annotations

import torch

from strata.operators.layers import BasicGNN
from strata.operators.trainers.distributed.dropout import counter_dropout
from strata.operators.trainers.full_graph import FullGraphTrainer

__all__ = ["CounterDropoutTrainer", "forward_counter_dropout"]


def forward_counter_dropout(
    model: BasicGNN, graph: object, x: torch.Tensor, *, seed: int, epoch: int
) -> torch.Tensor:
    """``model(graph, x)`` with counter-based dropout before every layer.

    Args:
        model: a model of :mod:`strata.operators.layers` (dropout ``model.dropout``).
        graph: the full graph (or its DeviceGraph).
        x: ``[num_nodes, F]`` features, row ``v`` for node ``v``.
        seed: the run's seed.
        epoch: the epoch (keys the masks).

    Returns:
        The logits.
    """
    ids = torch.arange(x.shape[0], device=x.device)
    for i, conv in enumerate(model.convs):
        x = counter_dropout(x, ids, p=model.dropout, seed=seed, epoch=epoch, layer=i)
        x = conv(graph, x)
        if i < model.num_layers - 1:
            x = model.act(x)
    return x


class CounterDropoutTrainer(FullGraphTrainer):
    """:class:`FullGraphTrainer` with counter-based dropout masks (see the module)."""

    def train_forward(self, model: BasicGNN, epoch: int) -> torch.Tensor:
        """Logits with the distributed trainers' counter-based dropout masks."""
        return forward_counter_dropout(
            model, self._graph, self._x, seed=self.config.seed, epoch=epoch
        )
