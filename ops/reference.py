"""A numpy reference for ReverseSequence, with revseq's documented clamping of lengths."""

from __future__ import annotations

__all__ = ["reverse_sequence", "reference_evaluator"]

import numpy as np
import onnx
import onnx.reference
from onnx.reference.op_run import OpRun


class GatherElements(OpRun):
    """GatherElements for onnx's ReferenceEvaluator, by ``np.take_along_axis``.

    onnx's own implementation goes through ``np.choose``, which takes at most 63
    choices: an axis of 64 or more elements raises, or, for 2-D inputs, falls back to a
    loop that reads the first index of each row only (onnx 1.23).
    """

    op_domain = ""

    def _run(self, data, indices, axis=None):
        axis = 0 if axis is None else int(axis)
        size = data.shape[axis]
        index = np.where(indices < 0, indices + size, indices).astype(np.int64)
        return (np.take_along_axis(data, index, axis=axis),)


def reference_evaluator(model: onnx.ModelProto) -> onnx.reference.ReferenceEvaluator:
    """Onnx's ReferenceEvaluator with a GatherElements that handles any axis size."""
    return onnx.reference.ReferenceEvaluator(model, new_ops=[GatherElements])


def reverse_sequence(
    x: np.ndarray, lens: np.ndarray, *, batch_axis: int = 1, time_axis: int = 0
) -> np.ndarray:
    """Reverse the first ``lens[i]`` steps along ``time_axis`` of batch entry ``i``.

    Any distinct axes in [-rank, rank-1] are accepted. Lengths are clamped to [0, T]:
    negative ones reverse nothing, ones above T reverse everything.
    """
    x = np.asarray(x)
    batch_axis %= x.ndim
    time_axis %= x.ndim
    if batch_axis == time_axis:
        raise ValueError(f"batch_axis and time_axis must differ, both are {batch_axis}")
    moved = np.moveaxis(x, (batch_axis, time_axis), (0, 1))
    out = moved.copy()
    time_len = moved.shape[1]
    for i, length in enumerate(np.asarray(lens).reshape(-1)):
        n = int(min(max(int(length), 0), time_len))
        out[i, :n] = moved[i, :n][::-1]
    return np.moveaxis(out, (0, 1), (batch_axis, time_axis))
