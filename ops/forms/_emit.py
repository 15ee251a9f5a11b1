"""Small emitters the forms share: constants, shape reads, views, lengths, the select.

Each is opset-aware (Squeeze/Unsqueeze axes as an input from opset 13, Shape's start from
15) and emits a constant wherever the signature makes a value static. What the target
lacks to compute an index it says through the builder (``op.lacking``), which the
template's recording gathers.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from revseq.ops.signature import MAX_FOLDED_ELEMENTS, OpBuilder, Signature
from revseq.ops.vocabulary import (
    CLIP_CAST,
    INT32_INDEX,
    INT64_INDEX,
    SCALAR_BY_SUM,
    SHAPE_ARITHMETIC,
)


def const(
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


def unsqueeze(op: OpBuilder, value: ir.Value, axes: Sequence[int], sig: Signature) -> ir.Value:
    if not axes:
        return value
    if sig.opset >= 13:
        return op.Unsqueeze(value, const(op, list(axes)))
    return op.Unsqueeze(value, axes=list(axes))


def shape_of(op: OpBuilder, data: ir.Value) -> ir.Value:
    return op.Shape(data)


def dim_vector(op: OpBuilder, data: ir.Value, axis: int, sig: Signature) -> ir.Value:
    """The size of ``axis`` as a 1-element int64 tensor: a constant when static.

    A run-time size is sliced out of ``Shape`` (never a 0-D Gather of it) and passed
    through Cast: frontends that keep shapes as symbolic shape expressions turn it into
    an ordinary tensor there, so arithmetic on it converts, and a 1-element
    tensor keeps every later op free of 0-D operands.
    """
    static = sig.dim(axis) if axis >= 0 else None
    if static is not None:
        return const(op, [static])
    return dims_read(op, data, axis, sig, end=axis + 1)


def dims_read(
    op: OpBuilder, data: ir.Value, start: int, sig: Signature, *, end: int | None = None
) -> ir.Value:
    """Dims ``start`` up to ``end`` (default: the last) read at run time, as int64.

    Shape's own slice from opset 15, a Slice of it before; then a Cast, which turns a
    shape expression into an ordinary tensor (``dim_vector``), except where the target
    computes with a shape as it is (``SHAPE_ARITHMETIC``).
    """
    if sig.opset >= 15:
        bounds = {"start": start} if end is None else {"start": start, "end": end}
        sliced = op.Shape(data, **bounds)
    else:
        stop = sig.rank if end is None else end
        sliced = op.Slice(shape_of(op, data), const(op, [start]), const(op, [stop]))
    if sig.target_lists(SHAPE_ARITHMETIC):
        return sliced
    return op.Cast(sliced, to=ir.DataType.INT64)


def dim_as_int32(op: OpBuilder, dim: ir.Value) -> ir.Value:
    """A dim read at run time, cast to int32 from the shape read itself.

    Not through the int64 Cast ``dim_vector`` gives it: every cast of the read to int32
    is then the same node, emitted once (the lengths' clamp and a row stride).
    """
    read = dim.producer()
    if read is not None and read.op_type == "Cast" and _reads_shape(read.inputs[0]):
        dim = read.inputs[0]
    return op.Cast(dim, to=ir.DataType.INT32)


def _reads_shape(value: ir.Value | None) -> bool:
    """Whether ``value`` is a Shape's output, or a Slice of one (before opset 15)."""
    node = None if value is None else value.producer()
    if node is not None and node.op_type == "Slice":
        node = node.inputs[0].producer() if node.inputs[0] is not None else None
    return node is not None and node.op_type == "Shape"


def squeeze(op: OpBuilder, value: ir.Value, axes: Sequence[int], sig: Signature) -> ir.Value:
    if not axes:
        return value
    if sig.opset >= 13:
        return op.Squeeze(value, const(op, list(axes)))
    return op.Squeeze(value, axes=list(axes))


def _scalar(op: OpBuilder, vector: ir.Value, sig: Signature) -> ir.Value:
    """A 1-element tensor as a 0-D one (Range takes scalars).

    A Squeeze, or where the target takes it (``SCALAR_BY_SUM``) the vector's ReduceSum;
    a shape as read stays a Squeeze where the target does no arithmetic on one (a
    frontend may keep it a shape expression, which its ReduceSum does not take).
    """
    producer = vector.producer()
    read = producer is not None and producer.op_type == "Shape"
    if (
        sig.target_lists(SCALAR_BY_SUM)
        and sig.target_has("ReduceSum")
        and (not read or sig.target_lists(SHAPE_ARITHMETIC))
    ):
        return op.ReduceSum(vector, keepdims=0)
    return squeeze(op, vector, [0], sig)


def place_along(
    op: OpBuilder,
    vector: ir.Value,
    axis: int,
    rank: int,
    sig: Signature,
    *,
    broadcast: bool = False,
) -> ir.Value:
    """Reshape a 1-D ``vector`` to ``rank`` dims with its elements along ``axis``.

    ``broadcast``: the value only meets others of ``rank`` dims by broadcasting, which
    prepends the axes before ``axis``, so only those after it are added (a vector along
    the last axis needs no node).
    """
    axes = range(1, rank - axis) if broadcast else (a for a in range(rank) if a != axis)
    return unsqueeze(op, vector, list(axes), sig)


def pad_trailing(
    op: OpBuilder, value: ir.Value, data: ir.Value, lead: int, sig: Signature
) -> ir.Value:
    """Append size-1 axes so a ``lead``-rank value broadcasts against the whole data.

    With an unknown rank, from opset 13, an Unsqueeze whose axes are
    ``Range(lead, rank)``: the rank read as ``Cast(Shape(Shape(data)))``, which a
    frontend that holds shapes as shape expressions folds to a constant
    once it knows the rank (arithmetic on the shape expression itself does not convert
    there). Before opset 13, a Reshape to ``Concat(Shape(value), Expand([1], [rank -
    lead]))``: its leading entries equal the input's own dims, so Reshape's copy-a-zero
    rule keeps zero-sized dims right.
    """
    if sig.rank is not None:
        return unsqueeze(op, value, list(range(lead, sig.rank)), sig)
    if sig.opset >= 13 and sig.target_has("Range", "Squeeze"):
        rank = op.Cast(op.Shape(op.Shape(data)), to=ir.DataType.INT64)
        axes = op.Range(const(op, lead), _scalar(op, rank, sig), const(op, 1))
        return op.Unsqueeze(value, axes)
    extra = op.Sub(op.Shape(op.Shape(data)), const(op, [lead]))
    ones = op.Expand(const(op, [1]), extra)  # not ConstantOfShape: not every frontend has it
    return op.Reshape(value, op.Concat(op.Shape(value), ones, axis=0))


_INDEX_TYPES = {np.int32: ir.DataType.INT32, np.int64: ir.DataType.INT64}

# Where a target's integer Clip is exact only once cast back (``CLIP_CAST``: a converter
# that clamps with float bounds returns its Clip of int64 lengths as float32), it
# serves while T is below 2^24, where float32 holds every integer exactly.
_FLOAT_EXACT = 1 << 24


def clamped_lengths(
    op: OpBuilder, lens: ir.Value, time_len: ir.Value, sig: Signature, itype: type = np.int64
) -> ir.Value:
    """The lengths as [B] of the index type, clamped to at most T.

    ``time_len`` is a 1-element tensor. Less+Where: some backends cannot evaluate Min of
    a run-time value and a symbolic dim but select fine, and some broadcast Min and Max
    through a stack of their operands, dearer than a Less and a Where
    (docs/backends.md); Min only where a target lacks them. Negatives act as 0
    downstream. For int32 arithmetic with a static T see ``lengths_in_range``; int32
    lengths are clamped as they are, against T cast to int32 (a GPU runtime without int64
    arithmetic would otherwise cast them to int64 on the device and copy them back for
    an int64 clamp on the host); others are clamped to [0, T] in int64 (so that no
    64-bit length wraps into range) and cast.
    """
    static_time = sig.dim(sig.time_axis) is not None
    if static_time and clamps(sig) and (itype is np.int32 or not _clamps_at_run_time(sig)):
        return lengths_in_range(op, lens, sig, itype)
    if itype is np.int32 and sig.lens_dtype == ir.DataType.INT32:
        return _at_most(op, lens, dim_as_int32(op, time_len), np.int32, sig)
    if itype is np.int32:  # clamped to [0, T] in int64 (a [B] vector), then cast
        clamped = _at_least_zero(op, clamped_lengths(op, lens, time_len, sig), np.int64, sig)
        return op.Cast(clamped, to=ir.DataType.INT32)
    if sig.lens_dtype != ir.DataType.INT64:
        lens = op.Cast(lens, to=ir.DataType.INT64)
    return _at_most(op, lens, time_len, np.int64, sig)


def lengths_in_range(op: OpBuilder, lens: ir.Value, sig: Signature, itype: type) -> ir.Value:
    """The lengths clamped to [0, T] (T static), as [B] of ``itype``.

    Clamped in the lengths' own type before any Cast, so a 64-bit length never wraps
    into range (int32 ones widened first where the target has int64 index arithmetic
    only): one Clip where the target has it, else two selects (Less+Where, see
    ``clamped_lengths``), else Min and Max (``clamps``).
    """
    time_len = sig.dim(sig.time_axis)
    assert time_len is not None
    # int32 lengths widened first where the target computes an index in int64 but not in
    # int32 (an NPU's build crashes on an int32 Less): widening loses nothing.
    int64_only = sig.target_has(INT64_INDEX) and not sig.target_has(INT32_INDEX)
    narrow = sig.lens_dtype == ir.DataType.INT32 and not int64_only
    own = np.int32 if narrow else np.int64
    if own is np.int64 and sig.lens_dtype != ir.DataType.INT64:
        lens = op.Cast(lens, to=ir.DataType.INT64)
    # A Clip:cast result is cast back to the index type even where it is of that type.
    clip_cast = (
        not sig.target_has("Clip") and sig.target_has(CLIP_CAST) and time_len <= _FLOAT_EXACT
    )
    if sig.target_has("Clip") or clip_cast:
        clamped = op.Clip(lens, const(op, 0, own), const(op, time_len, own))
    else:
        top = const(op, [time_len], own)
        clamped = _at_least_zero(op, _at_most(op, lens, top, own, sig), own, sig)
    if own is itype and not clip_cast:
        return clamped
    return op.Cast(clamped, to=_INDEX_TYPES[itype])


def _clamps_at_run_time(sig: Signature) -> bool:
    """Whether the target clamps against a run-time T (Less+Where, or Min; ``_at_most``).

    A target with neither clamps a static T's lengths by Clip (``lengths_in_range``).
    """
    return sig.target_has("Less", "Where") or (sig.target_has("Min") and sig.opset >= 12)


def _at_most(
    op: OpBuilder, lens: ir.Value, top: ir.Value, dtype: type, sig: Signature
) -> ir.Value:
    """``min(lens, top)`` by Less+Where where the target has them, else by Min, else Max.

    A select, not Min, wherever it can be (see ``clamped_lengths``). A target with Max
    alone takes ``l - max(l - top, 0)`` of ``l = max(lens, 0)``: no operand
    wraps, as ``l`` and ``top`` are at least 0.
    """
    if sig.target_has("Less", "Where"):
        return op.Where(op.Less(top, lens), top, lens)
    if sig.opset < 12:
        return op.lacking("clamping the lengths needs Less+Where, or Min or Max from opset 12")
    if sig.target_has("Min"):
        return op.Min(lens, top)
    if sig.target_has("Max", "Sub"):
        zero = const(op, [0], dtype)
        floor = op.Max(lens, zero)
        return op.Sub(floor, op.Max(op.Sub(floor, top), zero))
    return op.lacking("clamping the lengths needs Less+Where, Min, or Max and Sub")


def _at_least_zero(op: OpBuilder, lens: ir.Value, dtype: type, sig: Signature) -> ir.Value:
    """``max(lens, 0)`` by Less+Where where the target has them, else by Max.

    A select, not Max, wherever it can be (see ``clamped_lengths``).
    """
    zero = const(op, [0], dtype)
    if sig.target_has("Less", "Where"):
        return op.Where(op.Less(lens, zero), zero, lens)
    if sig.target_has("Max") and sig.opset >= 12:
        return op.Max(lens, zero)
    return op.lacking("clamping the lengths at 0 needs Less+Where or Max (opset >= 12)")


def clamps(sig: Signature) -> bool:
    """Whether the target can clamp lengths to [0, T] (Clip, or Min and Max; opset 12)."""
    return sig.opset >= 12 and (
        sig.target_has("Clip") or sig.target_has(CLIP_CAST) or sig.target_has("Min", "Max")
    )


RUNTIME_INDEX_OPS = (("Range", "Squeeze"), ("ConstantOfShape", "CumSum"))
"""The op types ``iota`` makes an index of run-time length with: either set."""


def runtime_index_lack(allowed: frozenset[str] | None) -> str | None:
    """Why a target with op types ``allowed`` makes no run-time index, naming what it lacks.

    None where it makes one (``allowed`` None: any op).
    """
    if allowed is None:
        return None
    lacks = [[t for t in ops if t not in allowed] for ops in RUNTIME_INDEX_OPS]
    if not all(lacks):
        return None
    ways = " or ".join(
        f"{'+'.join(ops)} (lacks {', '.join(lack)})"
        for ops, lack in zip(RUNTIME_INDEX_OPS, lacks, strict=True)
    )
    return f"a run-time index needs {ways}"


def iota(
    op: OpBuilder, size: ir.Value, static: int | None, sig: Signature, itype: type = np.int64
) -> ir.Value:
    """0 .. size-1 (``size`` a 1-element tensor) of ``itype``: a constant when static.

    At run time (a symbolic size, or one too large to fold) it is computed in int64, as
    ``size`` is, and cast to ``itype``. Without Range, an inclusive CumSum of ones minus
    one (no ``exclusive`` attribute: one variant fewer for a converter to get wrong).
    """
    if static is not None and static <= MAX_FOLDED_ELEMENTS:
        return const(op, np.arange(static), itype)
    if sig.target_has(*RUNTIME_INDEX_OPS[0]):
        steps = op.Range(const(op, 0), _scalar(op, size, sig), const(op, 1))
    elif sig.target_has(*RUNTIME_INDEX_OPS[1]):
        ones = op.ConstantOfShape(size, value=ir.Tensor(np.array([1], np.int64)))
        steps = op.Sub(op.CumSum(ones, const(op, 0)), const(op, 1))
    else:
        steps = op.lacking(runtime_index_lack(sig.allowed) or "no run-time index")
    return steps if itype is np.int64 else op.Cast(steps, to=_INDEX_TYPES[itype])


def affine(
    op: OpBuilder, value: ir.Value, scale: ir.Value | None, offset: ir.Value | None
) -> ir.Value:
    if scale is not None:
        value = op.Mul(value, scale)
    if offset is not None:
        value = op.Add(value, offset)
    return value


def _runtime(value: ir.Value | None) -> bool:
    """Whether ``value`` is computed at run time (not None, not a constant)."""
    return value is not None and value.const_value is None


def select_source(
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

    With a constant scale and offset the reversed branch is written ``s*L - (s*(t+1) -
    o)``, so that with static shapes everything but ``s*L`` folds into one constant; a
    run-time one (symbolic dims) is applied once, after the select (three nodes fewer).
    """
    if _runtime(scale) or _runtime(offset):
        src = select_source(op, steps, lens, sig, scale=None, offset=None, itype=itype)
        return affine(op, src, scale, offset)
    forward = affine(op, steps, scale, offset)
    one = const(op, 1, itype)
    next_step = op.Add(steps, one)
    bias = next_step if scale is None else op.Mul(next_step, scale)
    if offset is not None:
        bias = op.Sub(bias, offset)
    backward = op.Sub(lens if scale is None else op.Mul(lens, scale), bias)
    if sig.target_has("Less", "Where"):
        # where(L < t+1, forward, backward) == where(t < L, backward, forward), with the
        # operand broadcast along the batch axis on the "then" side: a backend has
        # misread a broadcast "else" operand (docs/backends.md), none this one.
        return op.Where(op.Less(lens, next_step), forward, backward)
    if sig.target_has("Max", "Min", "Mul", "Add") and sig.opset >= 12:
        # inside = 1 where t < L else 0, by integer clamping.
        inside = op.Min(op.Max(op.Sub(lens, steps), const(op, 0, itype)), one)
        return op.Add(forward, op.Mul(inside, op.Sub(backward, forward)))
    if sig.target_has("Clip", "Mul", "Add") and sig.opset >= 12:
        # The same clamp by one Clip with constant bounds (a target without Min).
        inside = op.Clip(op.Sub(lens, steps), const(op, 0, itype), one)
        return op.Add(forward, op.Mul(inside, op.Sub(backward, forward)))
    return op.lacking(
        "selecting the source step needs Less+Where, Min+Max+Mul+Add or Clip+Mul+Add"
    )
