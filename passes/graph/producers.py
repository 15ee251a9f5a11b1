"""What a value's producer says of its dims: the shape reads and the structural rules.

Which values read a dim of another (``Shape`` reads, seen through value-keeping ops:
:func:`scalar_dim`, :func:`shape_dim_read`), and a value's rank and dims from its
producer's inputs. :class:`~revseq.passes.graph.shapes.ShapeTable` walks back through
shape-keeping ops itself; past them, what an op makes of its inputs' ranks and dims is
written here, one rule per op type (broadcasts, Expand, Range, Reshape, Unsqueeze and
Squeeze, the gathers).
"""

from __future__ import annotations

__all__ = [
    "DimKey",
    "DimKeys",
    "producer",
    "scalar_dim",
    "shape_dim_read",
    "ShapeReader",
    "single_int",
    "structural_dim",
    "structural_rank",
]

from collections.abc import Callable
from typing import Protocol

import onnx_ir as ir

from revseq.ops.vocabulary import ONNX_DOMAINS

# --- Shape reads: which values read a dim of another, seen through value-keeping ops ---
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


class ShapeReader(Protocol):
    """What the rules read a value's rank and dims through: the shape table."""

    def rank(self, value: ir.Value) -> int | None:
        """The value's rank, or None."""

    def dim_key(self, value: ir.Value, axis: int) -> DimKey | None:
        """A key such that equal keys mean provably equal dims."""


# --- Structural rules: a value's rank and dims from its producer's inputs ---------------
_BROADCASTING = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Min", "Max", "Less", "LessOrEqual",
        "Greater", "GreaterOrEqual", "Equal", "And", "Or", "Xor", "Where",
    }
)  # fmt: skip


def producer(value: ir.Value) -> ir.Node | None:
    """The ONNX node that computes ``value``; None for an input or another domain's op."""
    node = value.producer()
    if node is None or node.domain not in ONNX_DOMAINS:
        return None
    return node


def _full_shape_of(value: ir.Value | None) -> ir.Value | None:
    """``v`` if ``value`` is ``Shape(v)`` (the whole shape), else None."""
    node = producer(value) if value is not None else None
    if node is None or node.op_type != "Shape" or node.attributes:
        return None
    return node.inputs[0]


def _ints(node: ir.Node, name: str, position: int) -> list[int] | None:
    """An ints attribute (older opsets) or the constant input that replaced it."""
    if name in node.attributes:
        return list(node.attributes.get_ints(name, []))
    if len(node.inputs) > position and node.inputs[position] is not None:
        tensor = ir.convenience.get_const_tensor(node.inputs[position])
        if tensor is not None:
            return [int(v) for v in tensor.numpy().reshape(-1)]
    return None


def structural_rank(value: ir.Value, table: ShapeReader) -> int | None:
    """The rank from the producer (not a shape-keeping op: ``rank`` followed those)."""
    node = producer(value)
    if node is None or not node.inputs or node.inputs[0] is None:
        return None
    if node.op_type in _BROADCASTING:
        ranks = [table.rank(v) for v in node.inputs if v is not None]
        return None if None in ranks else max(r for r in ranks if r is not None)
    rule = _RANK_RULES.get(node.op_type)
    return rule(node, table) if rule is not None else None


def _vector_rank(node: ir.Node, table: ShapeReader) -> int | None:
    return 1


def _shaped_rank(node: ir.Node, table: ShapeReader) -> int | None:
    """Expand or Reshape: the rank of the shape they are given."""
    target = node.inputs[1] if len(node.inputs) > 1 else None
    source = _full_shape_of(target)
    size = table.rank(source) if source is not None else None
    if size is None and target is not None:
        tensor = ir.convenience.get_const_tensor(target)
        size = tensor.numpy().size if tensor is not None else None
    if node.op_type == "Reshape" or size is None:
        return size
    own = table.rank(node.inputs[0])
    return None if own is None else max(own, size)


def _unsqueezed_rank(node: ir.Node, table: ShapeReader) -> int | None:
    axes = _ints(node, "axes", 1)
    own = table.rank(node.inputs[0])
    if axes is None or own is None:
        return None
    return own + len(axes) if node.op_type == "Unsqueeze" else own - len(axes)


def _gathered_rank(node: ir.Node, table: ShapeReader) -> int | None:
    if len(node.inputs) < 2:
        return None
    op = node.op_type
    index = table.rank(node.inputs[1]) if node.inputs[1] is not None else None
    data = table.rank(node.inputs[0])
    if op == "GatherElements" or index is None:
        return index
    if data is None:
        return None
    if op == "Gather":
        return data - 1 + index
    depth = table.dim_key(node.inputs[1], -1)
    if not isinstance(depth, int):
        return None
    return index - 1 + data - depth - node.attributes.get_int("batch_dims", 0)


_RANK_RULES: dict[str, Callable[[ir.Node, ShapeReader], int | None]] = {
    "Range": _vector_rank,
    "Shape": _vector_rank,
    "Expand": _shaped_rank,
    "Reshape": _shaped_rank,
    "Unsqueeze": _unsqueezed_rank,
    "Squeeze": _unsqueezed_rank,
    "GatherElements": _gathered_rank,
    "Gather": _gathered_rank,
    "GatherND": _gathered_rank,
}
"""How a producer's output rank follows from its inputs', by op type."""


def _broadcast(keys: list[DimKey | None]) -> DimKey | None:
    """The dim of a broadcast result: provable only when the non-1 dims are all equal."""
    if any(k is None for k in keys):
        return None
    rest = {k for k in keys if k != 1}
    if not rest:
        return 1
    return rest.pop() if len(rest) == 1 else None


def structural_dim(value: ir.Value, axis: int, table: ShapeReader) -> DimKey | None:
    """The dim from the producer (not a shape-keeping op: ``dim_key`` followed those)."""
    node = producer(value)
    if node is None or not node.inputs or node.inputs[0] is None:
        return None
    rank = table.rank(value)
    if rank is None:
        return None
    if node.op_type in _BROADCASTING:
        operands = [v for v in node.inputs if v is not None]
        return _broadcast_dim(operands, axis, rank, table)
    rule = _DIM_RULES.get(node.op_type)
    return rule(node, axis, rank, table) if rule is not None else None


def _broadcast_dim(
    operands: list[ir.Value], axis: int, rank: int, table: ShapeReader
) -> DimKey | None:
    """The dim of operands broadcast to ``rank``, each aligned at the right."""
    keys: list[DimKey | None] = []
    for operand in operands:
        own = table.rank(operand)
        if own is None:
            return None
        if axis - (rank - own) >= 0:
            keys.append(table.dim_key(operand, axis - (rank - own)))
    return _broadcast(keys)


def _expanded_dim(node: ir.Node, axis: int, rank: int, table: ShapeReader) -> DimKey | None:
    shape_of = _full_shape_of(node.inputs[1] if len(node.inputs) > 1 else None)
    if shape_of is None:
        return None
    return _broadcast_dim([node.inputs[0], shape_of], axis, rank, table)


def _range_dim(node: ir.Node, axis: int, rank: int, table: ShapeReader) -> DimKey | None:
    """``Range(0, n, 1)`` is n long."""
    start = single_int(node.inputs[0])
    step = single_int(node.inputs[2]) if len(node.inputs) > 2 else None
    if start == 0 and step == 1 and len(node.inputs) > 1 and node.inputs[1] is not None:
        return scalar_dim(node.inputs[1], table)
    return None


def _reshaped_dim(node: ir.Node, axis: int, rank: int, table: ShapeReader) -> DimKey | None:
    shape_of = _full_shape_of(node.inputs[1] if len(node.inputs) > 1 else None)
    return table.dim_key(shape_of, axis) if shape_of is not None else None


def _unsqueezed_dim(node: ir.Node, axis: int, rank: int, table: ShapeReader) -> DimKey | None:
    axes = _ints(node, "axes", 1)
    if axes is None:
        return None
    first = node.inputs[0]
    if node.op_type == "Unsqueeze":
        axes = sorted(a % rank for a in axes)
        if axis in axes:
            return 1
        return table.dim_key(first, axis - sum(a < axis for a in axes))
    own = table.rank(first)
    if own is None:
        return None
    kept = [a for a in range(own) if a not in {x % own for x in axes}]
    return table.dim_key(first, kept[axis])


def _gathered_dim(node: ir.Node, axis: int, rank: int, table: ShapeReader) -> DimKey | None:
    index = node.inputs[1] if len(node.inputs) > 1 else None
    if index is None:
        return None
    if node.op_type == "GatherElements":
        return table.dim_key(index, axis)
    index_rank = table.rank(index)
    if index_rank is None:
        return None
    if node.op_type == "Gather":
        return _gather_dim(node, index, index_rank, axis, table)
    first = node.inputs[0]
    if axis < index_rank - 1:
        return table.dim_key(index, axis)
    depth = table.dim_key(index, -1)
    if not isinstance(depth, int):
        return None
    batch_dims = node.attributes.get_int("batch_dims", 0)
    return table.dim_key(first, batch_dims + depth + axis - (index_rank - 1))


def _gather_dim(
    node: ir.Node, index: ir.Value, index_rank: int, axis: int, table: ShapeReader
) -> DimKey | None:
    """A Gather's dim: the data's before its axis and after, the index's in between."""
    first = node.inputs[0]
    data_rank = table.rank(first)
    if data_rank is None:
        return None
    gather_axis = node.attributes.get_int("axis", 0) % data_rank
    if axis < gather_axis:
        return table.dim_key(first, axis)
    if axis < gather_axis + index_rank:
        return table.dim_key(index, axis - gather_axis)
    return table.dim_key(first, axis - index_rank + 1)


_DIM_RULES: dict[str, Callable[[ir.Node, int, int, ShapeReader], DimKey | None]] = {
    "Expand": _expanded_dim,
    "Range": _range_dim,
    "Reshape": _reshaped_dim,
    "Unsqueeze": _unsqueezed_dim,
    "Squeeze": _unsqueezed_dim,
    "GatherElements": _gathered_dim,
    "Gather": _gathered_dim,
    "GatherND": _gathered_dim,
}
"""How a producer's output dim follows from its inputs', by op type."""
