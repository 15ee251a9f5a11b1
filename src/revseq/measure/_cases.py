"""The benchmark's cases: shapes, how much of each a model declares, its models and data."""

from __future__ import annotations

__all__ = [
    "DIMS",
    "QUICK",
    "SUITE",
    "Case",
    "copy_model",
    "declared_dims",
    "extra_bytes",
    "fed",
    "input_arrays",
    "native_model",
    "node_count",
    "numpy_copy",
]

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import onnx
import onnx.helper

from revseq.backends import input_names
from revseq.equivalence import as_declared, declared_types
from revseq.ops.reference import reverse_sequence_model
from revseq.ops.vocabulary import ALL_DIMS, SHAPE_CLASSES, STATIC

_TYPES = {
    "float32": (np.float32, onnx.TensorProto.FLOAT),
    "float16": (np.float16, onnx.TensorProto.FLOAT16),
    "int32": (np.int32, onnx.TensorProto.INT32),
    "int64": (np.int64, onnx.TensorProto.INT64),
}


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark shape: data shape, layout and element type."""

    shape: tuple[int, ...]
    batch_axis: int
    time_axis: int
    dtype: str

    @property
    def label(self) -> str:
        layout = "time-major" if self.time_axis == 0 else "batch-major"
        return f"{list(self.shape)} {layout} {self.dtype}"

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(_TYPES[self.dtype][0]).itemsize


SUITE: tuple[Case, ...] = (
    Case((2000, 16), 1, 0, "float32"),
    Case((1000, 8, 1), 1, 0, "float32"),
    Case((8, 1000, 1), 0, 1, "float32"),
    Case((512, 64), 1, 0, "float32"),
    Case((64, 512), 0, 1, "int64"),
    Case((128, 32, 64), 1, 0, "float32"),
    Case((32, 128, 64), 0, 1, "float16"),
    Case((64, 32, 256), 1, 0, "int64"),
    Case((50, 16, 8, 64), 1, 0, "float32"),
    Case((16, 50, 8, 64), 0, 1, "float16"),
    Case((64, 256, 1024), 1, 0, "float32"),
    Case((256, 64, 1024), 0, 1, "float32"),
)

QUICK = (SUITE[0], SUITE[1], SUITE[3], SUITE[5], SUITE[8])


"""The cases of ``--quick``."""


DIMS: tuple[str, ...] = SHAPE_CLASSES
"""How much of a case's shape the model declares: every dim; the time and batch dims
symbolic (the common exported form); every dim symbolic."""


def declared_dims(case: Case, dims: str = STATIC) -> list[int | str]:
    """The data's dims as the model declares them for ``dims`` (one of DIMS)."""
    declared: list[int | str] = list(case.shape)
    if dims == STATIC:
        return declared
    if dims == ALL_DIMS:
        declared = [f"d{axis}" for axis in range(len(case.shape))]
    declared[case.time_axis], declared[case.batch_axis] = "T", "B"
    return declared


def native_model(
    case: Case, lens: np.ndarray | None = None, dims: str = STATIC
) -> onnx.ModelProto:
    """A one-node ReverseSequence model of the case, its dims declared as ``dims`` says.

    With ``lens``, the lengths are that constant instead of an input: inlined, the model
    is one gather with a constant index (what onnxruntime's gather costs alone).
    """
    return reverse_sequence_model(
        declared_dims(case, dims),
        _TYPES[case.dtype][1],
        batch_axis=case.batch_axis,
        time_axis=case.time_axis,
        lens=None if lens is None else lens.astype(np.int64),
        name="bench",
    )


def copy_model(case: Case, op: str = "Identity") -> onnx.ModelProto:
    """The data through one Identity: what onnxruntime's own copy of it costs.

    Or through another op of one input that passes over the data (``Neg``), which a
    converter keeps: a converter may remove an Identity (and an Add of 0), then cannot convert
    the empty graph.
    """
    elem = _TYPES[case.dtype][1]
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node(op, ["x"], ["y"])],
        "copy",
        [onnx.helper.make_tensor_value_info("x", elem, case.shape)],
        [onnx.helper.make_tensor_value_info("y", elem, case.shape)],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


# onnxruntime runs these in place on CPU: their output shares its input's buffer.
_VIEW_OPS = frozenset({"Reshape", "Flatten", "Unsqueeze", "Squeeze", "Identity"})


def extra_bytes(model: onnx.ModelProto) -> int:
    """Bytes of the intermediate tensors a run allocates besides its input and output.

    Counted from shape inference: every value that is not a graph input or output, not
    a constant (weights, allocated once at load time) and not a view (the output of an
    op onnxruntime runs in place, or the input of such an op that produces a graph
    output, which lives in the output's buffer). An upper bound: the runtime may reuse
    buffers between nodes, never needs more.
    """
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    graph = inferred.graph
    excluded = {v.name for v in graph.input} | {v.name for v in graph.output}
    for node in graph.node:
        if node.op_type == "Constant" or node.op_type in _VIEW_OPS:
            excluded.update(node.output)
    for node in reversed(graph.node):
        if node.op_type in _VIEW_OPS and node.output[0] in excluded and node.input:
            excluded.add(node.input[0])
    total = 0
    for info in graph.value_info:
        if info.name in excluded:
            continue
        dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        total += math.prod(dims) * np.dtype(itemsize).itemsize
    return total


def input_arrays(case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
    np_type = _TYPES[case.dtype][0]
    x = rng.standard_normal(case.shape).astype(np_type)
    time_len = case.shape[case.time_axis]
    lens = rng.integers(0, time_len + 1, case.shape[case.batch_axis], dtype=np.int64)
    return {"x": x, "lens": lens}


def fed(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of ``feeds`` that ``model`` takes, in the types it declares.

    Constant lengths take none; a ``-finite`` target's lengths are float32.
    """
    taken = {name: feeds[name] for name in input_names(model) if name in feeds}
    return as_declared(taken, declared_types(model))


def numpy_copy(x: np.ndarray) -> Callable[[], object]:
    """A copy of ``x`` into a new array by numpy: the floor every table compares with."""
    return lambda: np.copyto(np.empty_like(x), x)


def node_count(model: onnx.ModelProto) -> int:
    """The nodes a backend runs: every node but the constants."""
    return sum(n.op_type != "Constant" for n in model.graph.node)
