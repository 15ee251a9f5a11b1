"""Lengths at run time without a gather: each step picked by a 0/1 matrix product.

For a target that runs no gather with an index computed at run time, no comparison, no
select and no Cast (its layers compute in float32), each batch entry's ``[T, F]``
steps are multiplied by a ``[T, T]`` matrix whose row ``t`` holds one 1, at the source
step ``src(t)``::

    k   = clip(L - t, 0, 1)                 # 1 where t < L
    src = t + k * (L - 1 - 2t)              # L - 1 - t there, else t
    P   = relu(1 - |src - s|)               # s = 0 .. T-1: 1 at s = src(t)

all in float32, exact for lengths below 2**24. A step of the product sums T terms, one
of them the data and the others 0 times data: exact where the data is finite, but
-0.0 comes back +0.0 beside a +0.0 term, and an inf or NaN in an entry's sequence
makes NaN of every step of it (0 * inf). The form is exact on that domain only
(``FINITE``): never chosen silently, a target asks for it by name (``NAME-finite``).
"""

from __future__ import annotations

__all__ = ["reverse_by_one_hot"]

import math

import numpy as np
import onnx_ir as ir

from revseq.errors import StrategyError
from revseq.ops.forms._emit import const, unsqueeze
from revseq.ops.signature import OpBuilder, Signature

_LONGEST = 1024
"""The longest time axis taken: the matrix holds T*T floats per batch entry."""


def _fits(sig: Signature) -> tuple[int, ...]:
    """The node's static dims, or StrategyError saying why the form does not fit."""
    dims = sig.static_dims()
    if dims is None:
        raise StrategyError(f"strategy {'one_hot'!r} needs static dims")
    if sig.dtype != ir.DataType.FLOAT:
        raise StrategyError(f"strategy {'one_hot'!r} moves float32 data only")
    if dims[sig.time_axis] > _LONGEST:
        raise StrategyError(
            f"strategy {'one_hot'!r} takes at most {_LONGEST} steps, not {dims[sig.time_axis]}"
        )
    return dims


def reverse_by_one_hot(
    op: OpBuilder, data: ir.Value, lens: ir.Value, sig: Signature
) -> ir.Value:
    """The node as a batched product with a 0/1 matrix computed from the lengths.

    The data is viewed as ``[B, T, F]`` (a Transpose where the axes are not leading,
    then a Reshape) and viewed back after. The lengths are read as float32: cast where
    they are an integer value (``Plan.lengths`` gives an input made float32 instead,
    which is what a float-only runtime is fed).

    Raises:
        StrategyError: Symbolic dims, data other than float32, or too long a time axis.
    """
    dims = _fits(sig)
    rank = len(dims)
    time_len, batch = dims[sig.time_axis], dims[sig.batch_axis]
    rest = [a for a in range(rank) if a not in (sig.batch_axis, sig.time_axis)]
    perm = [sig.batch_axis, sig.time_axis, *rest]
    moved = data if perm == list(range(rank)) else op.Transpose(data, perm=perm)
    width = math.prod(dims[a] for a in rest)
    view = op.Reshape(moved, const(op, [batch, time_len, width]))

    floats = (
        lens if sig.lens_dtype == ir.DataType.FLOAT else op.Cast(lens, to=ir.DataType.FLOAT)
    )
    zero, one = const(op, 0.0, np.float32), const(op, 1.0, np.float32)
    top = const(op, float(time_len), np.float32)
    column = unsqueeze(op, op.Clip(floats, zero, top), [1], sig)  # [B, 1]
    steps = np.arange(time_len, dtype=np.float32).reshape(1, time_len)
    inside = op.Clip(op.Sub(column, const(op, steps, np.float32)), zero, one)
    span = op.Sub(op.Sub(column, one), const(op, 2 * steps, np.float32))
    source = op.Add(const(op, steps, np.float32), op.Mul(inside, span))  # [B, T]
    grid = const(op, steps.reshape(1, 1, time_len), np.float32)
    distance = op.Abs(op.Sub(unsqueeze(op, source, [2], sig), grid))  # [B, T, T]
    picks = op.Relu(op.Sub(one, distance))
    product = op.MatMul(picks, view)  # [B, T, F]

    moved_dims = [dims[a] for a in perm]
    back = op.Reshape(product, const(op, moved_dims))
    if moved is data:
        return back
    return op.Transpose(back, perm=[perm.index(a) for a in range(rank)])
