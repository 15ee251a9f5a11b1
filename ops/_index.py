"""The source index: how each layout computes it, and the measurements behind the choices.

Three strategies compute ``src`` (see :mod:`revseq.ops.forms`): one Gather of a constant
table of rows per length (static T), int32 arithmetic where every value provably fits
and the target runs it, and int64 arithmetic everywhere else. The layout choices
(transposing the index or the data, gathering single-element rows as a matrix) keep the
measurement that set each threshold beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from revseq.ops._emit import (
    affine,
    clamped_lengths,
    clamps,
    const,
    dim_vector,
    iota,
    lengths_in_range,
    place_along,
    select_source,
    shape_of,
)
from revseq.ops.errors import StrategyError
from revseq.ops.signature import OpBuilder, Signature, source_index_numpy

# The variant of a target that computes a time-major node's index in place, as [T, B]:
# no Transpose of the index (``_time_inner``) and none of single-element data
# (``transposes_data``). The swapped layouts below were measured on onnxruntime; its
# probe times each backend's cheapest form both ways per cost class (``Layout`` in
# :mod:`revseq.ops.profiles`), and the planner adds this variant where in place ran
# cheaper there. Side by side, in place against swapped (three passes, x the copy
# floor): single-element rows ``[2000, 16]`` 0.67x on tinygrad, 0.75-0.88x OpenVINO,
# 0.82-0.93x TVM, but 1.10x onnx2torch and 3.5-4.0x tract.
INDEX_IN_PLACE = "Index:in_place"

# Time-major nodes with rows of several elements and at most this many batch entries
# compute their index as [B, T] and transpose it (single-element rows transpose the data
# instead: `transposes_data`). onnxruntime's broadcasting loops over the innermost
# dimension; paired medians (1 thread, run-time lengths, int32 arithmetic, x native):
# [1000, 8, 4] 1.86 vs 2.28 in place, [2000, 16, 2] 1.46 vs 1.72, [600, 4, 16] 1.53 vs
# 2.10, [400, 32, 2] 1.66 vs 1.68. (Rows of a few elements are slow either way:
# onnxruntime's Gather spends about 10 ns per row.)
_TIME_INNER_MAX_BATCH = 16


# A symbolic batch counts as short (`_short_batch`). One process, 1 thread, time and batch
# symbolic, paired medians x native, in place vs swapped: [1000, 1, 16] 7.35 vs 2.48,
# [1000, 8, 1] 2.38 vs 1.02, [2000, 16] 1.48 vs 0.83, [128, 32, 64] 1.38 vs 1.28; a long
# batch pays the Transpose: [512, 64] 0.85 vs 0.92, [256, 128] 0.76 vs 0.89.


def _short_batch(sig: Signature, most: int) -> bool:
    """Whether the batch is at most ``most`` long and shorter than T, or presumably so.

    A symbolic batch counts as short unless a static T is at most ``most``: sequence
    models run batches of 1 to a few dozen over longer sequences, and there the in-place
    layout costs most (a batch of 1 broadcasts element by element), while the swapped
    one costs one Transpose of the index where the batch turns out long.
    """
    batch, time_len = sig.dim(sig.batch_axis), sig.dim(sig.time_axis)
    if batch is None:
        return time_len is None or time_len > most
    if batch > most:
        return False
    return time_len is None or time_len > batch


def _time_inner(sig: Signature) -> bool:
    """Whether to compute a time-major node's index with time as the inner axis."""
    if sig.lead_rank != 2 or sig.time_axis > sig.batch_axis or not sig.allows("Transpose"):
        return False
    if sig.takes(INDEX_IN_PLACE):
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


def transposes_data(sig: Signature) -> bool:
    """Whether to gather a rank-2 time-major node on the [B, T] transpose of its data.

    Not with constant lengths: a constant index costs nothing to compute in any layout.
    """
    if (
        sig.rank != 2
        or sig.time_axis != 0
        or sig.lens is not None
        or not sig.allows("Transpose")
        or sig.takes(INDEX_IN_PLACE)
    ):
        return False
    return _short_batch(sig, _TRANSPOSE_DATA_MAX_BATCH)


def gathers_matrix(sig: Signature) -> bool:
    """Whether the node's rows are single elements that GatherElements moves as a matrix.

    As the matrix itself, or with static dims as its 1-D view, where GatherElements
    moves the data's type on 1-D data only (``gathers_flat``).
    """
    return (
        sig.index_covers_data()
        and (sig.moves("GatherElements") or gathers_flat(sig))
        and (sig.rank == 2 or sig.allows("Squeeze", "Unsqueeze"))
    )


def gathers_flat(sig: Signature) -> bool:
    """Whether static single-element rows are gathered by GatherElements on a 1-D view.

    The view and its index are Reshapes to a constant length, and so is the result back:
    with symbolic dims that Reshape would need ``allowzero`` (a run-time 0), which
    onnx2torch, the backend that needs the view (``GatherElements:flat``), lacks.
    """
    return (
        sig.static_dims() is not None
        and sig.row_size() == 1
        and sig.moves("GatherElements:flat")
        and sig.allows("Reshape")
    )


# The variant of a target that runs the index arithmetic in int32 exactly: lengths
# clamped in int64 and cast, Less, Where, Add, Sub and Mul over int32, and a Cast to
# int64 for a gather that takes no int32 indices (variants "Gather:int32" and
# "GatherElements:int32"; GatherND takes int64 only).
INT32_INDEX = "Index:int32"

# The variant of a target that runs the same arithmetic in int64 over [T, B] and
# data-sized values, on its device. onnxruntime-web's WebGPU EP lacks it: it has no
# int64 Less, Where, Sub, Expand or Concat, nor a Cast from int64, so an int64 index is
# computed on the CPU and uploaded. A target without it (and so the portable default,
# which runs there too) computes every index in int32. With symbolic dims that is exact
# while each index value is below 2^31: the coordinate forms' values are time steps and
# batch entries, the row form's are rows of the leading axes (with static dims the
# bound is checked when the node is inlined).
INT64_INDEX = "Index:int64"

# Indexes of at least this many elements are computed in int32 where every value
# provably fits: onnxruntime's int32 Where, Less and Sub run at about twice the int64
# speed, and below this size the extra Cast costs more than it saves.
_INT32_MIN_ELEMENTS = 1 << 12


def int64_arithmetic(sig: Signature) -> bool:
    """Whether the target runs the index arithmetic in int64 (``INT64_INDEX``)."""
    return sig.allows(INT64_INDEX)


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
    if not sig.allows("Cast", INT32_INDEX):
        return False
    if sig.lens is not None and (int64_arithmetic(sig) or sig.lead_dims() is not None):
        return False  # constant lengths fold into a constant index
    if not int64_arithmetic(sig):
        return True
    lead = sig.lead_dims()
    return (
        lead is not None
        and clamps(sig)
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
        or not clamps(sig)
        or (t < b and not sig.allows("Transpose"))
    ):
        return None
    # Column L of the [T, T+1] source index of lengths 0 .. T is row L of the table.
    table = np.ascontiguousarray(source_index_numpy(np.arange(time_len + 1), time_len).T)
    clamped = lengths_in_range(op, lens, sig, np.int64)
    rows = op.Gather(const(op, table * scale, itype), clamped, axis=0)  # [B, T]
    bias = np.zeros((batch, 1), dtype=np.int64)
    for axis, stride in offsets:
        if axis == b:
            bias = bias + np.arange(batch, dtype=np.int64)[:, None] * stride
    if bias.any():
        rows = op.Add(rows, const(op, bias, itype))
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
    direct = gather is not None and sig.allows(f"{gather}:int32")
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
    if strides is not None and static_scale is not None and sig.lens is None:
        itype = np.int32 if fits and (takes_int32 or not int64_arithmetic(sig)) else np.int64
        found = _table_lookup(op, lens, sig, scale=static_scale, offsets=strides, itype=itype)
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
        raise StrategyError(
            "the source index needs int64 arithmetic (its values may not fit in int32), "
            "which the target lacks"
        )
    scale = _as_int64_factor(op, scale, sig)
    offsets = [(axis, _as_int64_factor(op, stride, sig)) for axis, stride in offsets]
    src = _index_arithmetic(op, data, lens, sig, scale=scale, offsets=offsets, itype=np.int64)
    return src, np.int64


# The variant of a target that multiplies an int64 tensor by a dim read from a shape.
# tract 0.23 keeps such a dim as a symbol and cannot multiply a tensor by it ("Undetermined
# symbol in expression"); an int32 Cast of it, or a count of ones, is an ordinary tensor.
MUL_DIM = "Mul:dim"


def _as_int64_factor(op: OpBuilder, value: ir.Value | None, sig: Signature) -> ir.Value | None:
    """A run-time scale or stride as a tensor the target multiplies by, in int64.

    Where it lacks ``Mul:dim``, the product of dims P becomes the sum of P ones
    (ConstantOfShape, ReduceSum): exact, and P is at most the number of rows.
    """
    if value is None or value.const_value is not None or sig.allows(MUL_DIM):
        return value
    if not sig.allows("ConstantOfShape", "ReduceSum"):
        raise StrategyError(
            "a run-time stride needs Mul by a dim (Mul:dim) or ConstantOfShape+ReduceSum"
        )
    ones = op.ConstantOfShape(value, value=ir.Tensor(np.array([1], np.int64)))
    return op.ReduceSum(ones, keepdims=1)


def _as_int32(op: OpBuilder, value: ir.Value | None) -> ir.Value | None:
    """A scale or stride for int32 arithmetic, from the int64 one the form passed.

    A constant is made again in int32 (None for 1); a run-time one (a dim or a product
    of dims) is cast once: a dim read from a shape straight to int32, not through the
    int64 Cast ``dim_vector`` gives it (then dead, and dropped).
    """
    static = _static_int(value)
    if static is not None:
        return None if static == 1 else const(op, static, np.int32)
    assert value is not None
    read = value.producer()
    if read is not None and read.op_type == "Cast" and _reads_shape(read.inputs[0]):
        value = read.inputs[0]
    return op.Cast(value, to=ir.DataType.INT32)


def _reads_shape(value: ir.Value | None) -> bool:
    """Whether ``value`` is a Shape's output, or a Slice of one (before opset 15)."""
    node = None if value is None else value.producer()
    if node is not None and node.op_type == "Slice":
        node = node.inputs[0].producer() if node.inputs[0] is not None else None
    return node is not None and node.op_type == "Shape"


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
    swapped = (time_static is None or sig.lens is None) and _time_inner(sig)
    offset: ir.Value | None = None
    for axis, stride in offsets:
        where = _position(axis, sig, swapped)
        grid = axis_grid(
            op,
            data,
            axis,
            sig,
            where,
            itype=itype,
            broadcast=True,
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
    at_b, at_t = _position(b, sig, swapped), _position(t, sig, swapped)
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


def lead_shape_of(op: OpBuilder, data: ir.Value, sig: Signature) -> ir.Value:
    static = sig.lead_dims()
    if static is not None:
        return const(op, list(static))
    return op.Slice(shape_of(op, data), const(op, [0]), const(op, [sig.lead_rank]))


# The variant of a target whose index adds a batch count read from the data's shape to
# one that broadcasts against the lengths: the count then shares the data's dim read
# with the row stride, with no Shape of the lengths and no Reshape to it (see
# ``axis_grid``; a ``LEAN_VARIANTS`` step).
BATCH_FROM_DATA = "Range:data_dim"


def axis_grid(
    op: OpBuilder,
    data: ir.Value,
    axis: int,
    sig: Signature,
    position: int | None = None,
    *,
    itype: type = np.int64,
    broadcast: bool = False,
    lens: ir.Value | None = None,
    lens_shaped: bool = False,
) -> ir.Value:
    """0 .. d-1 along ``axis`` of the leading axes, size 1 on the others.

    ``position`` places it in a swapped layout (default: at ``axis`` itself);
    ``broadcast`` as for ``place_along``. Given ``lens``, a symbolic batch axis counts
    the lengths instead of reading the data's dim: the index is [T', L] (T' a Range's
    length, L the lengths'), and a frontend that gives each its own symbol (TVM Relax,
    tract) cannot add or concatenate a [B] from the data's shape to it. With
    ``lens_shaped`` the count is reshaped to the lengths' shape, so that it is [L] and
    not [B'] (a Range's own length) where it meets the index by broadcasting: TVM
    cannot emit that Add otherwise (a caller that expands it to the index's shape
    needs no Reshape). Not where the target takes the data's dim there
    (``BATCH_FROM_DATA``).
    """
    counted = (
        lens is not None
        and axis == sig.batch_axis
        and sig.dim(axis) is None
        and not sig.takes(BATCH_FROM_DATA)
    )
    size = op.Shape(lens) if counted else dim_vector(op, data, axis, sig)
    where = axis if position is None else position
    iota_ = iota(op, size, sig.dim(axis), sig, itype)
    if counted and lens_shaped:
        iota_ = op.Reshape(iota_, size)
    return place_along(op, iota_, where, sig.lead_rank, sig, broadcast=broadcast)


def product_of_dims(op: OpBuilder, data: ir.Value, start: int, sig: Signature) -> ir.Value:
    """The product of dims ``start`` .. lead_rank-1 as a 1-element tensor.

    One dim is read directly; more are multiplied one by one (no ReduceProd of a
    shape: simple frontends do not convert it).
    """
    product = dim_vector(op, data, start, sig)
    for axis in range(start + 1, sig.lead_rank):
        product = op.Mul(product, dim_vector(op, data, axis, sig))
    return product
