"""Which values read a dim of another: ``Shape`` reads, seen through value-keeping ops."""

from __future__ import annotations

__all__ = ["DimKey", "DimKeys", "scalar_dim", "shape_dim_read", "single_int"]

from typing import Protocol

import onnx_ir as ir

from revseq.ops.domains import ONNX_DOMAINS

DimKey = int | tuple[str, str] | tuple[str, int, int]
"""A dim as two values may provably share it: a static size, a named symbol, or the
dim of one value along one axis (``revseq.passes.graph.shapes``)."""


class DimKeys(Protocol):
    """What names a value's dims: the shape table (``graph.shapes.ShapeTable``)."""

    def dim_key(self, value: ir.Value, axis: int) -> DimKey | None:
        """A key such that equal keys mean provably equal dims."""


# Ops that keep every element's value while changing shape or int type: a value passed
# through them still holds the same dim in every element.
_VALUE_PRESERVING = frozenset(
    {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Tile", "Identity"}
)


def scalar_dim(value: ir.Value, table: DimKeys) -> DimKey | None:
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
    return table.dim_key(shape_of, start)


def shape_dim_read(node: ir.Node) -> tuple[ir.Value, int] | None:
    """(v, k) if ``node`` is ``Shape(v, start=k, end=k+1)``: a read of one dim."""
    if node.op_type != "Shape" or node.domain not in ONNX_DOMAINS or not node.inputs:
        return None
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", None)
    source = node.inputs[0]
    if source is None or end is None or start < 0 or end != start + 1:
        return None
    return source, start


def _shape_element(node: ir.Node) -> tuple[ir.Value | None, int | None]:
    """(v, k) if ``node`` outputs dim ``k`` of ``v`` alone (as 0-D or 1 element)."""
    if node.op_type == "Shape":
        return shape_dim_read(node) or (None, None)
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
        index = single_int(node.inputs[1])
        if index is None or index < 0:
            return None, None
        return shape_node.inputs[0], index
    starts = single_int(node.inputs[1]) if len(node.inputs) > 1 else None
    ends = single_int(node.inputs[2]) if len(node.inputs) > 2 else None
    axes = single_int(node.inputs[3]) if len(node.inputs) > 3 else 0
    steps = single_int(node.inputs[4]) if len(node.inputs) > 4 else 1
    if starts is None or ends != starts + 1 or axes != 0 or steps != 1 or starts < 0:
        return None, None
    return shape_node.inputs[0], starts


def single_int(value: ir.Value | None) -> int | None:
    """The one integer a constant holds (a scalar or a one-element tensor), else None."""
    if value is None:
        return None
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None:
        return None
    array = tensor.numpy().reshape(-1)
    return int(array[0]) if array.size == 1 else None
