"""What is known about the dims of values: declared, inferred, and provably equal.

Models often declare their inputs' shapes and nothing in between. :class:`ShapeTable`
runs onnx's shape inference with data propagation on a serialised copy, in the main graph
and every If/Loop/Scan body (model-local functions are generic, onnx infers nothing in
them), and keeps what it finds in a table: the user's model never receives the inferred
``value_info``.

:func:`dim_key` and :func:`scalar_dim` reason about dims symbolically: two dims with
equal keys are provably equal at run time. A key is the static size (an int), a symbol
name shared through inference (``("sym", "T")``), or, for a dim nothing names, the
dim itself (``("dim", id(value), axis)``) after following Transpose, Identity and
elementwise ops back to their source. The passes use them for lengths that equal the
time length (tf2onnx's ``tf.reverse`` export), and to share index arithmetic between
nodes whose time and batch dims are equal.
"""

from __future__ import annotations

__all__ = ["Dim", "ShapeTable", "dim_key", "scalar_dim", "describe_dims"]

import logging
from collections.abc import Iterator
from typing import TypeVar

import onnx
import onnx.shape_inference
import onnx_ir as ir

logger = logging.getLogger(__name__)

Dim = int | str | None
"""One dim as the table knows it: static size, symbol name, or unknown."""

DimKey = int | tuple[str, str] | tuple[str, int, int]
_T = TypeVar("_T")

# Ops whose output has their first input's shape: a dim passes through them unchanged.
_SAME_SHAPE = frozenset(
    {
        "Identity", "Cast", "CastLike", "Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Exp",
        "Log", "Sqrt", "Erf", "Not", "Sign", "Floor", "Ceil", "Round", "LeakyRelu",
        "Elu", "Selu", "Softplus", "Softsign", "HardSigmoid", "Clip", "Dropout",
    }
)  # fmt: skip
# Ops that keep every element's value while changing shape or int type: a value passed
# through them still holds the same dim in every element.
_VALUE_PRESERVING = frozenset(
    {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Tile", "Identity"}
)


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _graphs(sub)


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


class ShapeTable:
    """Inferred element types and dims by value name, consulted beside the declared ones."""

    def __init__(
        self,
        shapes: dict[str, tuple[Dim, ...]] | None = None,
        dtypes: dict[str, ir.DataType] | None = None,
        functions: frozenset[int] = frozenset(),
    ) -> None:
        self._shapes = shapes or {}
        self._dtypes = dtypes or {}
        # Function bodies have their own names, which may repeat the graph's: the
        # inferred names never apply there.
        self._functions = functions

    def _inferred(self, value: ir.Value, table: dict[str, _T]) -> _T | None:
        if not value.name or not table:
            return None
        graph = value.graph
        if graph is not None and id(graph) in self._functions:
            return None
        return table.get(value.name)

    @classmethod
    def infer(cls, model: ir.Model) -> ShapeTable:
        """Run onnx's shape inference with data propagation on a copy of ``model``.

        A model onnx cannot infer (an op it does not know, inconsistent shapes) gives an
        empty table: the passes then go by the declared shapes, as without inference.
        """
        try:
            inferred = onnx.shape_inference.infer_shapes(
                ir.to_proto(model), check_type=False, strict_mode=False, data_prop=True
            )
        except Exception as e:  # onnx raises several kinds; any means "no inference"
            logger.info("shape inference failed, using declared shapes: %s", e)
            return cls()
        shapes: dict[str, tuple[Dim, ...]] = {}
        dtypes: dict[str, ir.DataType] = {}
        for graph in _graphs(inferred.graph):
            for info in (*graph.input, *graph.value_info, *graph.output):
                dtype, dims = _dims_of(info)
                if dtype is not None:
                    dtypes[info.name] = dtype
                if dims is not None:
                    shapes[info.name] = dims
        functions = frozenset(id(f.graph) for f in model.functions.values())
        return cls(shapes, dtypes, functions)

    def dims(self, value: ir.Value) -> tuple[Dim, ...] | None:
        """The value's dims: each the most specific of declared and inferred."""
        declared: tuple[Dim, ...] | None = None
        if value.shape is not None:
            declared = tuple(
                d if isinstance(d, int) else (d.value if d.value else None)
                for d in value.shape
            )
        inferred = self._inferred(value, self._shapes)
        if declared is None or (inferred is not None and len(inferred) != len(declared)):
            return inferred if inferred is not None else declared
        if inferred is None:
            return declared
        return tuple(_more_specific(a, b) for a, b in zip(declared, inferred, strict=True))

    def dtype(self, value: ir.Value) -> ir.DataType | None:
        """The value's element type, declared or inferred."""
        if value.dtype is not None:
            return value.dtype
        return self._inferred(value, self._dtypes)

    def is_static(self, value: ir.Value) -> bool:
        """Whether every dim of ``value`` is known as a number."""
        dims = self.dims(value)
        return dims is not None and all(isinstance(d, int) for d in dims)


def _more_specific(declared: Dim, inferred: Dim) -> Dim:
    if isinstance(declared, int):
        return declared
    if isinstance(inferred, int):
        return inferred
    return declared if declared is not None else inferred


def dim_key(value: ir.Value, axis: int, table: ShapeTable) -> DimKey | None:
    """A key such that equal keys mean provably equal dims; None if ``axis`` is unknown.

    Follows the value back through ops that keep their input's shape and through
    Transpose (whose output dim ``k`` is input dim ``perm[k]``) before naming the dim.
    """
    while True:
        dims = table.dims(value)
        if dims is not None:
            if not -len(dims) <= axis < len(dims):
                return None
            axis %= len(dims)
            dim = dims[axis]
            if isinstance(dim, int):
                return dim
            if isinstance(dim, str):
                return ("sym", dim)
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx") or not node.inputs:
            break
        source = node.inputs[0]
        if source is None:
            break
        if node.op_type in _SAME_SHAPE:
            value = source
            continue
        if node.op_type == "Transpose":
            perm = node.attributes.get_ints("perm", None)
            if perm is None:
                source_dims = table.dims(source)
                if source_dims is None or axis < 0:
                    break
                perm = list(reversed(range(len(source_dims))))
            if not 0 <= axis < len(perm):
                break
            axis, value = perm[axis], source
            continue
        break
    return ("dim", id(value), axis) if axis >= 0 else None


def scalar_dim(value: ir.Value, table: ShapeTable) -> DimKey | None:
    """The dim every element of the integer ``value`` equals, or None if unknown.

    Recognises ``Gather(Shape(v), k)``, ``Shape(v, start=k, end=k+1)``,
    ``Slice(Shape(v), [k], [k+1])`` and single-valued constants, seen through Cast,
    Unsqueeze, Squeeze, Reshape, Expand, Tile and Identity.
    """
    node = value.producer()
    while node is not None and node.op_type in _VALUE_PRESERVING and node.domain == "":
        if node.op_type == "Cast" and node.attributes.get_int("to") not in (
            ir.DataType.INT64,
            ir.DataType.INT32,
        ):
            return None
        source = node.inputs[0]
        if source is None:
            return None
        value, node = source, source.producer()
    constant = ir.convenience.get_const_tensor(value)
    if constant is not None:
        values = constant.numpy().reshape(-1)
        if values.size and (values == values[0]).all():
            return int(values[0])
        return None
    if node is None or node.domain != "":
        return None
    shape_of, start = _shape_element(node)
    if shape_of is None or start is None:
        return None
    return dim_key(shape_of, start, table)


def _shape_element(node: ir.Node) -> tuple[ir.Value | None, int | None]:
    """(v, k) if ``node`` outputs dim ``k`` of ``v`` alone (as 0-D or 1 element)."""
    if node.op_type == "Shape":
        start = node.attributes.get_int("start", 0)
        end = node.attributes.get_int("end", None)
        if end is not None and end == start + 1 and start >= 0:
            return node.inputs[0], start
        return None, None
    if node.op_type not in ("Gather", "Slice") or not node.inputs:
        return None, None
    shape_node = node.inputs[0].producer() if node.inputs[0] is not None else None
    if (
        shape_node is None
        or shape_node.op_type != "Shape"
        or shape_node.domain != ""
        or shape_node.attributes.get_int("start", 0) != 0
        or shape_node.attributes.get_int("end", None) is not None
    ):
        return None, None
    if node.op_type == "Gather":
        if node.attributes.get_int("axis", 0) != 0 or len(node.inputs) < 2:
            return None, None
        index = _single_int(node.inputs[1])
        if index is None or index < 0:
            return None, None
        return shape_node.inputs[0], index
    starts = _single_int(node.inputs[1]) if len(node.inputs) > 1 else None
    ends = _single_int(node.inputs[2]) if len(node.inputs) > 2 else None
    axes = _single_int(node.inputs[3]) if len(node.inputs) > 3 else 0
    steps = _single_int(node.inputs[4]) if len(node.inputs) > 4 else 1
    if starts is None or ends != starts + 1 or axes != 0 or steps != 1 or starts < 0:
        return None, None
    return shape_node.inputs[0], starts


def _single_int(value: ir.Value | None) -> int | None:
    if value is None:
        return None
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None:
        return None
    array = tensor.numpy().reshape(-1)
    return int(array[0]) if array.size == 1 else None


def describe_dims(dims: tuple[Dim, ...] | None) -> str:
    """``[T, B=4, ?]``-style text: static sizes, symbols, ``?`` for unknown dims."""
    if dims is None:
        return "unknown rank"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
