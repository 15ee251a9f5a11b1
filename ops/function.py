"""ReverseSequence as an onnxscript function: the definition of the ``revseq`` domain op.

``ReverseSequence`` here is the canonical decomposition (Range, Less, Where,
GatherElements) written once for any rank and any axes, with the attributes read at run
time. ``ReverseSequence.to_function_proto()`` is a FunctionProto in domain ``revseq``:
attach it to a model and its ``revseq::ReverseSequence`` nodes run on any backend that
inlines functions. It is also callable from onnxscript code like any other op.

The rewriting passes emit rank-specialised forms instead (``revseq.ops.forms``), which
fold what the shapes make static.
"""

from __future__ import annotations

__all__ = ["REVSEQ_OPSET", "ReverseSequence", "definition"]

import onnx
from onnxscript import INT64, script
from onnxscript import opset18 as op
from onnxscript.values import Opset

from revseq.ops.vocabulary import ONNX_DOMAINS, REVSEQ_DOMAIN

REVSEQ_OPSET = Opset(REVSEQ_DOMAIN, 1)
"""The ``revseq`` domain, version 1: the generalised op (any axes, int32/int64 lengths)."""


@script(REVSEQ_OPSET, default_opset=op)
def ReverseSequence(input, sequence_lens, batch_axis: int = 1, time_axis: int = 0):
    """Reverse the first ``sequence_lens[i]`` steps along ``time_axis`` of batch entry i.

    Axes may be negative. Lengths may be int32 or int64; they are clamped to [0, T], so
    invalid lengths never index out of bounds (ONNX leaves them unspecified).
    """
    shape = op.Shape(input)
    rank = op.Size(shape)
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    time = op.Constant(value_int=time_axis)
    time = op.Where(op.Less(time, zero), op.Add(time, rank), time)
    batch = op.Constant(value_int=batch_axis)
    batch = op.Where(op.Less(batch, zero), op.Add(batch, rank), batch)
    time_len = op.Gather(shape, time)
    lens = op.Min(op.Cast(sequence_lens, to=INT64.dtype), time_len)
    axes = op.Range(zero, rank, one)
    steps = op.Reshape(
        op.Range(zero, time_len, one),
        op.Where(op.Equal(axes, time), time_len, one),
        allowzero=1,
    )
    lens = op.Reshape(lens, op.Where(op.Equal(axes, batch), op.Size(lens), one), allowzero=1)
    source = op.Where(op.Less(steps, lens), op.Sub(op.Sub(lens, one), steps), steps)
    return op.GatherElements(input, op.Expand(source, shape), axis=time_axis)


DEFINITION_MIN_OPSET = 14
"""Reshape with ``allowzero`` (opset 14) keeps zero-sized dimensions right."""


def definition(opset: int) -> onnx.FunctionProto:
    """``ReverseSequence`` as a FunctionProto importing the default domain at ``opset``.

    A model-local function must import the same opset version as the model, so the
    FunctionProto is stamped with the model's version; every op it uses has kept its
    meaning since opset 14.
    """
    if opset < DEFINITION_MIN_OPSET:
        raise ValueError(f"the definition needs opset >= {DEFINITION_MIN_OPSET}, got {opset}")
    proto = ReverseSequence.to_function_proto()
    for entry in proto.opset_import:
        if entry.domain in ONNX_DOMAINS:
            entry.version = opset
    return proto
