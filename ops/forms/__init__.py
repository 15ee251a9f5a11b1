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
    "STRATEGIES",
    "check_strategy",
    "FORMS",
    "Form",
    "emit",
    "gather_elements",
    "batch_first",
    "gather_nd",
    "lengths_may_stay_declared",
    "reverse_all",
    "reverse_whole",
    "reverse_whole_batch_first",
    "reversing_slice_variants",
    "runtime_index_lack",
    "view_kinds",
    "whole_reversal_bounds",
]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from revseq.errors import StrategyError
from revseq.ops.forms._axes import axis_grid, batch_lengths, lead_shape_of
from revseq.ops.forms._emit import (
    const,
    dim_vector,
    iota,
    pad_trailing,
    runtime_index_lack,
    shape_of,
    unsqueeze,
)
from revseq.ops.forms._index import int64_arithmetic, source_index, typed_source_index
from revseq.ops.forms._layout import gathers_matrix
from revseq.ops.forms._matrix import gather_matrix
from revseq.ops.forms._one_hot import reverse_by_one_hot
from revseq.ops.forms._rows import ROW_VIEW, gather_rows, needs_allowzero
from revseq.ops.forms._slices import (
    SLICES_VIEW,
    batch_first,
    reverse_by_slices,
    reverse_whole,
    reverse_whole_batch_first,
    reversing_slice_variants,
    whole_reversal_bounds,
)
from revseq.ops.signature import OpBuilder, Signature
from revseq.ops.vocabulary import (
    GATHER_ELEMENTS,
    GATHER_ND,
    GATHER_ND_BATCH_DIMS,
    GATHER_ND_BATCH_TUPLES,
    GATHER_ROWS,
    ONE_HOT,
    REVERSE_ALL,
    SLICES,
)


def gather_elements(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """The canonical form: GatherElements with an index as large as the data.

    Single-element rows are gathered as a matrix (``_gather_matrix``).
    """
    if gathers_matrix(sig):
        return gather_matrix(op, data, lens, sig)
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
    ``batch_dims`` (a target without it; opset 11), every leading axis gets a
    coordinate; so too where the tuples would hold two coordinates or more (a batch
    axis after the time axis) and the target lacks ``GatherND:batch_dims:tuples`` (its
    profile says it reads those wrong). The tuples are built in the source index's type
    and cast to int64 (GatherND's only index type) once, so that int32 index arithmetic
    stays int32 up to the gather.
    """
    t, lead = sig.time_axis, sig.lead_rank
    batch_dims = t if sig.opset >= 12 and sig.target_has(GATHER_ND_BATCH_DIMS) else 0
    if batch_dims and lead - batch_dims > 1 and not sig.target_has(GATHER_ND_BATCH_TUPLES):
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
            # index's own shape: a Concat with a column of the data's [T, B] does not
            # convert where a frontend cannot prove T' == T or unify L with
            # broadcast(L, B) (docs/backends.md).
            pair_lens = lens if symbolic_pair else None
            steps = axis_grid(op, data, axis, sig, itype=itype, lens=pair_lens)
            if symbolic_pair and not sig.target_has("Expand"):  # a target without Expand
                grid = op.Add(steps, op.Sub(src, src))  # broadcast by adding [T, B] zeros
            else:
                grid = op.Expand(steps, lead_shape)
        columns.append(unsqueeze(op, grid, [lead], sig))
    index = columns[0] if len(columns) == 1 else op.Concat(*columns, axis=lead)
    if itype is not np.int64:
        index = op.Cast(index, to=ir.DataType.INT64)
    if sig.opset < 12:  # GatherND-11 has no batch_dims attribute
        return op.GatherND(data, index)
    return op.GatherND(data, index, batch_dims=batch_dims)


@dataclasses.dataclass(frozen=True)
class Form:
    """A named decomposition, the opset it needs and the op kinds of its view of the data.

    ``min_opset`` is what the form needs at best; ``needs`` raises it for a signature
    where the form emits something newer (``gather_rows``' ``allowzero``). What a form
    uses is read from what it emits (``passes.inline.templates.uses``); ``view``
    names which of those op types and variants make its view of the data (reshaped,
    flattened, sliced): what most often decides whether the form fits a target, so the
    planner checks them first.
    """

    name: str
    build: Callable[[OpBuilder, ir.Value, ir.Value, Signature], ir.Value]
    min_opset: int
    description: str
    needs: Callable[[Signature], int] | None = None
    view: frozenset[str] = frozenset()

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
            GATHER_ELEMENTS,
            gather_elements,
            11,
            "GatherElements with a data-sized index (the canonical form)",
        ),
        Form(
            GATHER_ND,
            gather_nd,
            11,
            "GatherND gathering whole rows with (time, batch) index tuples",
        ),
        Form(
            GATHER_ROWS,
            gather_rows,
            11,
            "Gather of whole rows of a flattened [rows, rest] view",
            needs=lambda sig: 14 if needs_allowzero(sig) else 11,
            view=ROW_VIEW,
        ),
    )
}


def reverse_all(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """A node whose lengths all reach T (``simplify.trivial_form``), as one Gather.

    For a target without a step -1 Slice of the node's dims (``Slice:reverse``): the
    data gathered along the time axis at T-1 .. 0, a constant with a static T, else
    T-1 minus a Range. The lengths are not read: what computed
    them (tf2onnx's ``Expand`` of the data's own time length, which some frontends
    cannot convert) is left to nothing and removed.
    """
    time_len = dim_vector(op, data, sig.time_axis, sig)
    steps = iota(op, time_len, sig.dim(sig.time_axis), sig)
    last = op.Sub(time_len, const(op, [1]))
    return op.Gather(data, op.Sub(last, steps), axis=sig.time_axis)


_FULL_LENGTHS = Form(
    REVERSE_ALL,
    reverse_all,
    11,
    "Gather along time at T-1 .. 0",
)


_BY_SLICES = Form(
    SLICES,
    reverse_by_slices,
    10,
    "constant lengths as slices of the data: no index",
    view=SLICES_VIEW,
)


_BY_ONE_HOT = Form(
    ONE_HOT,
    reverse_by_one_hot,
    11,
    "a product with a 0/1 matrix computed from the lengths in float32: exact on finite "
    "data without -0.0 only",
)


_OWN_FORMS = {REVERSE_ALL: _FULL_LENGTHS, SLICES: _BY_SLICES, ONE_HOT: _BY_ONE_HOT}
"""Forms the planner takes by itself, never a strategy: the first two ignore the lengths
input, the last is exact on finite data only (a target asks for it by name)."""


STRATEGIES: tuple[str, ...] = ("auto", *FORMS)
"""The names ``strategy=`` accepts: "auto" (the planner picks a form), or a form's."""


def check_strategy(strategy: str) -> None:
    """Raise StrategyError unless ``strategy`` is one of ``STRATEGIES``."""
    if strategy not in STRATEGIES:
        raise StrategyError(
            f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )


def _named_form(strategy: str) -> Form:
    """The form ``strategy`` names (one of the planner's own among them)."""
    form = _OWN_FORMS.get(strategy) or FORMS.get(strategy)
    if form is None:
        check_strategy(strategy)
        raise StrategyError(f"strategy {strategy!r} names no form: the planner picks one")
    return form


def _fitting_form(strategy: str, sig: Signature) -> Form:
    """The named form, where ``sig``'s opset has what it needs."""
    form = _named_form(strategy)
    reason = form.available(sig)
    if reason is not None:
        raise StrategyError(reason)
    return form


def view_kinds(strategy: str) -> frozenset[str]:
    """The op types and variants that make the named form's view of the data.

    Raises:
        StrategyError: ``strategy`` names no form.
    """
    return _named_form(strategy).view


def lengths_may_stay_declared(sig: Signature) -> bool:
    """Whether lengths with a dim of their own may be read as declared (``emit``).

    Only where time and batch are the only leading axes (the op as ONNX defines it):
    where another leads too, its coordinates, read from the data's shape, meet the
    lengths' dim, and a runtime that tracks symbols failed to load the default there
    until the lengths were aligned.
    """
    return sig.lens_own_dim and sig.lead_rank == 2


def emit(
    op: OpBuilder,
    data: ir.Value,
    lens: ir.Value,
    sig: Signature,
    strategy: str,
    *,
    aligned: bool = True,
) -> ir.Value:
    """Emit the named form for one node and return the value replacing its output.

    ``REVERSE_ALL`` too, which the planner takes for a node whose lengths all reach T,
    ``SLICES``, for constant lengths where no gather form fits (neither is a strategy of
    its own: they do not read the lengths input), and ``ONE_HOT`` for a target whose
    domain is finite data. Lengths declared with a dim of their own are first given the
    data's batch dim (``batch_lengths``), unless ``aligned`` is False where
    ``lengths_may_stay_declared``: the caller emits both and keeps the smaller.
    """
    form = _fitting_form(strategy, sig)
    align = aligned or not lengths_may_stay_declared(sig)
    if sig.lens_own_dim and align and form not in (_FULL_LENGTHS, _BY_SLICES, _BY_ONE_HOT):
        lens = batch_lengths(op, data, lens, sig)
    return form.build(op, data, lens, sig)
