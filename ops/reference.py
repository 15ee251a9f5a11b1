"""A numpy reference for ReverseSequence, with revseq's documented clamping of lengths."""

from __future__ import annotations

__all__ = ["reverse_sequence", "reverse_sequence_model", "reference_evaluator"]

from collections.abc import Sequence
from types import EllipsisType

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


def reverse_sequence_model(  # noqa: PLR0913 (a test model's every knob, by keyword)
    dims: Sequence[int | str | None],
    elem: int,
    *,
    batch_axis: int = 1,
    time_axis: int = 0,
    domain: str = "",
    lens_elem: int = onnx.TensorProto.INT64,
    lens: np.ndarray | None = None,
    lens_dim: int | str | EllipsisType | None = ...,
    opset: int = 17,
    ir_version: int = 10,
    name: str = "reverse_sequence",
) -> onnx.ModelProto:
    """A model of one ReverseSequence node: ``y = ReverseSequence(x, lens)``.

    ``dims`` are the data's (a size, a symbol, or None); the lengths are an input
    declared with ``lens_dim`` (by default the data's batch dim; exporters often give
    them a symbol of their own), or, given ``lens``, that constant (an initializer).
    The ``revseq`` domain (any axes, int32 lengths) is imported at version 1 where
    ``domain`` names it.
    """
    node = onnx.helper.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], domain=domain, batch_axis=batch_axis,
        time_axis=time_axis, name="rs",
    )  # fmt: skip
    inputs = [onnx.helper.make_tensor_value_info("x", elem, list(dims))]
    initializers = []
    if lens is None:
        batch = dims[batch_axis % len(dims)] if lens_dim is ... else lens_dim
        inputs.append(onnx.helper.make_tensor_value_info("lens", lens_elem, [batch]))
    else:
        initializers.append(onnx.numpy_helper.from_array(lens, "lens"))
    graph = onnx.helper.make_graph(
        [node],
        name,
        inputs,
        [onnx.helper.make_tensor_value_info("y", elem, list(dims))],
        initializer=initializers,
    )
    imports = [onnx.helper.make_opsetid("", opset)]
    if domain:
        imports.append(onnx.helper.make_opsetid(domain, 1))
    return onnx.helper.make_model(graph, opset_imports=imports, ir_version=ir_version)
