"""onnx's shape inference on a copy of a model, weights left out: types and dims by name.

Inference runs with data propagation on a serialised copy, in the main graph and every
If/Loop/Scan body (model-local functions are generic, onnx infers nothing in them).
Where every graph input has fixed sizes and that leaves a dim unknown (a Reshape to a
shape computed by Shape, Gather, Concat and Cast, as tf2onnx writes Tensordot), a second
copy has its constants folded by onnxscript's optimizer first, as onnxsim's
``--overwrite-input-shape`` does: the computed shapes become constants there.
"""

from __future__ import annotations

__all__ = ["Dim", "infer_types"]

import contextlib
import logging
from collections.abc import Iterator

import onnx
import onnx.shape_inference
import onnx_ir as ir
from onnxscript import optimizer

from revseq.passes.graph.scopes import run_time_inputs, walk

logger = logging.getLogger(__name__)

Dim = int | str | None
"""One dim as inference knows it: static size, symbol name, or unknown."""


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _graphs(sub)


# In-memory initializers larger than this are serialised for inference as references to
# external data that is never read: inference needs their types and dims, not their
# bytes, and copying a model's weights would double its memory for the moment.
_MAX_COPIED_BYTES = 1 << 16


@contextlib.contextmanager
def _weights_left_out(model: ir.Model) -> Iterator[None]:
    """Stand large in-memory initializers in by unread external references meanwhile."""
    swapped: list[tuple[ir.Value, ir.TensorProtocol]] = []
    graphs = {id(model.graph): model.graph}
    for scoped in walk(model):  # every graph that holds a node, subgraphs included
        if scoped.node.graph is not None:
            graphs.setdefault(id(scoped.node.graph), scoped.node.graph)
    try:
        for graph in graphs.values():
            for value in graph.initializers.values():
                tensor = value.const_value
                if tensor is None or isinstance(tensor, ir.ExternalTensor):
                    continue
                if tensor.nbytes <= _MAX_COPIED_BYTES:
                    continue
                swapped.append((value, tensor))
                value.const_value = ir.ExternalTensor(
                    "revseq-shape-inference-only",
                    0,
                    tensor.nbytes,
                    tensor.dtype,
                    shape=tensor.shape,
                    name=tensor.name or value.name or "",
                )
        yield
    finally:
        for value, tensor in swapped:
            value.const_value = tensor


def _dims_of(info: onnx.ValueInfoProto) -> tuple[ir.DataType | None, tuple[Dim, ...] | None]:
    if not info.type.HasField("tensor_type"):
        return None, None
    tensor = info.type.tensor_type
    dtype = ir.DataType(tensor.elem_type) if tensor.elem_type else None
    if not tensor.HasField("shape"):
        return dtype, None
    dims: list[Dim] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param") and dim.dim_param:
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return dtype, tuple(dims)


def infer_types(
    model: ir.Model,
) -> tuple[dict[str, tuple[Dim, ...]], dict[str, ir.DataType]] | None:
    """Dims and element types by value name, as onnx infers them; None where it cannot.

    A model onnx cannot infer (an op it does not know, inconsistent shapes) gives None:
    the passes then go by the declared shapes, as without inference.
    """
    try:
        with _weights_left_out(model):
            proto = ir.to_proto(model)
        found = _types_of(_inferred(proto))
    except Exception as e:  # onnx raises several kinds; any means "no inference"
        logger.info("shape inference failed, using declared shapes: %s", e)
        return None
    if _inputs_fixed(model) and not _all_static(found[0]):
        try:
            folded = _types_of(_inferred(_folded(proto)))
        except Exception as e:  # the folding or its inference: keep what onnx found
            logger.info("shape inference after folding failed: %s", e)
        else:  # the folded copy's dims where they say more: static, or known at all
            shapes, dtypes = found
            for name, dims in folded[0].items():
                if name not in shapes or (_static(dims) and not _static(shapes[name])):
                    shapes[name] = dims
            for name, dtype in folded[1].items():
                dtypes.setdefault(name, dtype)
    return found


def _inferred(proto: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.shape_inference.infer_shapes(
        proto, check_type=False, strict_mode=False, data_prop=True
    )


def _folded(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose constant computations (shapes of fixed-size values) are folded."""
    copy = ir.from_proto(proto)
    optimizer.fold_constants(copy, onnx_shape_inference=True)
    return ir.to_proto(copy)


def _types_of(
    inferred: onnx.ModelProto,
) -> tuple[dict[str, tuple[Dim, ...]], dict[str, ir.DataType]]:
    shapes: dict[str, tuple[Dim, ...]] = {}
    dtypes: dict[str, ir.DataType] = {}
    for graph in _graphs(inferred.graph):
        for info in (*graph.input, *graph.value_info, *graph.output):
            dtype, dims = _dims_of(info)
            if dtype is not None:
                dtypes[info.name] = dtype
            if dims is not None:
                shapes[info.name] = dims
    return shapes, dtypes


def _static(dims: tuple[Dim, ...]) -> bool:
    return all(isinstance(d, int) for d in dims)


def _inputs_fixed(model: ir.Model) -> bool:
    inputs = run_time_inputs(model.graph)
    return bool(inputs) and all(v.shape is not None and v.shape.is_static() for v in inputs)


def _all_static(shapes: dict[str, tuple[Dim, ...]]) -> bool:
    return all(_static(dims) for dims in shapes.values())
