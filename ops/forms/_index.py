"""The source index: a constant table, int32 arithmetic, or int64 arithmetic.

Three ways compute ``src`` (see :mod:`revseq.ops.forms`): one Gather of a constant
table of rows per length (static T), int32 arithmetic where every value provably fits
and the target runs it (``Index:int32``), and int64 arithmetic everywhere else
(``Index:int64``). A target without int64 arithmetic (a GPU runtime, and so the
portable default) computes every index in int32: with symbolic dims that is exact while each
index value is below 2^31. The thresholds' measurements are in docs/forms.md.
"""

from __future__ import annotations

__all__ = ["int64_arithmetic", "row_index", "source_index", "typed_source_index"]

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from revseq.ops.forms._axes import axis_grid, product_of_dims
from revseq.ops.forms._emit import (
    affine,
    clamped_lengths,
    clamps,
    const,
    dim_as_int32,
    dim_vector,
    iota,
    lengths_in_range,
    place_along,
    select_source,
)
from revseq.ops.forms._layout import position, time_inner
from revseq.ops.signature import MAX_FOLDED_ELEMENTS, OpBuilder, Signature, source_index_numpy
from revseq.ops.vocabulary import (
    CLIP_CAST,
    GATHER_INT32,
    INT32_INDEX,
    INT64_INDEX,
    MUL_DIM,
    int32_index_variant,
)


def int64_arithmetic(sig: Signature) -> bool:
    """Whether the target runs the index arithmetic in int64 (``INT64_INDEX``)."""
    return sig.target_has(INT64_INDEX)


def _fits_int32(
    sig: Signature, scale: int | None, strides: Sequence[tuple[int, int]] | None
) -> bool:
    """Whether every value of the index fits in int32.

    Proved from static leading dims; with symbolic ones, assumed only on a target
    without int64 arithmetic (``INT64_INDEX``), where int32 is the only way. A run-time
    scale or stride (None) bounds nothing.
    """
    lead = sig.lead_dims()
    if lead is None:
        return not int64_arithmetic(sig)
    if scale is None or strides is None:
        return False
    largest = lead[sig.time_axis] * abs(scale) + sum(
        lead[axis] * abs(stride) for axis, stride in strides
    )
    return largest < np.iinfo(np.int32).max


def _int32_arithmetic(sig: Signature) -> bool:
    """Whether to run the index arithmetic in int32 (given that it fits)."""
    if not sig.target_has("Cast", INT32_INDEX):
        return False
    if sig.lens is not None and (int64_arithmetic(sig) or sig.lead_dims() is not None):
        return False  # constant lengths fold into a constant index
    if not int64_arithmetic(sig):
        return True
    lead = sig.lead_dims()
    return (
        lead is not None
        and clamps(sig)
        and lead[sig.time_axis] * lead[sig.batch_axis] >= sig.tuning.int32_min_elements
    )


def _table_lookup(
    op: OpBuilder,
    data: ir.Value,
    lens: ir.Value,
    sig: Signature,
    *,
    scale: ir.Value | None,
    offsets: Sequence[tuple[int, ir.Value | None]],
    itype: type,
) -> ir.Value | None:
    """``scale * src + sum(stride * coord)`` by one Gather of a constant table, or None.

    Row ``L`` of the table is the source index for length ``L``, scaled; gathering the
    rows of the clamped lengths gives the index as [B, T] in one copy, where the
    arithmetic form runs three broadcasts over it. Only for two leading axes, T static;
    time-major nodes transpose the result (so only where the target has Transpose). The
    batch may be symbolic, as exporters leave it, where the target clamps in one Clip:
    the table needs the lengths clamped at 0 too, which the arithmetic does not, and two
    more selects would cost what the table saves. A scale or stride read from a
    symbolic batch's dim then multiplies the rows at run time, and the batch's own
    offsets are counted at run time, as the arithmetic counts them.
    """
    t, b = sig.time_axis, sig.batch_axis
    time_len, batch = sig.dim(t), sig.dim(b)
    if (
        sig.lead_rank != 2
        or time_len is None
        or (time_len + 1) * time_len > MAX_FOLDED_ELEMENTS
        or not sig.target_has("Gather")
        or not clamps(sig)
        or (t < b and not sig.target_has("Transpose"))
        or (batch is None and not (sig.target_has("Clip") or sig.target_has(CLIP_CAST)))
    ):
        return None
    # Column L of the [T, T+1] source index of lengths 0 .. T is row L of the table.
    table = np.ascontiguousarray(source_index_numpy(np.arange(time_len + 1), time_len).T)
    static_scale = _static_int(scale)
    if static_scale is not None:
        table = table * static_scale
    # int32 lengths index the table as they are where the target's Gather takes int32.
    narrow = sig.lens_dtype == ir.DataType.INT32 and sig.target_has(INT32_INDEX, GATHER_INT32)
    clamped = lengths_in_range(op, lens, sig, np.int32 if narrow else np.int64)
    rows = op.Gather(const(op, table, itype), clamped, axis=0)  # [B, T]
    # Time-major rows at a symbolic batch are transposed first: the batch's steps then
    # meet them as they are, along the last axis ([T, B]), with no Unsqueeze.
    early = t < b and batch is None
    if early:
        rows = op.Transpose(rows, perm=[1, 0])
    if static_scale is None:
        rows = op.Mul(rows, _factor(op, scale, sig, itype))
    for axis, stride in offsets:
        step = _static_int(stride)
        if axis != b or step == 0:
            continue
        if batch is not None and step is not None:
            if batch > 1:  # a batch of one has no offset to add
                rows = op.Add(rows, const(op, np.arange(batch)[:, None] * step, itype))
            continue
        where = 1 if early else 0
        steps = axis_grid(op, data, b, sig, where, itype=itype, lens=lens, lens_shaped=True)
        factor = None if step == 1 else _factor(op, stride, sig, itype)
        rows = op.Add(rows, affine(op, steps, factor, None))  # counted at run time
    return op.Transpose(rows, perm=[1, 0]) if t < b and not early else rows


def _factor(op: OpBuilder, value: ir.Value | None, sig: Signature, itype: type) -> ir.Value:
    """A scale or stride as a tensor of ``itype`` to multiply by, as the arithmetic has it."""
    factor = _as_int32(op, value) if itype is np.int32 else _as_int64_factor(op, value, sig)
    assert factor is not None, "a factor of 1 multiplies nothing"
    return factor


def _static_int(value: ir.Value | None) -> int | None:
    """A scale or stride as a number: 1 for None, the constant's value, else None."""
    if value is None:
        return 1
    if value.const_value is None or value.const_value.size != 1:
        return None
    return int(value.const_value.numpy().reshape(-1)[0])


def source_index(
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
    int32_variant = None if gather is None else int32_index_variant(gather)
    direct = int32_variant is not None and sig.target_has(int32_variant)
    src, itype = typed_source_index(
        op, data, lens, sig, scale=scale, offsets=offsets, takes_int32=direct
    )
    if itype is np.int32 and not direct:
        return op.Cast(src, to=ir.DataType.INT64)
    return src


def typed_source_index(
    op: OpBuilder,
    data: ir.Value,
    lens: ir.Value,
    sig: Signature,
    *,
    scale: ir.Value | None = None,
    offsets: Sequence[tuple[int, ir.Value | None]] = (),
    takes_int32: bool = True,
) -> tuple[ir.Value, type]:
    """``source_index`` as computed, and its type (``np.int32`` or ``np.int64``).

    For a caller that finishes the index itself (GatherND's tuples are built in the
    index's type and cast once). ``takes_int32``: whether the caller takes an int32
    table as is (else a table is int64 where the target has int64 arithmetic).

    Raises:
        StrategyError: The index needs int64 arithmetic, which the target lacks.
    """
    static_scale = _static_int(scale)
    static_offsets = [(axis, _static_int(stride)) for axis, stride in offsets]
    strides: list[tuple[int, int]] | None = None
    if static_scale is not None and all(stride is not None for _, stride in static_offsets):
        strides = [(axis, int(stride or 0)) for axis, stride in static_offsets]
    fits = _fits_int32(sig, static_scale, strides)
    if sig.lens is None:
        itype = np.int32 if fits and (takes_int32 or not int64_arithmetic(sig)) else np.int64
        found = _table_lookup(op, data, lens, sig, scale=scale, offsets=offsets, itype=itype)
        if found is not None:
            return found, itype
    if fits and _int32_arithmetic(sig):
        scale = _as_int32(op, scale)
        offsets = [(axis, _as_int32(op, stride)) for axis, stride in offsets]
        src = _index_arithmetic(
            op, data, lens, sig, scale=scale, offsets=offsets, itype=np.int32
        )
        return src, np.int32
    folds = sig.lens is not None and sig.lead_dims() is not None  # a constant index
    if not int64_arithmetic(sig) and not folds:
        op.lacking(
            "the source index needs int64 arithmetic (its values may not fit in int32), "
            "which the target lacks"
        )
    scale = _as_int64_factor(op, scale, sig)
    offsets = [(axis, _as_int64_factor(op, stride, sig)) for axis, stride in offsets]
    src = _index_arithmetic(op, data, lens, sig, scale=scale, offsets=offsets, itype=np.int64)
    return src, np.int64


def _as_int64_factor(op: OpBuilder, value: ir.Value | None, sig: Signature) -> ir.Value | None:
    """A run-time scale or stride as a tensor the target multiplies by, in int64.

    Where it lacks ``Mul:dim``, the product of dims P becomes the sum of P ones
    (ConstantOfShape, ReduceSum): exact, and P is at most the number of rows.
    """
    if value is None or value.const_value is not None or sig.target_has(MUL_DIM):
        return value
    if not sig.target_has("ConstantOfShape", "ReduceSum"):
        return op.lacking(
            "a run-time stride needs Mul by a dim (Mul:dim) or ConstantOfShape+ReduceSum"
        )
    ones = op.ConstantOfShape(value, value=ir.Tensor(np.array([1], np.int64)))
    return op.ReduceSum(ones, keepdims=1)


def _as_int32(op: OpBuilder, value: ir.Value | None) -> ir.Value | None:
    """A scale or stride for int32 arithmetic, from the int64 one the form passed.

    A constant is made again in int32 (None for 1); a run-time one (a dim or a product
    of dims) is cast once (``dim_as_int32``: a dim from its shape read; the int64 Cast
    ``dim_vector`` gave it, where nothing else reads it, is dropped).
    """
    static = _static_int(value)
    if static is not None:
        return None if static == 1 else const(op, static, np.int32)
    assert value is not None
    return dim_as_int32(op, value)


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
    """``source_index`` by broadcast arithmetic over the leading axes, in ``itype``.

    Time-major nodes with a short batch are computed as [B, T] and transposed
    (``_time_inner``).
    """
    t, b, lead = sig.time_axis, sig.batch_axis, sig.lead_rank
    time_static = sig.dim(t)
    swapped = (time_static is None or sig.lens is None) and time_inner(sig)
    offset: ir.Value | None = None
    for axis, stride in offsets:
        where = position(axis, sig, swapped)
        grid = axis_grid(
            op,
            data,
            axis,
            sig,
            where,
            itype=itype,
            lens=lens,
            lens_shaped=True,
        )
        term = affine(op, grid, stride, None)
        offset = term if offset is None else op.Add(offset, term)
    if time_static is not None and sig.lens is not None:
        table = source_index_numpy(np.array(sig.lens, dtype=np.int64), time_static)  # [T, B]
        if t > b:
            table = table.T
        shape = [1] * lead
        shape[t], shape[b] = table.shape[0 if t < b else 1], table.shape[1 if t < b else 0]
        return affine(op, const(op, table.reshape(shape), itype), scale, offset)
    time_len = dim_vector(op, data, t, sig)
    # The one of the two placed first gets every axis (so the index has the full rank);
    # the other, and the offsets, meet it by broadcasting.
    at_b, at_t = position(b, sig, swapped), position(t, sig, swapped)
    clamped = place_along(
        op,
        clamped_lengths(op, lens, time_len, sig, itype),
        at_b,
        lead,
        sig,
        broadcast=at_b > at_t,
    )
    steps = place_along(
        op, iota(op, time_len, time_static, sig, itype), at_t, lead, sig, broadcast=at_t > at_b
    )
    src = select_source(op, steps, clamped, sig, scale=scale, offset=offset, itype=itype)
    if swapped:
        src = op.Transpose(src, perm=[1, 0])
    return src


def row_index(
    op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature, *, gather: str | None
) -> ir.Value:
    """The flat row index ``stride_t * src + sum(stride_k * coord_k)`` over the leading axes.

    With static leading dims every stride is a constant; else each is a product of the
    dims read (the last axis's is 1). ``gather`` reads it (``source_index``).
    """
    t, lead = sig.time_axis, sig.lead_rank
    static = sig.lead_dims()
    strides: list[ir.Value | None] = []
    for axis in range(lead):
        if static is not None:
            size = int(np.prod(static[axis + 1 :], dtype=np.int64))
            strides.append(None if size == 1 else const(op, size))
        elif axis + 1 < lead:
            strides.append(product_of_dims(op, data, axis + 1, sig))
        else:
            strides.append(None)
    offsets = [(axis, strides[axis]) for axis in range(lead) if axis != t]
    return source_index(op, data, lens, sig, scale=strides[t], offsets=offsets, gather=gather)
