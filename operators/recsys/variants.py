"""The trained variants of ``e2egrec.md`` §4.6, as typed specs.

One table, no string dispatch in the model or the loop:

| id  | graph signal | GFAE | balancing | fusion level 1 | level 2 |
|-----|--------------|------|-----------|----------------|---------|
| B0  | none         | no   | fixed 1:1 | no             | no      |
| B1  | frozen z (two-stage) | stage 1 | fixed 1:1 | yes     | yes     |
| A1  | joint        | no   | GradNorm  | yes            | yes     |
| A2  | joint        | yes  | fixed 1:1:0.1 | yes        | yes     |
| E2E | joint        | yes  | GradNorm  | yes            | yes     |
| F1  | joint        | yes  | GradNorm  | yes            | no      |
| F2  | joint        | yes  | GradNorm  | no             | yes     |

B0 and B1 have no trainable shared encoder layer in their recommender, so
GradNorm has nothing to measure there: their task weights are fixed at 1:1.
LightGCN (R) has its own trainer (:mod:`strata.operators.recsys.lightgcn`).

Examples:
    >>> spec = variant_spec("E2E")
    >>> spec.graph is GraphSignal.JOINT, spec.tasks
    (True, ('rank', 'long_view', 'gfae'))
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from strata.operators.errors import as_enum

__all__ = ["STAGE_ONE", "GraphSignal", "Variant", "VariantSpec", "variant_spec"]


class Variant(enum.Enum):
    """The variants of §4.6 (LightGCN R apart)."""

    B0 = "B0"
    B1 = "B1"
    A1 = "A1"
    A2 = "A2"
    E2E = "E2E"
    F1 = "F1"
    F2 = "F2"


class GraphSignal(enum.Enum):
    """Where the recommender's graph embedding ``z`` comes from."""

    NONE = "none"  # no z at all
    FROZEN = "frozen"  # a z table from a separately trained encoder (two-stage)
    JOINT = "joint"  # the encoder trained with the recommender, end to end


@dataclass(frozen=True, slots=True)
class VariantSpec:
    """What one variant trains.

    Attributes:
        variant: its id.
        graph: where ``z`` comes from.
        gfae: whether the masked reconstruction task trains the encoder.
        gradnorm: GradNorm over the tasks (else ``fixed_weights``).
        fixed_weights: the fixed task weights when not GradNorm, in task order.
        feature_fusion: level 1, ``fuse(z)`` in the tower inputs.
        output_fusion: level 2, ``a <z_u, z_i>`` added to the score.
        towers: whether a recommender (towers, long-view head) is trained; B1's
            stage 1 trains the encoder alone (BPR on ``<z_u, z_i>`` + GFAE).
    """

    variant: Variant
    graph: GraphSignal
    gfae: bool
    gradnorm: bool
    fixed_weights: tuple[float, ...] | None
    feature_fusion: bool
    output_fusion: bool
    towers: bool = True

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks whose losses are summed, in order."""
        return (
            ("rank",)
            + (("long_view",) if self.towers else ())
            + (("gfae",) if self.gfae else ())
        )

    @property
    def uses_z(self) -> bool:
        """Whether the recommender reads a graph embedding at all."""
        return self.graph is not GraphSignal.NONE


_SPECS = {
    Variant.B0: VariantSpec(
        Variant.B0, GraphSignal.NONE, False, False, (1.0, 1.0), False, False
    ),
    Variant.B1: VariantSpec(
        Variant.B1, GraphSignal.FROZEN, False, False, (1.0, 1.0), True, True
    ),
    Variant.A1: VariantSpec(
        Variant.A1, GraphSignal.JOINT, False, True, None, True, True
    ),
    Variant.A2: VariantSpec(
        Variant.A2, GraphSignal.JOINT, True, False, (1.0, 1.0, 0.1), True, True
    ),
    Variant.E2E: VariantSpec(
        Variant.E2E, GraphSignal.JOINT, True, True, None, True, True
    ),
    Variant.F1: VariantSpec(
        Variant.F1, GraphSignal.JOINT, True, True, None, True, False
    ),
    Variant.F2: VariantSpec(
        Variant.F2, GraphSignal.JOINT, True, True, None, False, True
    ),
}


STAGE_ONE = VariantSpec(
    Variant.B1, GraphSignal.JOINT, True, False, (1.0, 0.1), False, False, towers=False
)
"""B1's stage 1: the encoder alone, BPR on ``<z_u, z_i>`` + GFAE, fixed 1 : 0.1."""


def variant_spec(variant: Variant | str) -> VariantSpec:
    """The spec of ``variant`` (a :class:`Variant` or its name, e.g. ``"E2E"``).

    Raises:
        OperatorError: for an unknown name, listing the variants.
    """
    return _SPECS[as_enum(Variant, variant, "variant", "variant_spec")]
