"""A small numpy evaluator for the index arithmetic of ReverseSequence decompositions.

The restore pass runs the subgraph that computes a gather's result on probe inputs. It
understands only the shape, index and gather ops such subgraphs are made of; any other
op makes the evaluation (and so the match) fail with the op's name, which is the safe
answer.
"""

from __future__ import annotations

__all__ = ["evaluate_op", "SUPPORTED_OPS", "UnsupportedOp", "evaluate_node"]

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from revseq.ops.vocabulary import ONNX_DOMAINS


class UnsupportedOp(Exception):
    """The evaluator does not model this op (or this use of it)."""


def _int(attrs: dict[str, Any], name: str, default: int) -> int:
    value = attrs.get(name)
    return default if value is None else int(value)


def _axes(args: list[np.ndarray | None], attrs: dict[str, Any]) -> list[int] | None:
    if len(args) > 1 and args[1] is not None:
        return [int(a) for a in np.asarray(args[1]).reshape(-1)]
    value = attrs.get("axes")
    return None if value is None else [int(a) for a in value]


def _unsqueeze(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    axes = _axes(args, attrs) or []
    rank = args[0].ndim + len(axes)
    return np.expand_dims(args[0], tuple(sorted(a % rank for a in axes)))


def _squeeze(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    axes = _axes(args, attrs)
    if axes is None:
        return np.squeeze(args[0])
    return np.squeeze(args[0], axis=tuple(a % args[0].ndim for a in axes))


def _reshape(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    data, shape = args[0], [int(d) for d in np.asarray(args[1]).reshape(-1)]
    if not _int(attrs, "allowzero", 0):
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return data.reshape(shape)


def _clamped_slice(start: int, end: int, step: int, size: int) -> slice:
    """ONNX Slice bounds (negative from the end, clamped) as a Python slice."""
    if step > 0:
        start = max(0, min(size, start + size if start < 0 else start))
        end = max(0, min(size, end + size if end < 0 else end))
        return slice(start, end, step)
    start = max(-1, min(size - 1, start + size if start < 0 else start))
    end = max(-1, min(size - 1, end + size if end < 0 else end))
    return slice(start, None if end < 0 else end, step)


def _slice(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    data = args[0]
    starts = np.asarray(args[1]).reshape(-1)
    ends = np.asarray(args[2]).reshape(-1)
    axes = (
        np.asarray(args[3]).reshape(-1)
        if len(args) > 3 and args[3] is not None
        else np.arange(len(starts))
    )
    steps = (
        np.asarray(args[4]).reshape(-1)
        if len(args) > 4 and args[4] is not None
        else np.ones(len(starts), dtype=np.int64)
    )
    index = [slice(None)] * data.ndim
    for first, last, axis, stride in zip(starts, ends, axes, steps, strict=True):
        index[int(axis)] = _clamped_slice(
            int(first), int(last), int(stride), data.shape[int(axis)]
        )
    return data[tuple(index)]


def _gather_nd(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    data, indices = args[0], np.asarray(args[1])
    batch_dims = _int(attrs, "batch_dims", 0)
    batch_shape = data.shape[:batch_dims]
    depth = indices.shape[-1]
    flat_batch = int(np.prod(batch_shape, dtype=np.int64))
    data_b = data.reshape((flat_batch, *data.shape[batch_dims:]))
    index_b = indices.reshape((flat_batch, -1, depth)) if indices.size else None
    out_shape = (*indices.shape[:-1], *data.shape[batch_dims + depth :])
    if index_b is None:
        return np.empty(out_shape, dtype=data.dtype)
    rows = [
        data_b[b][tuple(index_b[b][:, k] for k in range(depth))] for b in range(flat_batch)
    ]
    return np.stack(rows).reshape(out_shape)


def _gather_elements(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    axis = _int(attrs, "axis", 0)
    indices = np.asarray(args[1])
    data = args[0]
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    return np.take_along_axis(data, indices, axis=axis % data.ndim)


def _gather(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    axis = _int(attrs, "axis", 0) % args[0].ndim
    indices = np.asarray(args[1])
    indices = np.where(indices < 0, indices + args[0].shape[axis], indices)
    return np.take(args[0], indices, axis=axis)


def _shape(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    dims = np.array(args[0].shape, dtype=np.int64)
    start = _int(attrs, "start", 0)
    end = attrs.get("end")
    return dims[start : None if end is None else int(end)]


def _cast(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    target = ir.DataType(_int(attrs, "to", 0))
    if not (target.is_integer() or target == ir.DataType.BOOL):
        raise UnsupportedOp("Cast to a non-integer type")
    return args[0].astype(target.numpy())


def _constant_of_shape(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    value = attrs.get("value")
    fill = value.numpy().reshape(-1)[0] if value is not None else np.float32(0)
    return np.full(tuple(int(d) for d in np.asarray(args[0]).reshape(-1)), fill)


def _cumsum(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    if _int(attrs, "reverse", 0):
        raise UnsupportedOp("reverse CumSum")
    axis = int(np.asarray(args[1]).reshape(-1)[0])
    total = np.cumsum(args[0], axis=axis, dtype=args[0].dtype)
    if _int(attrs, "exclusive", 0):
        total = total - args[0]
    return total


def _range(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    start, limit, delta = (np.asarray(a).reshape(()) for a in args)
    return np.arange(start, limit, delta, dtype=np.asarray(args[0]).dtype)


def _reduce(fn: Callable[..., Any]) -> Callable[[list[Any], dict[str, Any]], Any]:
    def reduce(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
        axes = _axes(args, attrs)
        keep = bool(_int(attrs, "keepdims", 1))
        axis = None if axes is None else tuple(axes)
        return fn(args[0], axis=axis, keepdims=keep, dtype=args[0].dtype)

    return reduce


def _flatten(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    axis = _int(attrs, "axis", 1) % (args[0].ndim + 1) if args[0].ndim else 0
    shape = args[0].shape
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    return args[0].reshape(rows, int(np.prod(shape[axis:], dtype=np.int64)))


def _expand(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    shape = tuple(int(d) for d in np.asarray(args[1]).reshape(-1))
    return np.broadcast_to(args[0], np.broadcast_shapes(args[0].shape, shape)).copy()


def _clip(args: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    """Clip with min/max inputs (opset >= 11) or attributes (older); either may be absent."""
    low = args[1] if len(args) > 1 and args[1] is not None else attrs.get("min")
    high = args[2] if len(args) > 2 and args[2] is not None else attrs.get("max")
    out = np.asarray(args[0])
    if low is not None:
        out = np.maximum(out, np.asarray(low, dtype=out.dtype))
    if high is not None:
        out = np.minimum(out, np.asarray(high, dtype=out.dtype))
    return out


def _binary(fn: Callable[[Any, Any], Any]) -> Callable[[list[Any], dict[str, Any]], Any]:
    return lambda args, _: fn(args[0], args[1])


_EVALUATORS: dict[str, Callable[[list[Any], dict[str, Any]], Any]] = {
    "Identity": lambda args, _: args[0],
    "Shape": _shape,
    "Size": lambda args, _: np.array(args[0].size, dtype=np.int64),
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "GatherND": _gather_nd,
    "Slice": _slice,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Expand": _expand,
    "Concat": lambda args, attrs: np.concatenate(args, axis=_int(attrs, "axis", 0)),
    "Cast": _cast,
    "ConstantOfShape": _constant_of_shape,
    "CumSum": _cumsum,
    "Range": _range,
    "ReduceProd": _reduce(np.prod),
    "ReduceSum": _reduce(np.sum),
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Neg": lambda args, _: -args[0],
    "Min": lambda args, _: np.minimum.reduce(np.broadcast_arrays(*args)),
    "Max": lambda args, _: np.maximum.reduce(np.broadcast_arrays(*args)),
    "Less": _binary(np.less),
    "LessOrEqual": _binary(np.less_equal),
    "Greater": _binary(np.greater),
    "GreaterOrEqual": _binary(np.greater_equal),
    "Equal": _binary(np.equal),
    "Not": lambda args, _: np.logical_not(args[0]),
    "And": _binary(np.logical_and),
    "Or": _binary(np.logical_or),
    "Where": lambda args, _: np.where(args[0], args[1], args[2]),
    "Clip": _clip,
    "Tile": lambda args, _: np.tile(args[0], tuple(int(r) for r in np.asarray(args[1]))),
    "Transpose": lambda args, attrs: np.transpose(args[0], attrs.get("perm")),
}

SUPPORTED_OPS = frozenset(_EVALUATORS) | {"Constant"}
"""Op types (default domain) the evaluator models."""


def _attributes(node: ir.Node) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, attr in node.attributes.items():
        if not isinstance(attr, ir.Attr):
            raise UnsupportedOp(f"{node.op_type} with a reference attribute {name}")
        values[name] = attr.value
    return values


def evaluate_op(op_type: str, args: list[np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    """The output of a default-domain ``op_type`` on ``args`` (the builder folds with it).

    Raises:
        UnsupportedOp: The evaluator does not model ``op_type``.
    """
    evaluator = _EVALUATORS.get(op_type)
    if evaluator is None:
        raise UnsupportedOp(op_type)
    return np.asarray(evaluator(args, attrs))


def evaluate_node(node: ir.Node, args: list[np.ndarray | None]) -> np.ndarray:
    """The output of ``node`` (single-output, default domain) for input arrays ``args``."""
    if node.domain not in ONNX_DOMAINS or len(node.outputs) != 1:
        raise UnsupportedOp(f"{node.domain}::{node.op_type}")
    attrs = _attributes(node)
    if node.op_type == "Constant":
        value = attrs.get("value")
        if value is None:
            raise UnsupportedOp("Constant without a tensor value")
        return value.numpy()
    evaluator = _EVALUATORS.get(node.op_type)
    if evaluator is None:
        raise UnsupportedOp(node.op_type)
    try:
        with np.errstate(all="ignore"):
            return np.asarray(evaluator(args, attrs))
    except UnsupportedOp:
        raise
    except Exception as e:
        raise UnsupportedOp(f"{node.op_type} failed on the probe: {e}") from e
