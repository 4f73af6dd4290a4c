"""Frames for the process executor: a small JSON header plus raw buffers, no pickle.

A message is a list of frames: ``[header, *buffers]``. The header is JSON; it holds
the message kind, routing fields and a *spec* describing the value, whose large
parts live in the buffers:

================================  =============================================
value                             spec (``b``: index of its buffer)
================================  =============================================
``None``, bool, int, float, str   ``{"j": value}`` (lists of them: ``{"jl": [...]}``)
numpy scalar                      ``{"ns": dtype, "v": value}``
numpy array                       ``{"nd": dtype, "s": shape, "b": i}``, raw bytes
torch tensor (moved to CPU)       ``{"pt": dtype, "s": shape, "b": i}``, raw bytes
Arrow RecordBatch / Table         ``{"ab": i}`` / ``{"at": i}``, an Arrow IPC stream
bytes                             ``{"by": i}``
dict (str keys), list, tuple      ``{"d": {...}}``, ``{"l": [...]}``, ``{"t": [...]}``
================================  =============================================

Anything else raises :class:`~strata.engine.errors.WireError`: data is never pickled, so
a worker cannot be made to run code by what it receives. Decoding is zero-copy where the
library allows (numpy, Arrow IPC, torch) over the received frame buffers.

Examples:
    >>> import numpy as np
    >>> frames = pack({"k": "d"}, {"x": np.arange(3), "n": 7, "tags": ["a", "b"]})
    >>> header, value = unpack(frames)
    >>> header["k"], value["x"].tolist(), value["n"], value["tags"]
    ('d', [0, 1, 2], 7, ['a', 'b'])
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from strata.engine.errors import WireError

Buffer = Any  # bytes, memoryview, pa.Buffer, zmq.Frame: anything with the buffer API
_SCALARS = (str, int, float, bool, type(None))
_ARRAY_KINDS = "biufcmMSU"


def pack(header: dict[str, Any], value: Any = None) -> list[Buffer]:
    """Return the frames of one message: ``header`` plus ``value`` under ``"v"``."""
    buffers: list[Buffer] = []
    spec = _encode(value, buffers)
    head = json.dumps({**header, "v": spec}, separators=(",", ":"))
    return [head.encode(), *buffers]


def unpack(frames: Sequence[Buffer]) -> tuple[dict[str, Any], Any]:
    """Inverse of :func:`pack`: return ``(header, value)``."""
    header: dict[str, Any] = json.loads(bytes(frames[0]))
    value = _decode(header.pop("v"), frames[1:])
    return header, value


def _encode(value: Any, buffers: list[Buffer]) -> Any:
    if isinstance(value, _SCALARS) and not isinstance(value, np.generic):
        return {"j": value}
    if isinstance(value, np.generic) and value.dtype.kind in _ARRAY_KINDS:
        return {"ns": value.dtype.str, "v": value.item()}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ARRAY_KINDS:
            raise WireError(f"numpy array of dtype {value.dtype} (objects or records)")
        # (not np.ascontiguousarray: it turns a 0-d array into a 1-d one)
        array = value if value.flags.c_contiguous else value.copy(order="C")
        buffers.append(array.reshape(-1).view(np.uint8) if array.size else b"")
        return {"nd": array.dtype.str, "s": list(array.shape), "b": len(buffers) - 1}
    if isinstance(value, pa.RecordBatch | pa.Table):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, value.schema) as writer:
            writer.write(value)
        buffers.append(sink.getvalue())
        kind = "ab" if isinstance(value, pa.RecordBatch) else "at"
        return {kind: len(buffers) - 1}
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        raw = tensor.reshape(-1).view(torch.uint8).numpy() if tensor.numel() else b""
        buffers.append(raw)
        dtype = str(tensor.dtype).removeprefix("torch.")
        return {"pt": dtype, "s": list(tensor.shape), "b": len(buffers) - 1}
    if isinstance(value, bytes | bytearray):
        buffers.append(bytes(value))
        return {"by": len(buffers) - 1}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise WireError("dict with non-string keys")
        return {"d": {k: _encode(v, buffers) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        if all(type(v) in _SCALARS for v in value):
            return {"jl" if isinstance(value, list) else "jt": list(value)}
        return {
            "l" if isinstance(value, list) else "t": [
                _encode(v, buffers) for v in value
            ]
        }
    raise WireError(f"{type(value).__module__}.{type(value).__qualname__}")


def _decode(spec: dict[str, Any], buffers: Sequence[Buffer]) -> Any:
    kind, payload = next(iter(spec.items()))
    if kind == "j" or kind == "jl":
        return payload
    if kind == "jt":
        return tuple(payload)
    if kind == "ns":
        return np.dtype(payload).type(spec["v"])
    if kind == "nd":
        array = np.frombuffer(_view(buffers[spec["b"]]), dtype=np.dtype(payload))
        return array.reshape(tuple(spec["s"]))
    if kind in ("ab", "at"):
        reader = pa.ipc.open_stream(pa.py_buffer(_view(buffers[payload])))
        return reader.read_next_batch() if kind == "ab" else reader.read_all()
    if kind == "pt":
        return _decode_tensor(payload, spec["s"], buffers[spec["b"]])
    if kind == "by":
        return bytes(_view(buffers[payload]))
    if kind == "d":
        return {k: _decode(v, buffers) for k, v in payload.items()}
    if kind == "l":
        return [_decode(v, buffers) for v in payload]
    if kind == "t":
        return tuple(_decode(v, buffers) for v in payload)
    raise WireError(f"unknown value spec {kind!r}")


def _decode_tensor(dtype_name: str, shape: list[int], buffer: Buffer) -> Any:
    import torch

    dtype = getattr(torch, dtype_name)
    view = _view(buffer)
    if len(view) == 0:
        return torch.empty(shape, dtype=dtype)
    # The frame's memory belongs to this message alone, so writing through the
    # tensor is harmless even though the buffer is flagged read-only.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.frombuffer(view, dtype=dtype).reshape(tuple(shape))


def _view(buffer: Buffer) -> memoryview:
    inner: Any = getattr(buffer, "buffer", buffer)  # zmq.Frame exposes .buffer
    return memoryview(inner).cast("B")
