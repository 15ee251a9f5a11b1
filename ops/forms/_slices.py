"""Constant lengths as slices of the data: no index, no gather.

For a target that runs no gather with an index computed at run time, a node
whose lengths are constants is reversed the way one would write it by hand: the batch
entries in runs of equal length, each run's first L steps reversed by a step -1 Slice
and put back before the rest, the runs concatenated along the batch axis. Every value
is moved, never computed on: exact for every element type, NaN payloads included.
"""

from __future__ import annotations

import dataclasses

__all__ = [
    "SLICES_VIEW",
    "batch_first",
    "reverse_by_slices",
    "reverse_whole",
    "reverse_whole_batch_first",
    "reversing_slice_variants",
    "whole_reversal_bounds",
]

import numpy as np
import onnx_ir as ir

from revseq.errors import StrategyError
from revseq.ops.forms._emit import const
from revseq.ops.signature import OpBuilder, Signature
from revseq.ops.vocabulary import (
    CONCAT_DATA,
    REVERSING_SLICE,
    REVERSING_SLICE_HIGH_RANK,
    SLICE_DATA,
)

SLICES_VIEW = frozenset(
    {SLICE_DATA, CONCAT_DATA, REVERSING_SLICE, REVERSING_SLICE_HIGH_RANK, "Reshape"}
)
"""What :func:`reverse_by_slices` may take: Slices of the data, a Concat, and over a
rank-3 view (``_rank3_view``) its Reshapes."""

_FIRST = np.iinfo(np.int64).min  # a step -1 Slice's end: before the first step
_LAST = np.iinfo(np.int64).max

_MOST_RUNS = 64
"""The most runs of equal lengths sliced apart: each costs a few nodes."""


def _runs(sig: Signature) -> list[tuple[int, int, int]]:
    """(first, stop, length) of each run of batch entries of equal clamped length."""
    assert sig.lens is not None
    time_len = sig.dim(sig.time_axis)
    runs: list[tuple[int, int, int]] = []
    for entry, value in enumerate(sig.lens):
        length = max(0, value) if time_len is None else min(max(0, value), time_len)
        if runs and runs[-1][2] == length:
            runs[-1] = (runs[-1][0], entry + 1, length)
        else:
            runs.append((entry, entry + 1, length))
    return runs


def _reverse_head(op: OpBuilder, part: ir.Value, length: int, sig: Signature) -> ir.Value:
    """``part`` with its first ``length`` steps along time reversed."""
    axis = const(op, [sig.time_axis])
    time_len = sig.dim(sig.time_axis)
    whole = time_len is not None and length >= time_len
    head = part if whole else op.Slice(part, const(op, [0]), const(op, [length]), axis)
    flipped = op.Slice(head, const(op, [-1]), const(op, [_FIRST]), axis, const(op, [-1]))
    if whole:
        return flipped
    rest = op.Slice(part, const(op, [length]), const(op, [_LAST]), axis)
    return op.Concat(flipped, rest, axis=sig.time_axis)


def reverse_by_slices(
    op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature
) -> ir.Value:
    """The node as slices of ``data`` (the lengths are constants: ``lens`` is not read).

    Raises:
        StrategyError: The lengths are not constants, or fall in too many runs.
    """
    if sig.lens is None:
        raise StrategyError(f"strategy {'slices'!r} needs constant lengths")
    view = _rank3_view(sig)
    if view is not None:
        flat = dataclasses.replace(sig, rank=3, dims=view)
        out = reverse_by_slices(op, op.Reshape(data, const(op, list(view))), lens, flat)
        return op.Reshape(out, const(op, list(sig.static_dims() or ())))
    runs = _runs(sig)
    if len(runs) > _MOST_RUNS:
        raise StrategyError(
            f"strategy 'slices' would slice {len(runs)} runs of equal lengths apart "
            f"(at most {_MOST_RUNS})"
        )
    if len(runs) == 1:
        length = runs[0][2]
        return op.Identity(data) if length <= 1 else _reverse_head(op, data, length, sig)
    axis = const(op, [sig.batch_axis])
    parts = []
    for first, stop, length in runs:
        part = op.Slice(data, const(op, [first]), const(op, [stop]), axis)
        parts.append(part if length <= 1 else _reverse_head(op, part, length, sig))
    return op.Concat(*parts, axis=sig.batch_axis)


def whole_reversal_bounds(time_axis: int) -> tuple[list[int], ...]:
    """The starts, ends, axes and steps of the step -1 Slice that reverses the time axis."""
    return ([-1], [int(np.iinfo(np.int64).min)], [time_axis], [-1])


def reverse_whole(op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature) -> ir.Value:
    """A node whose lengths all reach T, as a step -1 Slice (the lengths not read).

    As inline writes it where the target has the Slice (``simplify.trivial_form``);
    the probes trace it as they trace the forms.
    """
    bounds = (const(op, values) for values in whole_reversal_bounds(sig.time_axis))
    return op.Slice(data, *bounds)


def batch_first(sig: Signature) -> tuple[int, ...]:
    """The axes with the batch first, the others in their order.

    The view a full reversal is written over where the target's converter takes a
    leading axis for the batch (``Profile.batch_leads``, ``simplify.batch_leading``).
    """
    assert sig.rank is not None, "a batch-first view needs the rank"
    return (sig.batch_axis, *(a for a in range(sig.rank) if a != sig.batch_axis))


def reverse_whole_batch_first(
    op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature
) -> ir.Value:
    """``reverse_whole`` over the data's view with the batch first, transposed back.

    As inline writes it for a target whose converter takes a leading batch; the probes
    trace it as they trace the forms.
    """
    perm = batch_first(sig)
    view = op.Transpose(data, perm=list(perm))
    bounds = (const(op, values) for values in whole_reversal_bounds(perm.index(sig.time_axis)))
    flipped = op.Slice(view, *bounds)
    return op.Transpose(flipped, perm=[perm.index(axis) for axis in range(len(perm))])


def reversing_slice_variants(sig: Signature) -> frozenset[str]:
    """What a step -1 Slice of the node's data needs of a target.

    ``Slice:reverse``, and over data of rank 4 and more (or of a rank unknown)
    ``Slice:reverse:high_rank``: some backends reverse up to rank 3 only.
    """
    if sig.rank is None or sig.rank > 3:
        return frozenset({REVERSING_SLICE, REVERSING_SLICE_HIGH_RANK})
    return frozenset({REVERSING_SLICE})


def _rank3_view(sig: Signature) -> tuple[int, int, int] | None:
    """``[d0, d1, rest]``: data of rank 4 or more seen as rank 3, or None.

    Where the batch and time axes lead, every dim is static and none is 0, and the
    target reverses by a step -1 Slice up to rank 3 only but has Reshape: the
    trailing axes move together, so reversing the view reverses the data.
    """
    dims = sig.static_dims()
    if dims is None or len(dims) <= 3 or sig.lead_rank != 2 or 0 in dims:
        return None
    if sig.target_has(REVERSING_SLICE_HIGH_RANK) or not sig.target_has("Reshape"):
        return None
    return (dims[0], dims[1], int(np.prod(dims[2:])))
