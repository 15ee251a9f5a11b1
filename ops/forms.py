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
import functools
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
        lens_dtype: Element type of ``sequence_lens`` (INT64 or INT32), None if unknown.
        lens: The lengths when they are a constant (a tuple, so signatures hash), else None.
        opset: Version of the default ONNX domain the emitted nodes must belong to.
        allowed: Op types the target accepts, or None for any standard op.
    """

    batch_axis: int
    time_axis: int
    rank: int | None
    dims: tuple[int | None, ...] | None
    dtype: ir.DataType | None
    lens_dtype: ir.DataType | None
    lens: tuple[int, ...] | None
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

    def row_size(self) -> int | None:
        """Elements per row of the axes after the leading ones, when static."""
        if self.dims is None or any(d is None for d in self.dims[self.lead_rank :]):
            return None
        return int(np.prod([d for d in self.dims[self.lead_rank :] if d is not None]))

    def index_covers_data(self) -> bool:
        """Whether the [T, B] source index already has the data's shape (rows of 1)."""
        return self.lead_rank == 2 and self.row_size() == 1

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


def _const(
    op: OpBuilder, array: np.ndarray | int | Sequence[int], dtype: type = np.int64
) -> ir.Value:
    return op.Constant(value=_small_tensor(np.asarray(array, dtype=dtype)))


@functools.lru_cache(maxsize=4096)
def _cached_tensor(dtype: str, shape: tuple[int, ...], data: bytes) -> ir.Tensor:
    return ir.Tensor(np.frombuffer(data, dtype=dtype).reshape(shape))


def _small_tensor(array: np.ndarray) -> ir.Tensor:
    """An ir.Tensor, shared between nodes for small arrays (read-only: never mutated)."""
    if array.size > 64:
        return ir.Tensor(array)
    return _cached_tensor(array.dtype.str, array.shape, array.tobytes())


def _unsqueeze(
    op: OpBuilder, value: ir.Value, axes: Sequence[int], sig: Signature
) -> ir.Value:
    if not axes:
        return value
    if sig.opset >= 13:
        return op.Unsqueeze(value, _const(op, list(axes)))
    return op.Unsqueeze(value, axes=list(axes))


def _shape(op: OpBuilder, data: ir.Value) -> ir.Value:
    return op.Shape(data)


def _dim_vector(op: OpBuilder, data: ir.Value, axis: int, sig: Signature) -> ir.Value:
    """The size of ``axis`` as a 1-element int64 tensor: a constant when static.

    A run-time size is sliced out of ``Shape`` (never a 0-D Gather of it) and passed
    through Cast: frontends that keep shapes as symbolic shape expressions (TVM Relax)
    turn it into an ordinary tensor there, so arithmetic on it converts, and a 1-element
    tensor keeps every later op free of 0-D operands.
    """
    static = sig.dim(axis) if axis >= 0 else None
    if static is not None:
        return _const(op, [static])
    if sig.opset >= 15:
        sliced = op.Shape(data, start=axis, end=axis + 1)
    else:
        sliced = op.Slice(_shape(op, data), _const(op, [axis]), _const(op, [axis + 1]))
    return op.Cast(sliced, to=ir.DataType.INT64)


def _squeeze(op: OpBuilder, value: ir.Value, axes: Sequence[int], sig: Signature) -> ir.Value:
    if not axes:
        return value
    if sig.opset >= 13:
        return op.Squeeze(value, _const(op, list(axes)))
    return op.Squeeze(value, axes=list(axes))


def _scalar(op: OpBuilder, vector: ir.Value, sig: Signature) -> ir.Value:
    """A 1-element tensor as a 0-D one (Range takes scalars)."""
    return _squeeze(op, vector, [0], sig)


def _place(op: OpBuilder, vector: ir.Value, axis: int, rank: int, sig: Signature) -> ir.Value:
    """Reshape a 1-D ``vector`` to ``rank`` dims with its elements along ``axis``."""
    return _unsqueeze(op, vector, [a for a in range(rank) if a != axis], sig)


def _pad_trailing(
    op: OpBuilder, value: ir.Value, data: ir.Value, lead: int, sig: Signature
) -> ir.Value:
    """Append size-1 axes so a ``lead``-rank value broadcasts against the whole data.

    With an unknown rank, the ones are appended by a Reshape to
    ``Concat(Shape(value), Expand([1], [rank - lead]))``: its leading entries equal the
    input's own dims, so Reshape's copy-a-zero rule keeps zero-sized dims right.
    """
    if sig.rank is not None:
        return _unsqueeze(op, value, list(range(lead, sig.rank)), sig)
    extra = op.Sub(op.Shape(op.Shape(data)), _const(op, [lead]))
    ones = op.Expand(_const(op, [1]), extra)  # not ConstantOfShape: TVM cannot convert it
    return op.Reshape(value, op.Concat(op.Shape(value), ones, axis=0))


_INDEX_TYPES = {np.int32: ir.DataType.INT32, np.int64: ir.DataType.INT64}


def _lengths(
    op: OpBuilder, lens: ir.Value, time_len: ir.Value, sig: Signature, itype: type = np.int64
) -> ir.Value:
    """The lengths as [B] of the index type, clamped to at most T.

    ``time_len`` is a 1-element tensor. With a static T, one Min; with a run-time T,
    Less+Where: tract cannot evaluate Min of a run-time value and a symbolic dim
    ("Undetermined symbol"), but selects fine. Negatives act as 0 downstream; for int32
    arithmetic (static T only) see ``_lengths_in_range``.
    """
    if itype is np.int32:
        return _lengths_in_range(op, lens, sig, itype)
    if sig.lens_dtype != ir.DataType.INT64:
        lens = op.Cast(lens, to=ir.DataType.INT64)
    if time_len.const_value is not None and sig.allows("Min") and sig.opset >= 12:
        return op.Min(lens, time_len)  # one node where T is static
    if sig.allows("Less", "Where"):
        return op.Where(op.Less(time_len, lens), time_len, lens)
    if sig.allows("Min") and sig.opset >= 12:
        return op.Min(lens, time_len)
    raise StrategyError("clamping the lengths needs Less+Where or Min (opset >= 12)")


def _lengths_in_range(op: OpBuilder, lens: ir.Value, sig: Signature, itype: type) -> ir.Value:
    """The lengths clamped to [0, T] (T static), as [B] of ``itype``.

    Clamped in the lengths' own type before any Cast, so a 64-bit length never wraps
    into range: one Clip where the target has it, else Min and Max (``_clamps``).
    """
    time_len = sig.dim(sig.time_axis)
    assert time_len is not None
    own = np.int32 if sig.lens_dtype == ir.DataType.INT32 else np.int64
    if own is np.int64 and sig.lens_dtype != ir.DataType.INT64:
        lens = op.Cast(lens, to=ir.DataType.INT64)
    if sig.allows("Clip"):
        clamped = op.Clip(lens, _const(op, 0, own), _const(op, time_len, own))
    else:
        clamped = op.Max(op.Min(lens, _const(op, [time_len], own)), _const(op, [0], own))
    return clamped if own is itype else op.Cast(clamped, to=_INDEX_TYPES[itype])


def _clamps(sig: Signature) -> bool:
    """Whether the target can clamp lengths to [0, T] (Clip, or Min and Max; opset 12)."""
    return sig.opset >= 12 and (sig.allows("Clip") or sig.allows("Min", "Max"))


def _iota(
    op: OpBuilder, size: ir.Value, static: int | None, sig: Signature, itype: type = np.int64
) -> ir.Value:
    """0 .. size-1 (``size`` a 1-element tensor): a constant of ``itype`` when static.

    Without Range, an inclusive CumSum of ones minus one (no ``exclusive`` attribute:
    one variant fewer for a converter to get wrong).
    """
    if static is not None and static <= _MAX_FOLDED_ELEMENTS:
        return _const(op, np.arange(static), itype)
    if sig.allows("Range", "Squeeze"):
        return op.Range(_const(op, 0), _scalar(op, size, sig), _const(op, 1))
    if sig.allows("ConstantOfShape", "CumSum"):
        ones = op.ConstantOfShape(size, value=ir.Tensor(np.array([1], np.int64)))
        return op.Sub(op.CumSum(ones, _const(op, 0)), _const(op, 1))
    raise StrategyError("a run-time index needs Range or ConstantOfShape+CumSum")


def _affine(
    op: OpBuilder, value: ir.Value, scale: ir.Value | None, offset: ir.Value | None
) -> ir.Value:
    if scale is not None:
        value = op.Mul(value, scale)
    if offset is not None:
        value = op.Add(value, offset)
    return value


def _select_source(
    op: OpBuilder,
    steps: ir.Value,
    lens: ir.Value,
    sig: Signature,
    *,
    scale: ir.Value | None,
    offset: ir.Value | None,
    itype: type = np.int64,
) -> ir.Value:
    """``where(t < L, s*(L-1-t) + o, s*t + o)`` for broadcastable ``steps`` and ``lens``.

    The reversed branch is written ``s*L - (s*(t+1) - o)`` so that with static shapes
    everything but ``s*L`` folds into one constant.
    """
    forward = _affine(op, steps, scale, offset)
    one = _const(op, 1, itype)
    next_step = op.Add(steps, one)
    bias = next_step if scale is None else op.Mul(next_step, scale)
    if offset is not None:
        bias = op.Sub(bias, offset)
    backward = op.Sub(lens if scale is None else op.Mul(lens, scale), bias)
    if sig.allows("Less", "Where"):
        # where(L < t+1, forward, backward) == where(t < L, backward, forward), with the
        # operand broadcast along the batch axis on the "then" side: MNN misreads a
        # broadcast "else" operand (BACKENDS.md), every backend reads this one right.
        return op.Where(op.Less(lens, next_step), forward, backward)
    if sig.allows("Max", "Min", "Mul", "Add") and sig.opset >= 12:
        # inside = 1 where t < L else 0, by integer clamping.
        inside = op.Min(op.Max(op.Sub(lens, steps), _const(op, 0, itype)), one)
        return op.Add(forward, op.Mul(inside, op.Sub(backward, forward)))
    raise StrategyError("selecting the source step needs Less+Where or Min+Max+Mul+Add")


# Time-major nodes with rows of several elements and at most this many batch entries
# compute their index as [B, T] and transpose it (single-element rows transpose the data
# instead: `_transposes_data`). onnxruntime's broadcasting loops over the innermost
# dimension; paired medians (1 thread, run-time lengths, int32 arithmetic, x native):
# [1000, 8, 4] 1.86 vs 2.28 in place, [2000, 16, 2] 1.46 vs 1.72, [600, 4, 16] 1.53 vs
# 2.10, [400, 32, 2] 1.66 vs 1.68. (Rows of a few elements are slow either way:
# onnxruntime's Gather spends about 10 ns per row.)
_TIME_INNER_MAX_BATCH = 16


def _short_batch(sig: Signature, most: int) -> bool:
    """Whether the batch is static, at most ``most`` long, and shorter than a static T."""
    batch, time_len = sig.dim(sig.batch_axis), sig.dim(sig.time_axis)
    if batch is None or batch > most:
        return False
    return time_len is None or time_len > batch


def _time_inner(sig: Signature) -> bool:
    """Whether to compute a time-major node's index with time as the inner axis."""
    if sig.lead_rank != 2 or sig.time_axis > sig.batch_axis or not sig.allows("Transpose"):
        return False
    return _short_batch(sig, _TIME_INNER_MAX_BATCH)


# Time-major nodes whose rows are single elements and whose batch is at most this long
# are gathered on the data's [B, T] transpose and transposed back: the index is then
# computed with time innermost and needs no transpose of its own. `python -m
# revseq.bench`-style paired medians (1 thread, int32 index arithmetic, x native):
# [2000, 16] 0.81 vs 0.89 transposing the index, [8000, 1] 0.98 vs 2.10, [1000, 8]
# 0.98 vs 1.11, [500, 32] 0.89 vs 0.93 (in place 1.01); but [512, 64] 0.93 vs 0.86 in
# place, [256, 128] 0.94 vs 0.80 in place.
_TRANSPOSE_DATA_MAX_BATCH = 32


def _transposes_data(sig: Signature) -> bool:
    """Whether to gather a rank-2 time-major node on the [B, T] transpose of its data.

    Not with constant lengths: a constant index costs nothing to compute in any layout.
    """
    if (
        sig.rank != 2
        or sig.time_axis != 0
        or sig.lens is not None
        or not sig.allows("Transpose")
    ):
        return False
    return _short_batch(sig, _TRANSPOSE_DATA_MAX_BATCH)


def _gathers_matrix(sig: Signature) -> bool:
    """Whether the node's rows are single elements that GatherElements moves as a matrix."""
    return (
        sig.index_covers_data()
        and sig.allows("GatherElements")
        and (sig.rank == 2 or sig.allows("Squeeze", "Unsqueeze"))
    )


def _gather_matrix(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """GatherElements on the data as a [T, B] or [B, T] matrix (single-element rows).

    Trailing size-1 axes are squeezed off first and put back after: GatherElements on
    ``[T, B, 1]`` runs 4x slower in onnxruntime than on ``[T, B]``. A time-major matrix
    with a short batch is gathered transposed (``_transposes_data``), so that its index
    is computed with time innermost.
    """
    trailing = list(range(2, sig.rank or 2))
    dims = tuple(sig.dims or (None, None))[:2]
    matrix_sig = dataclasses.replace(sig, rank=2, dims=dims)
    matrix = _squeeze(op, data, trailing, sig)
    if _transposes_data(matrix_sig):
        transposed = op.Transpose(matrix, perm=[1, 0])
        batch_major = dataclasses.replace(
            matrix_sig, batch_axis=0, time_axis=1, dims=(dims[1], dims[0])
        )
        src = _source_index(op, transposed, lens, batch_major, gather="GatherElements")
        gathered = op.Transpose(op.GatherElements(transposed, src, axis=1), perm=[1, 0])
    else:
        src = _source_index(op, matrix, lens, matrix_sig, gather="GatherElements")
        gathered = op.GatherElements(matrix, src, axis=sig.time_axis)
    return _unsqueeze(op, gathered, trailing, sig)


# The variant of a target that runs the index arithmetic in int32 exactly: lengths
# clamped in int64 and cast, Less, Where, Add, Sub and Mul over int32, and a Cast to
# int64 for a gather that takes no int32 indices (variants "Gather:int32" and
# "GatherElements:int32"; GatherND takes int64 only).
INT32_INDEX = "Index:int32"

# Indexes of at least this many elements are computed in int32 where every value
# provably fits: onnxruntime's int32 Where, Less and Sub run at about twice the int64
# speed, and below this size the extra Cast costs more than it saves.
_INT32_MIN_ELEMENTS = 1 << 12


def _fits_int32(sig: Signature, scale: int, strides: Sequence[tuple[int, int]]) -> bool:
    """Whether every value of the index provably fits in int32 (static leading axes)."""
    lead = sig.lead_dims()
    if lead is None:
        return False
    largest = lead[sig.time_axis] * abs(scale) + sum(
        lead[axis] * abs(stride) for axis, stride in strides
    )
    return largest < np.iinfo(np.int32).max


def _int32_arithmetic(sig: Signature) -> bool:
    """Whether to run the index arithmetic in int32 (given that it fits)."""
    lead = sig.lead_dims()
    return (
        lead is not None
        and sig.lens is None
        and sig.allows("Cast", INT32_INDEX)
        and _clamps(sig)
        and lead[sig.time_axis] * lead[sig.batch_axis] >= _INT32_MIN_ELEMENTS
    )


# A static T up to this size gets its source index from a constant table, one row per
# length value: (T + 1) * T elements, at most 64 Ki (512 KiB of int64).
_MAX_TABLE_ELEMENTS = 1 << 16


def _table_lookup(
    op: OpBuilder,
    lens: ir.Value,
    sig: Signature,
    *,
    scale: int,
    offsets: Sequence[tuple[int, int]],
    itype: type,
) -> ir.Value | None:
    """``scale * src + sum(stride * coord)`` by one Gather of a constant table, or None.

    Row ``L`` of the table is the source index for length ``L``, scaled; gathering the
    rows of the clamped lengths gives the index as [B, T] in one copy, where the
    arithmetic form runs three broadcasts over it. Only for two static leading axes;
    time-major nodes transpose the result (so only where the target has Transpose).
    """
    t, b = sig.time_axis, sig.batch_axis
    time_len, batch = sig.dim(t), sig.dim(b)
    if (
        sig.lead_rank != 2
        or time_len is None
        or batch is None
        or (time_len + 1) * time_len > _MAX_TABLE_ELEMENTS
        or not sig.allows("Gather")
        or not _clamps(sig)
        or (t < b and not sig.allows("Transpose"))
    ):
        return None
    # Column L of the [T, T+1] source index of lengths 0 .. T is row L of the table.
    table = np.ascontiguousarray(source_index_numpy(np.arange(time_len + 1), time_len).T)
    clamped = _lengths_in_range(op, lens, sig, np.int64)
    rows = op.Gather(_const(op, table * scale, itype), clamped, axis=0)  # [B, T]
    bias = np.zeros((batch, 1), dtype=np.int64)
    for axis, stride in offsets:
        if axis == b:
            bias = bias + np.arange(batch, dtype=np.int64)[:, None] * stride
    if bias.any():
        rows = op.Add(rows, _const(op, bias, itype))
    return op.Transpose(rows, perm=[1, 0]) if t < b else rows


def _static_int(value: ir.Value | None) -> int | None:
    """A scale or stride as a number: 1 for None, the constant's value, else None."""
    if value is None:
        return 1
    if value.const_value is None or value.const_value.size != 1:
        return None
    return int(value.const_value.numpy().reshape(-1)[0])


def _position(axis: int, sig: Signature, swapped: bool) -> int:
    """Where a leading axis sits in the layout the index is computed in."""
    return sig.lead_rank - 1 - axis if swapped else axis


def _source_index(
    op: OpBuilder,
    data: ir.Value,
    lens: ir.Value,
    sig: Signature,
    *,
    scale: ir.Value | None = None,
    offsets: Sequence[tuple[int, ir.Value | None]] = (),
    gather: str | None = None,
) -> ir.Value:
    """``scale * src + sum(stride * coord)`` over the leading axes, in the data's order.

    Without scale and offsets this is the source index itself, sized 1 on the leading
    axes other than time and batch. ``offsets`` are (axis, stride) pairs: the
    coordinate along ``axis`` times ``stride`` (None: 1) is added. It comes from a
    constant table where one fits, else from arithmetic, which large indexes run in
    int32. The result is int64, or int32 where every value fits and ``gather``, the op
    that reads it, takes int32 indices on the target (``Gather:int32``).
    """
    static_scale = _static_int(scale)
    static_offsets = [(axis, _static_int(stride)) for axis, stride in offsets]
    if static_scale is not None and all(stride is not None for _, stride in static_offsets):
        strides = [(axis, int(stride or 0)) for axis, stride in static_offsets]
        fits = _fits_int32(sig, static_scale, strides)
        direct = fits and gather is not None and sig.allows(f"{gather}:int32")
        if sig.lens is None:
            found = _table_lookup(
                op,
                lens,
                sig,
                scale=static_scale,
                offsets=strides,
                itype=np.int32 if direct else np.int64,
            )
            if found is not None:
                return found
        if fits and _int32_arithmetic(sig):
            # Every term is static: the constants are made again in int32.
            scale = None if static_scale == 1 else _const(op, static_scale, np.int32)
            offsets = [
                (axis, None if stride == 1 else _const(op, stride, np.int32))
                for axis, stride in strides
            ]
            src = _index_arithmetic(
                op, data, lens, sig, scale=scale, offsets=offsets, itype=np.int32
            )
            return src if direct else op.Cast(src, to=ir.DataType.INT64)
    return _index_arithmetic(op, data, lens, sig, scale=scale, offsets=offsets, itype=np.int64)


def _index_arithmetic(
    op: OpBuilder,
    data: ir.Value,
    lens: ir.Value,
    sig: Signature,
    *,
    scale: ir.Value | None,
    offsets: Sequence[tuple[int, ir.Value | None]],
    itype: type,
) -> ir.Value:
    """``_source_index`` by broadcast arithmetic over the leading axes, in ``itype``.

    Time-major nodes with a short batch are computed as [B, T] and transposed
    (``_time_inner``).
    """
    t, b, lead = sig.time_axis, sig.batch_axis, sig.lead_rank
    time_static = sig.dim(t)
    swapped = (time_static is None or sig.lens is None) and _time_inner(sig)
    offset: ir.Value | None = None
    for axis, stride in offsets:
        grid = _axis_grid(op, data, axis, sig, _position(axis, sig, swapped), itype=itype)
        term = _affine(op, grid, stride, None)
        offset = term if offset is None else op.Add(offset, term)
    if time_static is not None and sig.lens is not None:
        table = source_index_numpy(np.array(sig.lens, dtype=np.int64), time_static)  # [T, B]
        if t > b:
            table = table.T
        shape = [1] * lead
        shape[t], shape[b] = table.shape[0 if t < b else 1], table.shape[1 if t < b else 0]
        return _affine(op, _const(op, table.reshape(shape)), scale, offset)
    time_len = _dim_vector(op, data, t, sig)
    clamped = _place(
        op, _lengths(op, lens, time_len, sig, itype), _position(b, sig, swapped), lead, sig
    )
    steps = _place(
        op,
        _iota(op, time_len, time_static, sig, itype),
        _position(t, sig, swapped),
        lead,
        sig,
    )
    src = _select_source(op, steps, clamped, sig, scale=scale, offset=offset, itype=itype)
    if swapped:
        src = op.Transpose(src, perm=[1, 0])
    return src


def _lead_shape(op: OpBuilder, data: ir.Value, sig: Signature) -> ir.Value:
    static = sig.lead_dims()
    if static is not None:
        return _const(op, list(static))
    return op.Slice(_shape(op, data), _const(op, [0]), _const(op, [sig.lead_rank]))


def _axis_grid(
    op: OpBuilder,
    data: ir.Value,
    axis: int,
    sig: Signature,
    position: int | None = None,
    *,
    itype: type = np.int64,
) -> ir.Value:
    """0 .. d-1 along ``axis`` of the leading axes, size 1 on the others.

    ``position`` places it in a swapped layout (default: at ``axis`` itself).
    """
    size = _dim_vector(op, data, axis, sig)
    where = axis if position is None else position
    return _place(op, _iota(op, size, sig.dim(axis), sig, itype), where, sig.lead_rank, sig)


def _product_of_dims(op: OpBuilder, data: ir.Value, start: int, sig: Signature) -> ir.Value:
    """The product of dims ``start`` .. lead_rank-1 as a 1-element tensor.

    One dim is read directly; more are multiplied one by one (no ReduceProd of a
    shape: simple frontends do not convert it).
    """
    product = _dim_vector(op, data, start, sig)
    for axis in range(start + 1, sig.lead_rank):
        product = op.Mul(product, _dim_vector(op, data, axis, sig))
    return product


# ---------------------------------------------------------------------------------------
# The forms
# ---------------------------------------------------------------------------------------


def gather_elements(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """The canonical form: GatherElements with an index as large as the data.

    Single-element rows are gathered as a matrix (``_gather_matrix``).
    """
    if _gathers_matrix(sig):
        return _gather_matrix(op, data, lens, sig)
    src = _source_index(op, data, lens, sig, gather="GatherElements")
    src = _pad_trailing(op, src, data, sig.lead_rank, sig)
    if not sig.index_covers_data():
        src = op.Expand(src, _shape(op, data))
    return op.GatherElements(data, src, axis=sig.time_axis)


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
        if axis == t and lead == 2:
            grid = src  # [T, B] or [B, T] already
        else:
            grid = op.Expand(src if axis == t else _axis_grid(op, data, axis, sig), lead_shape)
        columns.append(_unsqueeze(op, grid, [lead], sig))
    index = columns[0] if len(columns) == 1 else op.Concat(*columns, axis=lead)
    return op.GatherND(data, index, batch_dims=batch_dims)


def gather_rows(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """Gather on a [rows, ...] view with a flat row index.

    The flat index is ``stride_t * src + sum(stride_k * coord_k)`` over the other leading
    axes; with static shapes all of it but the lengths folds into constants. With static
    shapes the view is [rows, *trailing dims], so the gather's output has the data's
    shape and needs no Reshape (a copy when it is a graph output); rows of one element
    are gathered with GatherElements on a 1-D view (Gather copies element by element).
    onnxruntime's Gather loses string elements when a gathered slice holds more than one
    (BACKENDS.md), so string data (or data of unknown type) is gathered with GatherND.
    Rows of one element over two leading axes are gathered as a matrix, as in
    ``gather_elements``.
    """
    if _gathers_matrix(sig):
        return _gather_matrix(op, data, lens, sig)
    dims = sig.dims
    static_shape = dims is not None and all(d is not None for d in dims)
    t, lead = sig.time_axis, sig.lead_rank
    static = sig.lead_dims()
    strides: list[ir.Value | None] = []
    for axis in range(lead):
        if static is not None:
            size = int(np.prod(static[axis + 1 :], dtype=np.int64))
            strides.append(None if size == 1 else _const(op, size))
        elif axis + 1 < lead:
            strides.append(_product_of_dims(op, data, axis + 1, sig))
        else:
            strides.append(None)
    single = static_shape and sig.row_size() == 1 and sig.allows("GatherElements")
    if single:
        gather: str | None = "GatherElements"
    elif sig.dtype in (ir.DataType.STRING, None):
        gather = None  # GatherND, which takes int64 indices only
    else:
        gather = "Gather"
    flat = _source_index(
        op,
        data,
        lens,
        sig,
        scale=strides[t],
        offsets=[(axis, strides[axis]) for axis in range(lead) if axis != t],
        gather=gather,
    )
    if static_shape and dims is not None and static is not None:
        trailing = [int(d) for d in dims[lead:] if d is not None]
        # allowzero only where a static dim is 0: without zeros Reshape's default reading
        # is the same, and some converters (onnx2torch) lack the attribute.
        zeros = {"allowzero": 1} if 0 in dims else {}
        rows = int(np.prod(static, dtype=np.int64))
        if single:
            flat_view = op.Reshape(data, _const(op, [rows]), **zeros)
            flat_index = op.Reshape(flat, _const(op, [rows]), **zeros)
            gathered = op.GatherElements(flat_view, flat_index, axis=0)
            return op.Reshape(gathered, _const(op, [*static, *trailing]), **zeros)
        view = op.Reshape(data, _const(op, [rows, *trailing]), **zeros)
    else:
        view = op.Flatten(data, axis=lead)
    if gather is None:
        # A string, or an unknown type (inside a function), may hit that Gather bug.
        gathered = op.GatherND(view, _unsqueeze(op, flat, [lead], sig))
    else:
        gathered = op.Gather(view, flat, axis=0)
    if static_shape:
        return gathered  # the view kept the trailing dims: the data's shape already
    return op.Reshape(gathered, _shape(op, data), allowzero=1)  # a run-time 0 must survive


@dataclasses.dataclass(frozen=True)
class Form:
    """A named decomposition and the opset it needs."""

    name: str
    build: Callable[[OpBuilder, ir.Value, ir.Value, Signature], ir.Value]
    min_opset: int
    description: str

    def available(self, sig: Signature) -> str | None:
        """None if the form fits ``sig``, else the reason it does not."""
        if sig.opset < self.min_opset:
            return f"strategy {self.name!r} needs opset >= {self.min_opset}"
        return None


FORMS: dict[str, Form] = {
    form.name: form
    for form in (
        Form(
            "gather_elements",
            gather_elements,
            11,
            "GatherElements with a data-sized index (the canonical form)",
        ),
        Form(
            "gather_nd",
            gather_nd,
            12,
            "GatherND gathering whole rows with (time, batch) index tuples",
        ),
        Form(
            "gather_rows",
            gather_rows,
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
