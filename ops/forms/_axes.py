"""Coordinates along the leading axes, and products of their dims, as the forms read them."""

from __future__ import annotations

__all__ = ["axis_grid", "batch_lengths", "lead_shape_of", "product_of_dims"]

import numpy as np
import onnx_ir as ir

from revseq.ops.forms._emit import const, dim_vector, iota, place_along, shape_of
from revseq.ops.signature import OpBuilder, Signature
from revseq.ops.vocabulary import BATCH_FROM_DATA


def lead_shape_of(op: OpBuilder, data: ir.Value, sig: Signature) -> ir.Value:
    static = sig.lead_dims()
    if static is not None:
        return const(op, list(static))
    return op.Slice(shape_of(op, data), const(op, [0]), const(op, [sig.lead_rank]))


_GATHERED_BY = "revseq.gathered_by"
"""The key of the steps 0 .. B-1 the lengths were gathered by (``batch_lengths``), in
the gathered value's metadata: they are the batch's coordinates, shaped as the lengths."""


def batch_lengths(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """The lengths gathered at 0 .. B-1, B read from the data: the same values, the data's dim.

    Exporters declare the lengths with a symbolic dim of their own (tf2onnx: ``unk__18``
    beside the data's ``unk__16``). A backend that tracks symbols may not prove
    it the data's batch dim where a value shaped by the lengths meets one shaped by the
    data; gathered by an index counted from the data's batch dim, the lengths carry it.
    The steps they were gathered by are kept with them: a form that counts the batch
    reads those (``axis_grid``).
    """
    batch = dim_vector(op, data, sig.batch_axis, sig)
    steps = iota(op, batch, sig.dim(sig.batch_axis), sig)
    gathered = op.Gather(lens, steps, axis=0)
    gathered.meta[_GATHERED_BY] = steps
    return gathered


def axis_grid(
    op: OpBuilder,
    data: ir.Value,
    axis: int,
    sig: Signature,
    position: int | None = None,
    *,
    itype: type = np.int64,
    lens: ir.Value | None = None,
    lens_shaped: bool = False,
) -> ir.Value:
    """0 .. d-1 along ``axis`` of the leading axes, size 1 on the others.

    ``position`` places it in a swapped layout (default: at ``axis`` itself), shaped to
    broadcast (``place_along``). Given ``lens``, a symbolic batch axis counts
    the lengths instead of reading the data's dim: the index is [T', L] (T' a Range's
    length, L the lengths'), and a frontend that gives each its own symbol cannot add or
    concatenate a [B] from the data's shape to it (docs/backends.md). With
    ``lens_shaped`` the count is reshaped to the lengths' shape, so that it is [L] and
    not [B'] (a Range's own length) where it meets the index by broadcasting: such a
    frontend cannot emit that Add otherwise (a caller that expands it to the index's shape
    needs no Reshape). Not where the target takes the data's dim there
    (``BATCH_FROM_DATA``). Lengths gathered by the batch's steps (``batch_lengths``)
    give those steps, counted once.
    """
    counted = (
        lens is not None
        and axis == sig.batch_axis
        and sig.dim(axis) is None
        and not sig.target_lists(BATCH_FROM_DATA)
    )
    where = axis if position is None else position
    gathered_by = lens.meta.get(_GATHERED_BY) if counted and lens is not None else None
    if gathered_by is not None:  # 0 .. B-1 already, shaped as the lengths
        steps = gathered_by
        if itype is np.int32:
            steps = op.Cast(steps, to=ir.DataType.INT32)
        return place_along(op, steps, where, sig.lead_rank, sig, broadcast=True)
    size = op.Shape(lens) if counted else dim_vector(op, data, axis, sig)
    iota_ = iota(op, size, sig.dim(axis), sig, itype)
    if counted and lens_shaped:
        iota_ = op.Reshape(iota_, size)
    return place_along(op, iota_, where, sig.lead_rank, sig, broadcast=True)


def product_of_dims(op: OpBuilder, data: ir.Value, start: int, sig: Signature) -> ir.Value:
    """The product of dims ``start`` .. lead_rank-1 as a 1-element tensor.

    One dim is read directly; more are multiplied one by one (no ReduceProd of a
    shape: simple frontends do not convert it).
    """
    product = dim_vector(op, data, start, sig)
    for axis in range(start + 1, sig.lead_rank):
        product = op.Mul(product, dim_vector(op, data, axis, sig))
    return product
