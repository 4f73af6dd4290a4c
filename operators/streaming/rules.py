"""Layer rules: the incremental form of a layer, derived from its one definition.

A :class:`LayerRule` takes a trained
:class:`~strata.operators.layers.message_passing.MessagePassing` layer apart into the
three functions the streaming algebra needs (d3gnn.md §2, §3.3), reading only the
layer's declaration (``message``, ``aggregation``, ``transform``, ``root``,
``update``), never its name:

* ``message(f_u, R_u, n_u)``: what source ``u`` sends along each out-edge: the
  layer's ``message(f_u)``, passed through ``W`` already when the aggregation is
  linear (so a re-read is O(d), not O(d^2)), and for a degree-dependent
  aggregation (GCN) scaled by ``s_u``. It depends on the source only, so a change
  of ``u`` is one *replace* per out-edge.
* ``root(f_v)``: the cached per-node term ``R_v`` (float64), recomputed only when
  ``f_v`` changes: the layer's ``root(f_v)``, or for an aggregation with
  self-loops (GCN) the vertex's own transformed message.
* ``read(agg_v, n_v, R_v)``: the output for ``v`` from its aggregator: the
  layer's ``transform`` (unless applied already), then ``update(h, R_v)``.

=============  ==========================  =============  =========================
layer          message                     ``R``          read
=============  ==========================  =============  =========================
SAGE mean/sum  ``W_l f_u``                 ``W_r f_v``    ``agg + b + R``
SAGE max       ``f_u`` (max-pool:          ``W_r f_v``    ``W_l max + b + R``
               ``relu(W_p f_u + b_p)``)
GCN            ``s_u W f_u``               ``W f_v``      ``s_v S_v + w s_v^2 R_v + b``
GIN            ``f_u``                     ``(1+eps) f``  ``nn(agg + R)``
yours          ``W message(f_u)``          ``root(f_v)``  ``update(agg + b, R)``
=============  ==========================  =============  =========================

GCN (§3.6) uses exactly the batch layer's convention (PyG's): existing self-loops
are replaced by one loop of weight ``w`` (1, or 2 when ``improved``), and both
endpoints use the target-side degree, ``d̂_u = n_u + w`` with ``n_u`` the number of
live in-edges of ``u`` that are not loops, so ``s_u = d̂_u^{-1/2}``. A change of
``n_u`` therefore changes every message of ``u``; the layer treats it as a feature
change of ``u``. Loops are ignored by such an aggregation
(:attr:`LayerRule.skips_loops`).

The layer runs in float64 (a copy of the trained module). On the wire and in
checkpoints a rule is plain data (:meth:`LayerRule.to_arrays`): the layer's import
path, its constructor arguments (JSON values) and its float64 parameters.

Examples:
    >>> import numpy as np, torch
    >>> from strata.operators.layers import SAGEConv
    >>> torch.manual_seed(0) is not None
    True
    >>> rule = LayerRule.from_module(SAGEConv(4, 2))
    >>> rule.kind, rule.aggr, rule.msg_dim
    ('mean', 'mean', 2)
    >>> f = np.ones((1, 4))
    >>> rule.read(rule.message(f, rule.root(f), np.ones(1)), np.ones(1), rule.root(f)
    ...           ).shape
    (1, 2)
"""

from __future__ import annotations

import copy
import importlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.layers.message_passing import (
    MessagePassing,
    message_passing_layer,
)
from strata.operators.streaming._kernels import SMALL_ROWS, matmul_rows

Float64Array = npt.NDArray[np.float64]

_WHERE = "LayerRule.from_module"


def _numpy(t: torch.Tensor) -> Float64Array:
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float64)


def _torch(a: npt.ArrayLike) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))


@dataclass(frozen=True, slots=True, eq=False)
class LayerRule:
    """One incremental layer: a float64 copy of the layer and its derived algebra.

    Attributes:
        layer: the layer (float64, eval mode, no gradients).
        in_dim: width of the layer input ``f``.
        out_dim: width of the output.
        msg_dim: width of a message (and of the aggregator state).
        root_dim: width of ``R``.
    """

    layer: MessagePassing
    in_dim: int
    out_dim: int
    msg_dim: int
    root_dim: int
    _weight: torch.Tensor | None = field(default=None, repr=False)
    _bias: torch.Tensor | None = field(default=None, repr=False)
    _weight_t: Float64Array | None = field(default=None, repr=False)
    _root_map: tuple[Float64Array, Float64Array] | None = field(
        default=None, repr=False
    )

    # ------------------------------------------------------------------ building
    @classmethod
    def from_module(cls, conv: nn.Module) -> LayerRule:
        """Take a trained layer apart (its parameters copied to float64).

        Raises:
            OperatorError: for a layer that is not a ``MessagePassing`` one, or
                an attention layer (no incremental rule).
        """
        layer = copy.deepcopy(message_passing_layer(conv, _WHERE))
        layer = layer.double().eval().requires_grad_(False)
        with torch.no_grad():
            probe = torch.zeros(1, _in_dim(layer), dtype=torch.float64)
            m = layer.message(probe)
            wb = layer.transform()
            h = m if wb is None else torch.nn.functional.linear(m, wb[0], wb[1])
            root = layer.root(probe) if layer.uses_root else None
            out = layer.update(h, root)
        transformed = layer.aggregation.linear and wb is not None
        msg_dim = int(h.shape[1] if transformed else m.shape[1])
        root_dim = int(h.shape[1])
        return cls(
            layer,
            in_dim=int(probe.shape[1]),
            out_dim=int(out.shape[1]),
            msg_dim=msg_dim,
            root_dim=root_dim,
            _weight=None if wb is None else wb[0],
            _bias=None if wb is None else wb[1],
            _weight_t=None if wb is None else _numpy(wb[0].t()),
            _root_map=_affine_map(layer) if layer.uses_root else None,
        )

    # ------------------------------------------------------------------ shape
    @property
    def aggr(self) -> str:
        """The accumulator: ``"sum"``, ``"mean"`` or ``"max"``."""
        name = self.layer.aggregation.name
        return "sum" if name == "gcn" else name

    @property
    def kind(self) -> str:
        """``"gcn"`` for a self-loop, degree-normalised sum; else the accumulator."""
        return self.layer.aggregation.name

    @property
    def degree_dependent(self) -> bool:
        """Whether a message depends on the sender's in-degree (GCN)."""
        return self.layer.aggregation.degree_dependent

    @property
    def skips_loops(self) -> bool:
        """Whether self-loop edges are left out of the aggregation (GCN)."""
        return bool(self.layer.aggregation.self_loop)

    @property
    def loop_weight(self) -> float:
        """The self-loop weight of a self-loop aggregation (1 otherwise)."""
        return float(getattr(self.layer.aggregation, "loop_weight", 1.0))

    @property
    def transformed(self) -> bool:
        """Whether messages carry ``W`` already (a linear aggregation)."""
        return self._weight is not None and self.layer.aggregation.linear

    @property
    def bias(self) -> Float64Array | None:
        """The transform's bias (added after the aggregation), or None."""
        return None if self._bias is None else _numpy(self._bias)

    @property
    def normalize(self) -> bool:
        """Whether ``update`` is more than ``h + R`` (no fused read then)."""
        return not self.layer.update_is_sum

    # ------------------------------------------------------------------ functions
    def scale(self, n: npt.ArrayLike) -> Float64Array:
        """GCN's ``s = (n + loop_weight) ** -0.5`` for live in-degrees ``n``."""
        return (np.asarray(n, dtype=np.float64) + self.loop_weight) ** -0.5

    def _message(self, f: npt.ArrayLike) -> Float64Array:
        m = _numpy(self.layer.message(_torch(f)))
        if self.transformed:
            assert self._weight_t is not None
            m = linear_rows(m, self._weight_t)
        return m

    def root(self, f: np.ndarray) -> Float64Array:
        """``R`` of input rows ``f`` (float64 ``[k, root_dim]``)."""
        with torch.no_grad():
            if self.skips_loops:  # the vertex's own message joins its aggregate
                return self._message(f)
            if not self.layer.uses_root:
                return np.zeros((np.shape(f)[0], self.root_dim))
            if self._root_map is not None and np.shape(f)[0] < SMALL_ROWS:
                a, b = self._root_map
                return linear_rows(np.asarray(f, dtype=np.float64), a) + b
            r = self.layer.root(_torch(f))
            assert r is not None
            return _numpy(r)

    def message(self, f: np.ndarray, r: Float64Array, n: npt.ArrayLike) -> Float64Array:
        """Messages of sources with inputs ``f``, roots ``r``, in-degrees ``n``."""
        if self.degree_dependent:
            return r * self.scale(n)[:, None]
        with torch.no_grad():
            return self._message(f)

    def read(
        self, agg: Float64Array, n: npt.ArrayLike, r: Float64Array
    ) -> Float64Array:
        """Outputs from aggregates ``agg`` (already reduced: mean, max or sum)."""
        if self.skips_loops:
            s = self.scale(n)[:, None]
            agg = s * agg + (self.loop_weight * s * s) * r
            r = np.zeros_like(r)
        with torch.no_grad():
            h = _torch(agg)
            if self.transformed:
                if self._bias is not None:
                    h = h + self._bias
            elif self._weight is not None:
                h = torch.nn.functional.linear(h, self._weight, self._bias)
            root = _torch(r) if self.layer.uses_root else None
            return _numpy(self.layer.update(h, root))

    # ------------------------------------------------------------------ wire
    def to_arrays(self) -> dict[str, Any]:
        """A wire- and checkpoint-friendly dict: import path, arguments, weights.

        Raises:
            OperatorError: when the layer's constructor arguments are not JSON
                values (such a layer streams within one process only).
        """
        args, kwargs = self.layer.init_arguments()
        try:
            init = json.dumps({"args": list(args), "kwargs": kwargs})
        except TypeError:
            raise OperatorError.build(
                "layer",
                "LayerRule.to_arrays",
                "constructor arguments that are JSON values",
                f"{type(self.layer).__name__}{args}",
                "give the layer plain arguments (widths, flags) to cross the wire "
                "or enter a checkpoint",
            ) from None
        kind = type(self.layer)
        state = {k: _numpy(v) for k, v in self.layer.state_dict().items()}
        return {
            "layer": f"{kind.__module__}:{kind.__qualname__}",
            "init": init,
            "state": state,
        }

    @classmethod
    def from_arrays(cls, data: dict[str, Any]) -> LayerRule:
        """Inverse of :meth:`to_arrays` (imports the layer's class)."""
        module, _, name = str(data["layer"]).partition(":")
        kind: Any = importlib.import_module(module)
        for part in name.split("."):
            kind = getattr(kind, part)
        init = json.loads(str(data["init"]))
        layer = kind(*init["args"], **init["kwargs"])
        state = {k: torch.as_tensor(np.asarray(v)) for k, v in data["state"].items()}
        layer.load_state_dict(state)
        return cls.from_module(layer)

    def __repr__(self) -> str:
        return (
            f"LayerRule({type(self.layer).__name__}, aggr={self.aggr}, "
            f"{self.in_dim} -> {self.out_dim})"
        )


def linear_rows(x: np.ndarray, w_t: Float64Array) -> Float64Array:
    """``x @ w_t`` in float64: few rows here (no thread pool), many in torch."""
    x64 = np.ascontiguousarray(x, dtype=np.float64)
    if x64.shape[0] >= SMALL_ROWS:
        return _numpy(_torch(x64) @ _torch(w_t))
    out = np.empty((x64.shape[0], w_t.shape[1]))
    matmul_rows(x64, w_t, out)
    return out


def _affine_map(layer: MessagePassing) -> tuple[Float64Array, Float64Array] | None:
    """``(A, b)`` with ``root(f) == f @ A + b`` when the layer's root is affine.

    Probed from the definition: ``b = root(0)``, row ``i`` of ``A`` is
    ``root(e_i) - b`` (exact for a linear map: one product and zeros per entry),
    then a random probe must agree (to 1e-9 relative); otherwise None (the rule
    calls ``root`` itself).
    """
    width = _in_dim(layer)
    with torch.no_grad():
        zero = layer.root(torch.zeros(1, width, dtype=torch.float64))
        basis = layer.root(torch.eye(width, dtype=torch.float64))
        probe = torch.from_numpy(np.random.default_rng(0).normal(size=(4, width)))
        expected = layer.root(probe)
    if zero is None or basis is None or expected is None:
        return None
    b = _numpy(zero)[0]
    a = np.ascontiguousarray(_numpy(basis) - b)
    got = _numpy(probe) @ a + b
    want = _numpy(expected)
    if not np.allclose(got, want, rtol=1e-9, atol=1e-9 * (1 + np.abs(want).max())):
        return None
    return a, b


def _in_dim(layer: MessagePassing) -> int:
    """The input width a layer expects (its first parameter's input side)."""
    width = getattr(layer, "in_channels", None)
    if isinstance(width, int):
        return width
    for module in layer.modules():
        if isinstance(module, nn.Linear):
            return int(module.in_features)
    raise OperatorError.build(
        "layer",
        _WHERE,
        "an in_channels attribute or a Linear part (the input width)",
        type(layer).__name__,
    )
