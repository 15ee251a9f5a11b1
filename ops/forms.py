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
    "FORMS",
    "REVERSE_ALL",
    "REVERSING_SLICE",
    "REVERSING_SLICE_HIGH_RANK",
    "Form",
    "Signature",
    "emit",
    "source_index_numpy",
]

import dataclasses
import logging
from collections.abc import Callable
from typing import Literal

import numpy as np
import onnx_ir as ir

from revseq.ops._emit import (
    const,
    dim_vector,
    dims_read,
    iota,
    pad_trailing,
    shape_of,
    squeeze,
    unsqueeze,
)
from revseq.ops._index import (
    axis_grid,
    gathers_flat,
    gathers_matrix,
    int64_arithmetic,
    lead_shape_of,
    product_of_dims,
    source_index,
    transposes_data,
    typed_source_index,
)
from revseq.ops.errors import StrategyError
from revseq.ops.signature import OpBuilder, Signature, source_index_numpy

logger = logging.getLogger(__name__)


def _gather_matrix(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """GatherElements on the data as a [T, B] or [B, T] matrix (single-element rows).

    Trailing size-1 axes are squeezed off first and put back after: GatherElements on
    ``[T, B, 1]`` runs 4x slower in onnxruntime than on ``[T, B]``. A time-major matrix
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
    if sig.moves("GatherElements"):
        src = source_index(op, matrix, lens, sig, gather="GatherElements")
        return op.GatherElements(matrix, src, axis=sig.time_axis)
    dims = sig.static_dims()
    assert dims is not None, "a flat view needs static dims"
    flat = _row_index(op, matrix, lens, sig, gather="GatherElements")
    return _flat_gather(op, matrix, flat, dims)


def _row_index(
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


def _flat_gather(
    op: OpBuilder, data: ir.Value, flat: ir.Value, shape: tuple[int, ...]
) -> ir.Value:
    """GatherElements of single-element rows on the 1-D view of static ``data``.

    ``flat`` is the index of each element as the leading axes hold it; the result is
    reshaped to ``shape``, the data's. Empty data has nothing to move (and a Reshape to
    a shape holding 0 would need ``allowzero``, which some converters lack: onnx2torch).
    """
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        return op.Identity(data)
    flat_view = op.Reshape(data, const(op, [size]))
    flat_index = op.Reshape(flat, const(op, [size]))
    gathered = op.GatherElements(flat_view, flat_index, axis=0)
    return op.Reshape(gathered, const(op, list(shape)))


def gather_elements(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """The canonical form: GatherElements with an index as large as the data.

    Single-element rows are gathered as a matrix (``_gather_matrix``).
    """
    if gathers_matrix(sig):
        return _gather_matrix(op, data, lens, sig)
    src = source_index(op, data, lens, sig, gather="GatherElements")
    src = pad_trailing(op, src, data, sig.lead_rank, sig)
    if not sig.index_covers_data():
        static = sig.static_dims()  # a constant: no Shape at run time
        src = op.Expand(src, shape_of(op, data) if static is None else const(op, list(static)))
    return op.GatherElements(data, src, axis=sig.time_axis)


def gather_nd(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """GatherND over the leading axes: one index tuple per row of trailing elements.

    The axes before the time axis are GatherND batch dims; the tuple holds the source
    step and the coordinates of the leading axes after the time axis. Without
    ``batch_dims`` (WebNN; opset 11), every leading axis gets a coordinate; so too where
    the tuples would hold two coordinates or more (a batch axis after the time axis)
    and the target lacks ``GatherND:batch_dims:tuples`` (MNN 3.6 reads those wrong). The
    tuples are built in the source index's type and cast to int64 (GatherND's only index
    type) once, so that int32 index arithmetic stays int32 up to the gather.
    """
    t, lead = sig.time_axis, sig.lead_rank
    batch_dims = t if sig.opset >= 12 and sig.allows("GatherND:batch_dims") else 0
    if batch_dims and lead - batch_dims > 1 and not sig.allows("GatherND:batch_dims:tuples"):
        batch_dims = 0
    # A constant table stays int64 where the target has int64 arithmetic: no Cast then.
    narrow = not int64_arithmetic(sig)
    src, itype = typed_source_index(op, data, lens, sig, takes_int32=narrow)
    symbolic_pair = lead == 2 and sig.lead_dims() is None
    lead_shape = op.Shape(src) if symbolic_pair else lead_shape_of(op, data, sig)
    columns = []
    for axis in range(batch_dims, lead):
        if axis == t and lead == 2:
            grid = src  # [T, B] or [B, T] already
        elif axis == t:
            grid = op.Expand(src, lead_shape)
        else:
            # With symbolic dims the batch coordinates count the lengths and take the
            # index's own shape: a Concat with a column of the data's [T, B] converts
            # neither in TVM (it cannot prove T' == T) nor in tract (it cannot unify L
            # with broadcast(L, B)).
            pair_lens = lens if symbolic_pair else None
            steps = axis_grid(op, data, axis, sig, itype=itype, broadcast=True, lens=pair_lens)
            grid = op.Expand(steps, lead_shape)
        columns.append(unsqueeze(op, grid, [lead], sig))
    index = columns[0] if len(columns) == 1 else op.Concat(*columns, axis=lead)
    if itype is not np.int64:
        index = op.Cast(index, to=ir.DataType.INT64)
    if sig.opset < 12:  # GatherND-11 has no batch_dims attribute
        return op.GatherND(data, index)
    return op.GatherND(data, index, batch_dims=batch_dims)


def gather_rows(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """Gather on a [rows, ...] view with a flat row index.

    The flat index is ``stride_t * src + sum(stride_k * coord_k)`` over the other leading
    axes; with static shapes all of it but the lengths folds into constants. With static
    shapes the view is [rows, *trailing dims] (a Flatten where one dim trails), so the
    gather's output has the data's shape and needs no Reshape (a copy when it is a
    graph output); rows of one element
    are gathered with GatherElements on a 1-D view (Gather copies element by element).
    onnxruntime's Gather loses string elements when a gathered slice holds more than one
    (BACKENDS.md), so string data (or data of unknown type) is gathered with GatherND.
    Rows of one element over two leading axes are gathered as a matrix, as in
    ``gather_elements``.
    """
    if gathers_matrix(sig):
        return _gather_matrix(op, data, lens, sig)
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
    flat = _row_index(op, data, lens, sig, gather=gather)
    view_kind = _row_view(sig)
    if view_kind == "static":
        assert shape is not None and static is not None
        trailing = list(shape[lead:])
        # allowzero only where a static dim is 0: without zeros Reshape's default reading
        # is the same, and some converters (onnx2torch) lack the attribute.
        zeros = {"allowzero": 1} if 0 in shape else {}
        if single:
            return _flat_gather(op, data, flat, shape)
        rows = int(np.prod(static, dtype=np.int64))
        view = op.Reshape(data, const(op, [rows, *trailing]), **zeros)
    elif view_kind == "inferred":
        # [-1, *trailing]: tract cannot Flatten symbolic leading dims ("square of
        # symbols") but infers a -1; the view keeps the data's trailing dims.
        view = op.Reshape(data, const(op, [-1, *sig.dims[lead:]]))
    elif view_kind == "read":
        # [rows, *trailing] read from the shape, so that the gather's output has the
        # data's shape; allowzero: a run-time 0 must survive, and no -1 may meet it.
        # The Cast of the read: TVM cannot Concat a shape expression to a tensor.
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
    same view as a Reshape to ``[rows, trailing]``, without a shape to read, which
    onnx2torch's Reshape reads element by element (on the CPU 29 us a call against
    Flatten's 10, `[64, 32, 256]` float32; on CUDA each element read syncs the host).
    ``static``: every dim static, ``[rows, *trailing]`` as constants. ``inferred``:
    static trailing dims, ``[-1, *trailing]`` (tract, tinygrad and OpenVINO cannot
    Flatten symbolic leading dims). ``read``: ``[rows, *trailing]`` read from the
    shape, where the target reshapes to a computed shape (``Reshape:view``) and several
    dims trail at run time (a Flatten view would need its gather's output reshaped
    back, and that Reshape copies where it makes the graph output: onnxruntime profile,
    `[50, 16, 8, 64]` float32 with every dim symbolic, 41 us of the form's 150) or one
    that the target cannot Flatten (tract: "square of symbols"). ``flatten`` also
    where none of these fits.
    """
    one_trailing = sig.dims is not None and sig.rank == sig.lead_rank + 1
    if one_trailing and sig.allows("Flatten") and not gathers_flat(sig):
        return "flatten"
    if sig.static_dims() is not None:
        return "static"
    if _static_trailing(sig):
        return "inferred"
    if (
        sig.dims is not None
        and sig.allows("Reshape:view")
        and (sig.rank > sig.lead_rank + 1 or not sig.allows("Flatten"))
    ):
        return "read"
    return "flatten"


def _reshapes_back(sig: Signature, view_kind: RowView) -> bool:
    """Whether ``gather_rows`` reshapes its gather's output back to the data's shape.

    Where its view is a Flatten of several trailing axes: the rank is unknown (inside a
    function), or the target lacks the ``[rows, *trailing]`` view (``Reshape:view``:
    TVM reshapes only to a shape as read).
    """
    return view_kind == "flatten" and (sig.dims is None or sig.rank > sig.lead_rank + 1)


def _needs_allowzero(sig: Signature) -> bool:
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


@dataclasses.dataclass(frozen=True)
class Form:
    """A named decomposition and the opset it needs.

    ``min_opset`` is what the form needs at best; ``needs`` raises it for a signature
    where the form emits something newer (``gather_rows``' ``allowzero``).
    """

    name: str
    build: Callable[[OpBuilder, ir.Value, ir.Value, Signature], ir.Value]
    min_opset: int
    description: str
    needs: Callable[[Signature], int] | None = None

    def available(self, sig: Signature) -> str | None:
        """None if the form fits ``sig``, else the reason it does not."""
        opset = self.min_opset if self.needs is None else self.needs(sig)
        if sig.opset < opset:
            return f"strategy {self.name!r} needs opset >= {opset}"
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
            11,
            "GatherND gathering whole rows with (time, batch) index tuples",
        ),
        Form(
            "gather_rows",
            gather_rows,
            11,
            "Gather of whole rows of a flattened [rows, rest] view",
            needs=lambda sig: 14 if _needs_allowzero(sig) else 11,
        ),
    )
}


REVERSING_SLICE = "Slice:reverse"
"""The variant a step -1 Slice of the data is: a node whose lengths all reach T becomes
one where the target has it (``simplify.trivial_form``)."""

REVERSING_SLICE_HIGH_RANK = "Slice:reverse:high_rank"
"""The same Slice over data of rank 4 and more (MNN 3.6.1 has it up to rank 3)."""

REVERSE_ALL = "reverse_all"
"""The form of a node whose lengths all reach T, where no step -1 Slice runs."""


def reverse_all(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """A node whose lengths all reach T (``simplify.trivial_form``), as one Gather.

    For a target without a step -1 Slice of the node's dims (``Slice:reverse``; tract
    with a symbolic dim): the data gathered along the time axis at T-1 .. 0, a constant
    with a static T, else T-1 minus a Range. The lengths are not read: what computed
    them (tf2onnx's ``Expand`` of the data's own time length, which TVM cannot convert)
    is left to nothing and removed.
    """
    time_len = dim_vector(op, data, sig.time_axis, sig)
    steps = iota(op, time_len, sig.dim(sig.time_axis), sig)
    last = op.Sub(time_len, const(op, [1]))
    return op.Gather(data, op.Sub(last, steps), axis=sig.time_axis)


_FULL_LENGTHS = Form(REVERSE_ALL, reverse_all, 11, "Gather along time at T-1 .. 0")


def emit(
    op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature, strategy: str
) -> ir.Value:
    """Emit the named form for one node and return the value replacing its output.

    ``REVERSE_ALL`` too, which the planner takes for a node whose lengths all reach T
    (never a strategy of its own: it ignores the lengths).
    """
    form = _FULL_LENGTHS if strategy == REVERSE_ALL else FORMS.get(strategy)
    if form is None:
        raise StrategyError(
            f"unknown strategy {strategy!r}; choose one of {', '.join(sorted(FORMS))}"
        )
    reason = form.available(sig)
    if reason is not None:
        raise StrategyError(reason)
    return form.build(op, data, lens, sig)
