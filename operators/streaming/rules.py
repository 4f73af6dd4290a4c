"""Layer rules: the message, root and read functions of one incremental GNN layer.

A :class:`LayerRule` is a trained batch layer (``SAGEConv`` or ``GCNConv``) taken
apart into the three functions the streaming algebra needs (d3gnn.md §2, §3.3):

* ``message(f_u, R_u, n_u)``: what source ``u`` sends along each out-edge. It must
  depend on the source only, so a change of ``u`` is one *replace* per out-edge.
* ``root(f_v)``: the cached per-node transform ``R_v`` (float64), recomputed only
  when ``f_v`` changes.
* ``read(agg_v, n_v, R_v)``: the layer's output for ``v`` from its aggregator.

The linear maps are applied *before* aggregation wherever the aggregator is linear,
so a vertex whose aggregate changed is re-read in O(d), not O(d^2):

=============  ==========================  =============  =========================
layer          message                     ``R``          read
=============  ==========================  =============  =========================
SAGE mean/sum  ``W_l f_u``                 ``W_r f_v``    ``agg + b + R``
SAGE max       ``f_u`` (max-pool:          ``W_r f_v``    ``W_l max + b + R``
               ``relu(W_p f_u + b_p)``)
GCN            ``s_u W f_u``               ``W f_v``      ``s_v S_v + w s_v^2 R_v + b``
=============  ==========================  =============  =========================

GCN (§3.6) uses exactly Strata's batch ``GCNConv`` convention (PyG's): existing
self-loops are replaced by one loop of weight ``w`` (1, or 2 when ``improved``),
and both endpoints use the target-side degree, ``d̂_u = n_u + w`` with ``n_u`` the
number of live in-edges of ``u`` that are not loops, so ``s_u = d̂_u^{-1/2}``. A
change of ``n_u`` therefore changes every message of ``u``; the layer treats it as
a feature change of ``u``. Loops are ignored by the GCN aggregation
(:attr:`LayerRule.skips_loops`).

Examples:
    >>> import numpy as np, torch
    >>> from strata.operators.layers import SAGEConv
    >>> torch.manual_seed(0) is not None
    True
    >>> rule = LayerRule.from_module(SAGEConv(4, 2))
    >>> rule.kind, rule.aggr, rule.msg_dim
    ('sage', 'mean', 2)
    >>> f = np.ones((1, 4))
    >>> rule.read(rule.message(f, rule.root(f), np.ones(1)), np.ones(1), rule.root(f)
    ...           ).shape
    (1, 2)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from torch import nn

from strata.operators.errors import OperatorError

Float64Array = npt.NDArray[np.float64]

_WHERE = "LayerRule.from_module"


def _array(tensor: Any) -> Float64Array:
    return np.ascontiguousarray(tensor.detach().cpu().numpy(), dtype=np.float64)


@dataclass(frozen=True, slots=True, eq=False)
class LayerRule:
    """One incremental layer: weights (float64) and the functions above.

    Attributes:
        kind: ``"sage"`` or ``"gcn"``.
        aggr: ``"mean"``, ``"sum"`` or ``"max"`` (GCN: ``"sum"``).
        in_dim: width of the layer input ``f``.
        out_dim: width of the output.
        weight: ``[out, in]``: SAGE's ``W_l``, GCN's ``W``.
        bias: ``[out]`` or None.
        root_weight: ``[out, in]``: SAGE's ``W_r``, or None.
        project_weight: ``[in, in]``: SAGE max-pool's ``W_p``, or None.
        project_bias: ``[in]`` or None.
        normalize: L2-normalise every output row (SAGE).
        loop_weight: GCN self-loop weight (1, or 2 when ``improved``).
    """

    kind: str
    aggr: str
    in_dim: int
    out_dim: int
    weight: Float64Array
    bias: Float64Array | None = None
    root_weight: Float64Array | None = None
    project_weight: Float64Array | None = None
    project_bias: Float64Array | None = None
    normalize: bool = False
    loop_weight: float = 1.0
    # Transposed C-contiguous copies: ``f @ W.T`` on a strided view takes a slow
    # BLAS path (measured 5-100x slower for small batches on a busy 2-core box).
    _weight_t: Float64Array = field(init=False, repr=False)
    _root_t: Float64Array | None = field(init=False, repr=False)
    _project_t: Float64Array | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        def t(w: Float64Array | None) -> Float64Array | None:
            return None if w is None else np.ascontiguousarray(w.T, dtype=np.float64)

        object.__setattr__(self, "_weight_t", t(self.weight))
        object.__setattr__(self, "_root_t", t(self.root_weight))
        object.__setattr__(self, "_project_t", t(self.project_weight))

    # ------------------------------------------------------------------ building
    @classmethod
    def from_module(cls, conv: nn.Module) -> LayerRule:
        """Take a trained ``SAGEConv`` or ``GCNConv`` apart (weights copied).

        Raises:
            OperatorError: for another layer type or an unsupported option.
        """
        from strata.operators.layers import GCNConv, SAGEConv

        if isinstance(conv, SAGEConv):
            if conv.aggr not in ("mean", "sum", "max"):
                raise OperatorError.build(
                    "aggr", _WHERE, "mean, sum or max", repr(conv.aggr)
                )
            if conv.project and conv.aggr != "max":
                raise OperatorError.build(
                    "project", _WHERE, "project only with aggr='max'", conv.aggr
                )
            lin = conv.lin
            return cls(
                kind="sage",
                aggr=conv.aggr,
                in_dim=conv.in_channels,
                out_dim=conv.out_channels,
                weight=_array(conv.lin_l.weight),
                bias=None if conv.lin_l.bias is None else _array(conv.lin_l.bias),
                root_weight=None if conv.lin_r is None else _array(conv.lin_r.weight),
                project_weight=None if lin is None else _array(lin.weight),
                project_bias=None if lin is None else _array(lin.bias),
                normalize=conv.normalize,
            )
        if isinstance(conv, GCNConv):
            if not (conv.normalize and conv.add_self_loops):
                raise OperatorError.build(
                    "GCNConv",
                    _WHERE,
                    "normalize=True with self-loops",
                    f"normalize={conv.normalize}, add_self_loops={conv.add_self_loops}",
                    "an unnormalised GCN is a sum; use SAGEConv(aggr='sum')",
                )
            return cls(
                kind="gcn",
                aggr="sum",
                in_dim=conv.in_channels,
                out_dim=conv.out_channels,
                weight=_array(conv.lin.weight),
                bias=None if conv.bias is None else _array(conv.bias),
                loop_weight=2.0 if conv.improved else 1.0,
            )
        raise OperatorError.build(
            "layer",
            _WHERE,
            "SAGEConv or GCNConv (incremental layers, d3gnn.md §3.1)",
            type(conv).__name__,
            "attention layers are not incremental in v1",
        )

    # ------------------------------------------------------------------ shape
    @property
    def msg_dim(self) -> int:
        """Width of a message (and of the aggregator state)."""
        return self.in_dim if self.aggr == "max" else self.out_dim

    @property
    def degree_dependent(self) -> bool:
        """Whether a message depends on the sender's in-degree (GCN)."""
        return self.kind == "gcn"

    @property
    def skips_loops(self) -> bool:
        """Whether self-loop edges are left out of the aggregation (GCN)."""
        return self.kind == "gcn"

    # ------------------------------------------------------------------ functions
    def scale(self, n: npt.ArrayLike) -> Float64Array:
        """GCN's ``s = (n + loop_weight) ** -0.5`` for live in-degrees ``n``."""
        return (np.asarray(n, dtype=np.float64) + self.loop_weight) ** -0.5

    def root(self, f: np.ndarray) -> Float64Array:
        """``R`` of input rows ``f`` (float64 ``[k, out_dim]``)."""
        f64 = np.asarray(f, dtype=np.float64)
        if self.kind == "gcn":
            return f64 @ self._weight_t
        if self._root_t is None:
            return np.zeros((f64.shape[0], self.out_dim))
        return f64 @ self._root_t

    def message(self, f: np.ndarray, r: Float64Array, n: npt.ArrayLike) -> Float64Array:
        """Messages of sources with inputs ``f``, roots ``r``, in-degrees ``n``."""
        if self.kind == "gcn":
            return r * self.scale(n)[:, None]
        f64 = np.asarray(f, dtype=np.float64)
        if self.aggr == "max":
            if self._project_t is None:
                return f64
            assert self.project_bias is not None
            return np.maximum(f64 @ self._project_t + self.project_bias, 0.0)
        return f64 @ self._weight_t

    def read(
        self, agg: Float64Array, n: npt.ArrayLike, r: Float64Array
    ) -> Float64Array:
        """Outputs from aggregates ``agg`` (already reduced: mean, max or sum)."""
        if self.kind == "gcn":
            s = self.scale(n)[:, None]
            out = s * agg + (self.loop_weight * s * s) * r
        elif self.aggr == "max":
            out = agg @ self._weight_t + r
        else:
            out = agg + r
        if self.bias is not None:
            out = out + self.bias
        if self.normalize:
            norm = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.maximum(norm, 1e-12)  # F.normalize's eps
        return out

    # ------------------------------------------------------------------ wire
    def to_arrays(self) -> dict[str, Any]:
        """A wire- and checkpoint-friendly dict (arrays and scalars)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "aggr": self.aggr,
            "in_dim": self.in_dim,
            "out_dim": self.out_dim,
            "normalize": self.normalize,
            "loop_weight": self.loop_weight,
        }
        for name in (
            "weight",
            "bias",
            "root_weight",
            "project_weight",
            "project_bias",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_arrays(cls, data: dict[str, Any]) -> LayerRule:
        """Inverse of :meth:`to_arrays`."""

        def opt(name: str) -> Float64Array | None:
            value = data.get(name)
            return None if value is None else np.asarray(value, dtype=np.float64)

        return cls(
            kind=str(data["kind"]),
            aggr=str(data["aggr"]),
            in_dim=int(data["in_dim"]),
            out_dim=int(data["out_dim"]),
            weight=np.asarray(data["weight"], dtype=np.float64),
            bias=opt("bias"),
            root_weight=opt("root_weight"),
            project_weight=opt("project_weight"),
            project_bias=opt("project_bias"),
            normalize=bool(data["normalize"]),
            loop_weight=float(data["loop_weight"]),
        )

    def __repr__(self) -> str:
        return (
            f"LayerRule({self.kind}, aggr={self.aggr}, {self.in_dim} -> {self.out_dim})"
        )
