"""The row form: Gather of whole rows of a ``[rows, ...]`` view by a flat row index."""

from __future__ import annotations

__all__ = ["ROW_VIEW", "gather_rows", "needs_allowzero"]

from typing import Literal

import numpy as np
import onnx_ir as ir

from revseq.ops.forms._axes import product_of_dims
from revseq.ops.forms._emit import const, dims_read, shape_of, unsqueeze
from revseq.ops.forms._index import row_index
from revseq.ops.forms._layout import gathers_flat, gathers_matrix
from revseq.ops.forms._matrix import flat_gather, gather_matrix
from revseq.ops.signature import OpBuilder, Signature
from revseq.ops.vocabulary import RESHAPE_ALLOWZERO, RESHAPE_VIEW

ROW_VIEW = frozenset({"Flatten", "Reshape", RESHAPE_ALLOWZERO, RESHAPE_VIEW})
"""What :func:`gather_rows`' view of the data may take: the Flatten or Reshape into rows
and any Reshape back (their ``allowzero`` variants)."""


def gather_rows(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """Gather on a [rows, ...] view with a flat row index.

    The flat index is ``stride_t * src + sum(stride_k * coord_k)`` over the other leading
    axes; with static shapes all of it but the lengths folds into constants. With static
    shapes the view is [rows, *trailing dims] (a Flatten where one dim trails), so the
    gather's output has the data's shape and needs no Reshape (a copy when it is a
    graph output); rows of one element
    are gathered with GatherElements on a 1-D view (Gather copies element by element).
    onnxruntime's Gather loses string elements when a gathered slice holds more than one
    (docs/backends.md), so string data (or data of unknown type) is gathered with GatherND.
    Rows of one element over two leading axes are gathered as a matrix, as in
    ``gather_elements``.
    """
    if gathers_matrix(sig):
        return gather_matrix(op, data, lens, sig)
    shape = sig.static_dims()
    lead = sig.lead_rank
    static = sig.lead_dims()
    single = gathers_flat(sig)
    if single:
        gather: str | None = "GatherElements"
    elif sig.dtype in (ir.DataType.STRING, None):
        gather = None  # GatherND, which takes int64 indices only
    else:
        gather = "Gather"
    flat = row_index(op, data, lens, sig, gather=gather)
    view_kind = _row_view(sig)
    if view_kind == "static":
        assert shape is not None and static is not None
        trailing = list(shape[lead:])
        # allowzero only where a static dim is 0: without zeros Reshape's default reading
        # is the same, and some converters lack the attribute (docs/backends.md).
        zeros = {"allowzero": 1} if 0 in shape else {}
        if single:
            return flat_gather(op, data, flat, shape)
        rows = int(np.prod(static, dtype=np.int64))
        view = op.Reshape(data, const(op, [rows, *trailing]), **zeros)
    elif view_kind == "inferred":
        # [-1, *trailing]: some backends cannot Flatten symbolic leading dims but
        # infer a -1; the view keeps the data's trailing dims.
        view = op.Reshape(data, const(op, [-1, *sig.dims[lead:]]))
    elif view_kind == "read":
        # [rows, *trailing] read from the shape, so that the gather's output has the
        # data's shape; allowzero: a run-time 0 must survive, and no -1 may meet it.
        # The Cast of the read: a frontend that keeps shapes as expressions cannot
        # Concat one to a tensor.
        rows = product_of_dims(op, data, 0, sig)
        trailing = dims_read(op, data, lead, sig)
        view = op.Reshape(data, op.Concat(rows, trailing, axis=0), allowzero=1)
    else:
        view = op.Flatten(data, axis=lead)
    if gather is None:
        # A string, or an unknown type (inside a function), may hit that Gather bug.
        gathered = op.GatherND(view, unsqueeze(op, flat, [lead], sig))
    else:
        gathered = op.Gather(view, flat, axis=0)
    if not _reshapes_back(sig, view_kind):
        return gathered  # the view kept the trailing dims: the data's shape already
    return op.Reshape(gathered, shape_of(op, data), allowzero=1)  # a run-time 0 must survive


def _static_trailing(sig: Signature) -> bool:
    """Whether every dim after the leading axes is static and none is 0.

    The row view is then ``Reshape(data, [-1, *trailing])``: a 0 would leave its -1
    undefined.
    """
    if sig.dims is None:
        return False
    trailing = sig.dims[sig.lead_rank :]
    return all(d is not None and d > 0 for d in trailing)


RowView = Literal["static", "inferred", "read", "flatten"]


def _row_view(sig: Signature) -> RowView:
    """How ``gather_rows`` views the data as rows.

    ``flatten``: a Flatten after the leading axes, wherever one dim trails them and the
    target Flattens these dims (rows of one element aside, gathered as a 1-D view): the
    same view as a Reshape to ``[rows, trailing]`` without a shape to read (a converter
    may read a Reshape's shape element by element, a host round trip each on a GPU).
    ``static``: every dim static, ``[rows, *trailing]`` as constants. ``inferred``:
    static trailing dims, ``[-1, *trailing]`` (for targets that cannot Flatten symbolic
    leading dims). ``read``: ``[rows, *trailing]`` read from the
    shape, where the target reshapes to a computed shape (``Reshape:view``) and several
    dims trail at run time (a Flatten view would need its gather's output reshaped
    back, a copy where that is the graph output) or one the target cannot Flatten.
    ``flatten`` also where none of these fits.
    """
    one_trailing = sig.dims is not None and sig.rank == sig.lead_rank + 1
    if one_trailing and sig.target_has("Flatten") and not gathers_flat(sig):
        return "flatten"
    if sig.static_dims() is not None:
        return "static"
    if _static_trailing(sig):
        return "inferred"
    if (
        sig.dims is not None
        and sig.target_has(RESHAPE_VIEW)
        and (sig.rank > sig.lead_rank + 1 or not sig.target_has("Flatten"))
    ):
        return "read"
    return "flatten"


def _reshapes_back(sig: Signature, view_kind: RowView) -> bool:
    """Whether ``gather_rows`` reshapes its gather's output back to the data's shape.

    Where its view is a Flatten of several trailing axes: the rank is unknown (inside a
    function), or the target lacks the ``[rows, *trailing]`` view (``Reshape:view``:
    it reshapes only to a shape as read).
    """
    return view_kind == "flatten" and (sig.dims is None or sig.rank > sig.lead_rank + 1)


def needs_allowzero(sig: Signature) -> bool:
    """Whether ``gather_rows`` reshapes with ``allowzero`` (opset 14): where a dim may be 0.

    A static shape without zeros reads the same without it; a view of run-time trailing
    dims, or a run-time shape reshaped back (unknown rank), may hold 0.
    """
    if gathers_matrix(sig):
        return False
    view_kind = _row_view(sig)
    if view_kind == "static":
        return 0 in (sig.static_dims() or ()) and not gathers_flat(sig)
    return view_kind == "read" or _reshapes_back(sig, view_kind)
