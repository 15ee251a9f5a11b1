"""Decomposition forms of ReverseSequence, each written once over an ``op`` node builder.

A form takes the node's data and lengths values and a :class:`Signature` (what is known
about the node at rewrite time: axes, rank, static dims, constant lengths, opset, the op
types the target allows) and emits standard ONNX nodes through ``op``, returning the value
that replaces the node's output. Whatever the signature makes static is emitted as a
constant, so a fully static node with constant lengths needs no index arithmetic at run
time.

Every form computes the same *source index* along the time axis::

    L   = min(sequence_lens, T)                 # lengths clamped to [0, T]
    src = where(t < L, L - 1 - t, t)            # t = 0 .. T-1, broadcast against L

and gathers with it. Negative lengths act as 0 and lengths above T as T: ONNX leaves
invalid lengths unspecified, and clamping is deterministic and never reads out of bounds.
"""

from __future__ import annotations

__all__ = [
    "Signature",
    "FORMS",
    "Form",
    "emit",
    "source_index_numpy",
]

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import onnx_ir as ir

from revseq.ops.errors import StrategyError

logger = logging.getLogger(__name__)

# Constants larger than this many elements are computed at run time instead of being
# folded into the model, so a static shape never bloats the file.
_MAX_FOLDED_ELEMENTS = 1 << 20


class OpBuilder(Protocol):
    """What a form needs from a builder: ``op.<OpType>(*inputs, **attributes)``."""

    def __getattr__(self, op_type: str) -> Callable[..., ir.Value]: ...


@dataclasses.dataclass(frozen=True)
class Signature:
    """What is known about one ReverseSequence node when it is rewritten.

    Attributes:
        batch_axis: Batch axis, normalised to be non-negative when the rank is known.
        time_axis: Time axis, normalised likewise.
        rank: Rank of the data input, or None when unknown.
        dims: Static size of each data dimension (None where symbolic or unknown);
            None when the rank is unknown.
        dtype: Element type of the data, if known.
        lens_dtype: Element type of ``sequence_lens`` (INT64 or INT32).
        lens: The lengths when they are a constant, else None.
        opset: Version of the default ONNX domain the emitted nodes must belong to.
        allowed: Op types the target accepts, or None for any standard op.
    """

    batch_axis: int
    time_axis: int
    rank: int | None
    dims: tuple[int | None, ...] | None
    dtype: ir.DataType | None
    lens_dtype: ir.DataType
    lens: np.ndarray | None
    opset: int
    allowed: frozenset[str] | None = None

    @property
    def lead_rank(self) -> int:
        """Number of leading axes that hold both the batch and the time axis."""
        return max(self.batch_axis, self.time_axis) + 1

    def dim(self, axis: int) -> int | None:
        """The static size of ``axis``, or None."""
        if self.dims is None:
            return None
        return self.dims[axis]

    def lead_dims(self) -> tuple[int, ...] | None:
        """Static sizes of all leading axes, or None if any is not static."""
        if self.dims is None:
            return None
        lead = self.dims[: self.lead_rank]
        if any(d is None for d in lead):
            return None
        return tuple(d for d in lead if d is not None)

    def allows(self, *op_types: str) -> bool:
        """Whether the target accepts every one of ``op_types``."""
        return self.allowed is None or all(t in self.allowed for t in op_types)


def source_index_numpy(lens: np.ndarray, time_len: int) -> np.ndarray:
    """The source index as a [T, B] int64 array: row t, column i reads time step src."""
    clamped = np.clip(lens.astype(np.int64), 0, time_len)
    steps = np.arange(time_len, dtype=np.int64)[:, None]
    return np.where(steps < clamped[None, :], clamped[None, :] - 1 - steps, steps)


# ---------------------------------------------------------------------------------------
# Small emitters shared by the forms
# ---------------------------------------------------------------------------------------


def _const(op: OpBuilder, array: np.ndarray | int | Sequence[int]) -> ir.Value:
    return op.Constant(value=ir.tensor(np.asarray(array, dtype=np.int64)))


def _unsqueeze(op: OpBuilder, value: ir.Value, axes: Sequence[int], sig: Signature) -> ir.Value:
    if not axes:
        return value
    if sig.opset >= 13:
        return op.Unsqueeze(value, _const(op, list(axes)))
    return op.Unsqueeze(value, axes=list(axes))


def _shape(op: OpBuilder, data: ir.Value) -> ir.Value:
    return op.Shape(data)


def _dim_scalar(op: OpBuilder, data: ir.Value, axis: int, sig: Signature) -> ir.Value:
    """A scalar int64 with the size of ``axis``: a constant when static."""
    static = sig.dim(axis) if axis >= 0 else None
    if static is not None:
        return _const(op, static)
    return op.Gather(_shape(op, data), _const(op, axis))


def _place(
    op: OpBuilder, vector: ir.Value, axis: int, rank: int, sig: Signature
) -> ir.Value:
    """Reshape a 1-D ``vector`` to ``rank`` dims with its elements along ``axis``."""
    return _unsqueeze(op, vector, [a for a in range(rank) if a != axis], sig)


def _pad_trailing(
    op: OpBuilder, value: ir.Value, data: ir.Value, lead: int, sig: Signature
) -> ir.Value:
    """Append size-1 axes so a ``lead``-rank value broadcasts against the whole data.

    With an unknown rank, the ones are appended by a Reshape to
    ``Concat(Shape(value), ones(rank - lead))``: its leading entries equal the input's own
    dims, so Reshape's copy-a-zero rule keeps zero-sized dims right.
    """
    if sig.rank is not None:
        return _unsqueeze(op, value, list(range(lead, sig.rank)), sig)
    extra = op.Sub(op.Shape(op.Shape(data)), _const(op, [lead]))
    ones = op.ConstantOfShape(extra, value=ir.tensor(np.array([1], dtype=np.int64)))
    return op.Reshape(value, op.Concat(op.Shape(value), ones, axis=0))


def _lengths(
    op: OpBuilder, lens: ir.Value, time_len: ir.Value, sig: Signature
) -> ir.Value:
    """The lengths as int64 [B], clamped to at most T (negatives act as 0 downstream)."""
    if sig.lens_dtype != ir.DataType.INT64:
        lens = op.Cast(lens, to=ir.DataType.INT64)
    if sig.allows("Less", "Where"):
        return op.Where(op.Less(time_len, lens), time_len, lens)
    if sig.allows("Min") and sig.opset >= 12:
        return op.Min(lens, time_len)
    raise StrategyError("clamping the lengths needs Less+Where or Min (opset >= 12)")


def _iota(op: OpBuilder, size: ir.Value, static: int | None, sig: Signature) -> ir.Value:
    """0 .. size-1 as int64: a constant when static, else Range or a CumSum of ones."""
    if static is not None and static <= _MAX_FOLDED_ELEMENTS:
        return _const(op, np.arange(static, dtype=np.int64))
    if sig.allows("Range"):
        return op.Range(_const(op, 0), size, _const(op, 1))
    if sig.allows("ConstantOfShape", "CumSum", "Reshape"):
        ones = op.ConstantOfShape(
            op.Reshape(size, _const(op, [1])), value=ir.tensor(np.array([1], np.int64))
        )
        return op.CumSum(ones, _const(op, 0), exclusive=1)
    raise StrategyError("a run-time index needs Range or ConstantOfShape+CumSum")


def _select_source(
    op: OpBuilder, steps: ir.Value, lens: ir.Value, sig: Signature
) -> ir.Value:
    """``where(t < L, L - 1 - t, t)`` for broadcastable ``steps`` and ``lens``."""
    reversed_steps = op.Sub(op.Sub(lens, _const(op, 1)), steps)
    if sig.allows("Less", "Where"):
        return op.Where(op.Less(steps, lens), reversed_steps, steps)
    if sig.allows("Max", "Min", "Mul", "Add") and sig.opset >= 12:
        # inside = 1 where t < L else 0, by integer clamping; src = t + inside*(L-1-2t).
        inside = op.Min(op.Max(op.Sub(lens, steps), _const(op, 0)), _const(op, 1))
        return op.Add(steps, op.Mul(inside, op.Sub(reversed_steps, steps)))
    raise StrategyError("selecting the source step needs Less+Where or Min+Max+Mul+Add")


def _source_index(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """The source index over the leading axes: T along time, B along batch, 1 elsewhere."""
    t, b, lead = sig.time_axis, sig.batch_axis, sig.lead_rank
    time_static = sig.dim(t)
    if time_static is not None and sig.lens is not None:
        table = source_index_numpy(sig.lens, time_static)  # [T, B]
        if t > b:
            table = table.T
        shape = [1] * lead
        shape[t], shape[b] = table.shape[0 if t < b else 1], table.shape[1 if t < b else 0]
        return _const(op, table.reshape(shape))
    time_len = _dim_scalar(op, data, t, sig)
    clamped = _lengths(op, lens, time_len, sig)
    steps = _place(op, _iota(op, time_len, time_static, sig), t, lead, sig)
    return _select_source(op, steps, _place(op, clamped, b, lead, sig), sig)


def _lead_shape(op: OpBuilder, data: ir.Value, sig: Signature) -> ir.Value:
    static = sig.lead_dims()
    if static is not None:
        return _const(op, list(static))
    return op.Slice(_shape(op, data), _const(op, [0]), _const(op, [sig.lead_rank]))


def _axis_grid(op: OpBuilder, data: ir.Value, axis: int, sig: Signature) -> ir.Value:
    """0 .. d-1 along ``axis`` of the leading axes, size 1 on the others."""
    size = _dim_scalar(op, data, axis, sig)
    return _place(op, _iota(op, size, sig.dim(axis), sig), axis, sig.lead_rank, sig)


# ---------------------------------------------------------------------------------------
# The forms
# ---------------------------------------------------------------------------------------


def gather_elements(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """The design card's form: GatherElements with an index as large as the data."""
    src = _source_index(op, data, lens, sig)
    src = _pad_trailing(op, src, data, sig.lead_rank, sig)
    index = op.Expand(src, _shape(op, data))
    return op.GatherElements(data, index, axis=sig.time_axis)


def gather_nd(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """GatherND over the leading axes: one index tuple per row of trailing elements.

    The axes before the time axis are GatherND batch dims; the tuple holds the source
    step and the coordinates of the leading axes after the time axis. Without
    ``batch_dims`` (WebNN), every leading axis gets a coordinate.
    """
    t, lead = sig.time_axis, sig.lead_rank
    batch_dims = t if sig.allows("GatherND:batch_dims") else 0
    lead_shape = _lead_shape(op, data, sig)
    src = _source_index(op, data, lens, sig)
    columns = []
    for axis in range(batch_dims, lead):
        grid = src if axis == t else _axis_grid(op, data, axis, sig)
        columns.append(_unsqueeze(op, op.Expand(grid, lead_shape), [lead], sig))
    index = columns[0] if len(columns) == 1 else op.Concat(*columns, axis=lead)
    return op.GatherND(data, index, batch_dims=batch_dims)


def gather_rows(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """Gather on a [rows, rest] view with a flat row index; Reshape back.

    onnxruntime's Gather loses string elements when a gathered slice holds more than one
    (see BACKENDS.md), so string data is gathered with GatherND on the same view.
    """
    t, lead = sig.time_axis, sig.lead_rank
    src = _source_index(op, data, lens, sig)
    static = sig.lead_dims()
    flat: ir.Value | None = None
    for axis in range(lead):
        coord = src if axis == t else _axis_grid(op, data, axis, sig)
        if static is not None:
            stride: ir.Value = _const(op, int(np.prod(static[axis + 1 :], dtype=np.int64)))
        elif axis + 1 < lead:
            stride = op.ReduceProd(
                op.Slice(_shape(op, data), _const(op, [axis + 1]), _const(op, [lead])),
                keepdims=0,
            )
        else:
            stride = _const(op, 1)
        term = coord if axis + 1 == lead else op.Mul(coord, stride)
        flat = term if flat is None else op.Add(flat, term)
    assert flat is not None
    if static is not None:
        flat = op.Expand(flat, _const(op, list(static)))
    else:
        flat = op.Expand(flat, _lead_shape(op, data, sig))
    rows = op.Flatten(data, axis=lead)
    if sig.dtype == ir.DataType.STRING:
        gathered = op.GatherND(rows, _unsqueeze(op, flat, [lead], sig))
    else:
        gathered = op.Gather(rows, flat, axis=0)
    return op.Reshape(gathered, _shape(op, data), allowzero=1)


@dataclasses.dataclass(frozen=True)
class Form:
    """A named decomposition, the op types it emits and the opset it needs."""

    name: str
    build: Callable[[OpBuilder, ir.Value, ir.Value, Signature], ir.Value]
    op_types: frozenset[str]
    min_opset: int
    description: str

    def available(self, sig: Signature) -> str | None:
        """None if the form fits ``sig``, else the reason it does not."""
        if sig.opset < self.min_opset:
            return f"strategy {self.name!r} needs opset >= {self.min_opset}"
        return None


_INDEX_OPS = frozenset({"Constant", "Shape", "Gather", "Slice", "Cast", "Unsqueeze", "Range",
                        "Less", "Where", "Sub", "Expand"})

FORMS: dict[str, Form] = {
    form.name: form
    for form in (
        Form(
            "gather_elements",
            gather_elements,
            _INDEX_OPS | {"GatherElements", "ConstantOfShape", "Concat", "Reshape", "Size"},
            11,
            "GatherElements with a data-sized index (the design card's form)",
        ),
        Form(
            "gather_nd",
            gather_nd,
            _INDEX_OPS | {"GatherND", "Concat"},
            12,
            "GatherND gathering whole rows with (time, batch) index tuples",
        ),
        Form(
            "gather_rows",
            gather_rows,
            _INDEX_OPS | {"Gather", "GatherND", "Flatten", "Reshape", "Mul", "Add",
                          "ReduceProd"},
            14,
            "Gather of whole rows of a flattened [rows, rest] view",
        ),
    )
}


def emit(
    op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature, strategy: str
) -> ir.Value:
    """Emit the named form for one node and return the value replacing its output."""
    form = FORMS.get(strategy)
    if form is None:
        raise StrategyError(
            f"unknown strategy {strategy!r}; choose one of {', '.join(sorted(FORMS))}"
        )
    reason = form.available(sig)
    if reason is not None:
        raise StrategyError(reason)
    return form.build(op, data, lens, sig)

