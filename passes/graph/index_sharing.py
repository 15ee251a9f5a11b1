"""Share index arithmetic between the decompositions of one graph.

Nodes that reverse with the same lengths over provably equal time and batch dims (a
bidirectional RNN reverses its input and its output) compute the same index. After the
inline pass emits each decomposition, a node that computes what an earlier decomposition
of the same graph already computed is not emitted again: same op, attributes and inputs,
constants by content, and a read of one dim (``Shape(x, start=k, end=k+1)``) by the
dim's key (``ShapeTable.named_dim``), so that reads of provably equal
dims of different tensors are one read. Dims are equal by proof (the same tensor seen
through shape-keeping ops, a Transpose, a broadcast) or by the model's declaration (one
symbol name, which onnx's shape inference propagates). Only emitted nodes take part: the
user's nodes are never merged or moved, and the value replacing a node's output is
always its own.
"""

from __future__ import annotations

__all__ = ["IndexSharing"]

from collections.abc import Hashable, Sequence

import onnx_ir as ir

from revseq.passes.graph.producers import shape_dim_read
from revseq.passes.graph.shapes import ShapeTable


def _attribute_key(attr: ir.Attr) -> Hashable:
    value = attr.value
    if attr.type == ir.AttributeType.TENSOR:
        array = value.numpy()
        return (attr.name, array.dtype.str, array.shape, array.tobytes())
    if isinstance(value, list):
        value = tuple(value)
    return (attr.name, attr.type, value)


class IndexSharing:
    """Keys for the nodes of one graph's decompositions; equal keys, equal values.

    :meth:`Template.instantiate <revseq.passes.graph.builder.Template.instantiate>` asks
    for a node's key before creating it and reuses the value an earlier decomposition
    of the same graph computed under that key.
    """

    def __init__(self, shapes: ShapeTable) -> None:
        self._shapes = shapes
        self._values: dict[Hashable, ir.Value] = {}
        self._shared = 0
        self._attributes: dict[int, tuple[ir.Node, Hashable]] = {}

    @property
    def shared(self) -> int:
        """Nodes not created because an earlier decomposition computed their value."""
        return self._shared

    def reuse(self, key: Hashable) -> ir.Value | None:
        """The value an earlier decomposition computed under ``key``, counted as shared."""
        value = self._values.get(key)
        if value is not None:
            self._shared += 1
        return value

    def remember(self, key: Hashable, value: ir.Value) -> None:
        """``value`` is what ``key`` computes in this graph from now on."""
        self._values[key] = value

    def key(self, node: ir.Node, inputs: Sequence[ir.Value | None]) -> Hashable:
        """The key of template ``node`` emitted on ``inputs``."""
        read = shape_dim_read(node)
        if read is not None and inputs[0] is not None:
            dim = self._shapes.named_dim(inputs[0], read[1])
            if dim is not None:
                return ("dim", dim)
        cached = self._attributes.get(id(node))
        if cached is None:
            attributes = tuple(
                sorted((_attribute_key(a) for a in node.attributes.values()), key=repr)
            )
            cached = self._attributes[id(node)] = (node, attributes)
        return (
            node.op_type,
            cached[1],
            tuple(id(v) if v is not None else None for v in inputs),
        )
