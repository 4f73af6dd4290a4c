"""The :class:`FeatureStore` interface: tensors keyed by (group, attribute).

As in PyG's ``FeatureStore``, a tensor is addressed by a :class:`Key` of a group
(``"node"``, ``"edge"``, or a node/edge type) and an attribute (``"x"``, ``"y"``).
The public methods validate and then call the backend's private hooks (a
non-virtual interface), so every backend gets the same checks and errors:

* ``get(key, ids)`` checks the key and the ids (1-D integers in range), allocates the
  output (pinned on request when CUDA exists) and calls ``_gather``;
* ``put(key, value)`` checks the dtype and the non-finite policy and calls ``_put``;
* ``schema()`` returns the dtype and shape of every tensor from ``_schema``.

Non-finite policy: ``put`` rejects NaN/inf in float tensors, naming the first
offending row and column, unless ``allow_nonfinite=True``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np
import torch

from strata.storage._checks import describe_nonfinite, first_nonfinite
from strata.storage.errors import FeatureError
from strata.storage.features.gather import IdsLike, alloc_rows, validate_ids

SUPPORTED_DTYPES = (
    torch.float16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
)


@dataclass(frozen=True, slots=True)
class Key:
    """Address of one tensor: a group (``node``, ``edge``, a type) and an attribute."""

    group: str
    attr: str

    def __str__(self) -> str:
        return f"{self.group}/{self.attr}"


KeyLike = Key | tuple[str, str]


@dataclass(frozen=True, slots=True)
class FeatureSchema:
    """The dtype and full shape (rows first) of one stored tensor."""

    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def num_rows(self) -> int:
        """Number of rows (the first dimension)."""
        return self.shape[0]

    @property
    def row_shape(self) -> tuple[int, ...]:
        """Shape of one row."""
        return self.shape[1:]


def as_key(key: KeyLike) -> Key:
    """Accept a :class:`Key` or a ``(group, attr)`` tuple."""
    if isinstance(key, Key):
        return key
    if (
        isinstance(key, tuple)
        and len(key) == 2
        and all(isinstance(k, str) for k in key)
    ):
        return Key(*key)
    raise FeatureError.build("key", "FeatureStore", "a Key(group, attr)", repr(key))


def to_numpy(value: torch.Tensor | np.ndarray, subject: str, where: str) -> np.ndarray:
    """A CPU numpy view of a tensor/array, checking the supported dtypes."""
    if isinstance(value, torch.Tensor):
        if value.dtype not in SUPPORTED_DTYPES:
            raise FeatureError.build(
                subject,
                where,
                f"one of {[str(d) for d in SUPPORTED_DTYPES]}",
                str(value.dtype),
            )
        array = value.detach().cpu().numpy()
    elif isinstance(value, np.ndarray):
        array = value
        if array.dtype.kind not in "biuf" or array.dtype.byteorder == ">":
            raise FeatureError.build(
                subject, where, "a bool, integer or float array", str(array.dtype)
            )
    else:
        raise FeatureError.build(
            subject, where, "a torch.Tensor or numpy array", type(value).__name__
        )
    if array.ndim == 0:
        raise FeatureError.build(subject, where, "at least 1 dimension", "a scalar")
    return np.ascontiguousarray(array)


class FeatureStore(abc.ABC):
    """Tensors keyed by (group, attr), gathered by row id.

    Examples:
        >>> import torch
        >>> from strata.storage.features import InMemoryFeatureStore
        >>> store = InMemoryFeatureStore()
        >>> store.put(Key("node", "x"), torch.arange(6.0).reshape(3, 2))
        >>> store.get(("node", "x"), torch.tensor([2, 0]))
        tensor([[4., 5.],
                [0., 1.]])
        >>> store.schema()[Key("node", "x")].shape
        (3, 2)
    """

    def get(
        self,
        key: KeyLike,
        ids: IdsLike | None = None,
        *,
        out: torch.Tensor | None = None,
        pin_memory: bool = False,
    ) -> torch.Tensor:
        """Gather rows ``ids`` of tensor ``key`` (all rows when ``ids`` is None).

        Args:
            key: the tensor's key.
            ids: row ids, 1-D integers in ``[0, num_rows)``; ``None`` returns the
                whole tensor (a zero-copy, read-only view where the backend allows:
                do not write to it).
            out: optional preallocated contiguous CPU tensor to fill, of shape
                ``(len(ids), *row_shape)`` and the stored dtype.
            pin_memory: allocate the output in pinned memory (when CUDA exists).

        Returns:
            A tensor of shape ``(len(ids), *row_shape)``.

        Raises:
            FeatureError: on an unknown key, bad ids, or a mismatched ``out``.
        """
        key = as_key(key)
        schema = self._lookup(key, "FeatureStore.get")
        if ids is None:
            return self._get_all(key)
        where = f"FeatureStore.get({key})"
        ids_array = validate_ids(ids, schema.num_rows, where)
        shape = (ids_array.shape[0], *schema.row_shape)
        if out is None:
            out = alloc_rows(
                shape[0], schema.row_shape, schema.dtype, pin_memory=pin_memory
            )
        elif (
            out.dtype != schema.dtype
            or tuple(out.shape) != shape
            or out.device.type != "cpu"
            or not out.is_contiguous()
        ):
            raise FeatureError.build(
                "out",
                where,
                f"a contiguous CPU {schema.dtype} tensor of shape {shape}",
                f"{out.dtype} {tuple(out.shape)} on {out.device}",
            )
        return self._gather(key, ids_array, out)

    def put(
        self,
        key: KeyLike,
        value: torch.Tensor | np.ndarray,
        *,
        allow_nonfinite: bool = False,
    ) -> None:
        """Store (or replace) tensor ``key``.

        Args:
            key: the tensor's key.
            value: a tensor or numpy array, rows first, of a supported dtype.
            allow_nonfinite: accept NaN/inf in float tensors (rejected by default).

        Raises:
            FeatureError: on an unsupported dtype, a scalar, NaN/inf (by default), or
                a shape the backend cannot hold.
        """
        key = as_key(key)
        where = f"FeatureStore.put({key})"
        array = to_numpy(value, "value", where)
        if not allow_nonfinite:
            index = first_nonfinite(array)
            if index is not None:
                raise FeatureError.build(
                    "value",
                    where,
                    "finite values",
                    describe_nonfinite(array, index),
                    "pass allow_nonfinite=True to store NaN/inf on purpose",
                )
        self._put(key, array)

    def schema(self) -> dict[Key, FeatureSchema]:
        """The dtype and shape of every stored tensor."""
        return dict(self._schema())

    def keys(self) -> list[Key]:
        """Keys of all stored tensors, sorted."""
        return sorted(self._schema(), key=str)

    def __contains__(self, key: object) -> bool:
        try:
            return as_key(key) in self._schema()  # type: ignore[arg-type]
        except FeatureError:
            return False

    def _lookup(self, key: Key, where: str) -> FeatureSchema:
        schema = self._schema()
        if key not in schema:
            raise FeatureError.build(
                "key", where, f"one of {sorted(str(k) for k in schema)}", str(key)
            )
        return schema[key]

    # ------------------------------------------------------------ backend hooks
    @abc.abstractmethod
    def _schema(self) -> dict[Key, FeatureSchema]:
        """Schema of every stored tensor."""

    @abc.abstractmethod
    def _get_all(self, key: Key) -> torch.Tensor:
        """The whole tensor ``key`` (exists)."""

    @abc.abstractmethod
    def _gather(self, key: Key, ids: np.ndarray, out: torch.Tensor) -> torch.Tensor:
        """Fill ``out`` with rows ``ids`` (validated) of ``key`` (exists)."""

    @abc.abstractmethod
    def _put(self, key: Key, array: np.ndarray) -> None:
        """Store a validated, C-contiguous array under ``key``."""
