"""Single-element rows: the data gathered as a ``[T, B]`` matrix, or as its 1-D view.

Where every row holds one element (rank-2 data, or trailing size-1 axes squeezed off)
GatherElements needs no data-sized index: its index is the ``[T, B]`` source index
itself. Where a target's GatherElements moves the type on 1-D data only
(``GatherElements:flat``: a kernel may keep a signalling float16 NaN there and quiet it
on a matrix), static rows are gathered as the 1-D view, by a flat index.
"""

from __future__ import annotations

__all__ = ["flat_gather", "gather_matrix"]

import dataclasses

import numpy as np
import onnx_ir as ir

from revseq.ops.forms._emit import const, squeeze, unsqueeze
from revseq.ops.forms._index import row_index, source_index
from revseq.ops.forms._layout import transposes_data
from revseq.ops.signature import OpBuilder, Signature


def gather_matrix(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """GatherElements on the data as a [T, B] or [B, T] matrix (single-element rows).

    Trailing size-1 axes are squeezed off first and put back after: onnxruntime's
    GatherElements runs ``[T, B, 1]`` several times slower than ``[T, B]``. A time-major matrix
    with a short batch is gathered transposed (``transposes_data``), so that its index
    is computed with time innermost.
    """
    trailing = list(range(2, sig.rank or 2))
    dims = tuple(sig.dims or (None, None))[:2]
    matrix_sig = dataclasses.replace(sig, rank=2, dims=dims)
    matrix = squeeze(op, data, trailing, sig)
    if transposes_data(matrix_sig):
        transposed = op.Transpose(matrix, perm=[1, 0])
        batch_major = dataclasses.replace(
            matrix_sig, batch_axis=0, time_axis=1, dims=(dims[1], dims[0])
        )
        gathered = op.Transpose(_gather_time(op, transposed, lens, batch_major), perm=[1, 0])
    else:
        gathered = _gather_time(op, matrix, lens, matrix_sig)
    return unsqueeze(op, gathered, trailing, sig)


def _gather_time(op: OpBuilder, matrix: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """GatherElements along the time axis of a rank-2 ``matrix``.

    Where GatherElements moves the data's type on 1-D data only (``gathers_flat``), the
    matrix is gathered as its 1-D view with a flat index (``stride_t * src + stride_b *
    b``), static dims.
    """
    if sig.gather_moves_data("GatherElements"):
        src = source_index(op, matrix, lens, sig, gather="GatherElements")
        return op.GatherElements(matrix, src, axis=sig.time_axis)
    dims = sig.static_dims()
    assert dims is not None, "a flat view needs static dims"
    flat = row_index(op, matrix, lens, sig, gather="GatherElements")
    return flat_gather(op, matrix, flat, dims)


def flat_gather(
    op: OpBuilder, data: ir.Value, flat: ir.Value, shape: tuple[int, ...]
) -> ir.Value:
    """GatherElements of single-element rows on the 1-D view of static ``data``.

    ``flat`` is the index of each element as the leading axes hold it; the result is
    reshaped to ``shape``, the data's. Empty data has nothing to move (and a Reshape to
    a shape holding 0 would need ``allowzero``, which some converters lack).
    """
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        return op.Identity(data)
    flat_view = op.Reshape(data, const(op, [size]))
    flat_index = op.Reshape(flat, const(op, [size]))
    gathered = op.GatherElements(flat_view, flat_index, axis=0)
    return op.Reshape(gathered, const(op, list(shape)))
