"""The backward slice of a candidate gather: what it reads, and whether a form could.

A decomposition's slice reads exactly two run-time values: the data (only through
``Shape``, ``Size`` and the views that feed the gather) and one 1-D integer vector, the
lengths. These helpers find the data's views, cut the slice and check what it reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from revseq.ops.vocabulary import ONNX_DOMAINS, REVSEQ_DOMAIN
from revseq.passes.graph.evaluate import SUPPORTED_OPS
from revseq.passes.graph.names import EMITTED_NAME
from revseq.passes.graph.producers import scalar_dim
from revseq.passes.graph.reverse_sequence import LENGTH_TYPES as ACCEPTED_LENGTHS
from revseq.passes.graph.shapes import ShapeTable

GATHER_OPS = frozenset({"GatherElements", "GatherND", "Gather"})
SHAPE_READERS = frozenset({"Shape", "Size"})
LENGTH_TYPES = ACCEPTED_LENGTHS[REVSEQ_DOMAIN]
"""Lengths a decomposition may read: what the generalised op accepts."""

# Views a form puts between the data and its gather (a row view, a matrix without its
# trailing size-1 axes, a time-major matrix transposed) and after it (their inverses).
DATA_VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Transpose"})
OUTPUT_VIEWS = frozenset({"Reshape", "Unsqueeze", "Transpose"})
MAX_VIEWS = 2


def data_sources(gather: ir.Node) -> list[ir.Value]:
    """The tensors a gather may read the data as, farthest first.

    The gather's input, and the inputs of up to two views above it (``DATA_VIEWS``):
    the row form reads a ``[rows, rest]`` view, the matrix form a squeezed and possibly
    transposed one. The proof decides which reading holds.
    """
    value = gather.inputs[0] if gather.inputs else None
    if value is None:
        return []
    found = [value]
    while len(found) <= MAX_VIEWS:
        node = found[-1].producer()
        if (
            node is None
            or node.domain not in ONNX_DOMAINS
            or node.op_type not in DATA_VIEWS
            or not node.inputs
            or node.inputs[0] is None
        ):
            break
        found.append(node.inputs[0])
    return found[::-1]


def may_be_data(value: ir.Value) -> bool:
    """Whether a gather's source may be run-time data: not a constant nor a shape."""
    producer = value.producer()
    return value.const_value is None and (
        producer is None or producer.op_type not in SHAPE_READERS
    )


def slice_of(
    output: ir.Value,
    data: ir.Value,
    stop: ir.Value | None = None,
    *,
    stops: frozenset[int] = frozenset(),
) -> tuple[list[ir.Node], list[ir.Value]]:
    """The nodes ``output`` depends on (topological order) and its run-time leaves.

    ``stop``, if given, is a leaf too: the value taken as the lengths; so is every value
    whose id is in ``stops`` (``shape_reads_only``).
    """
    order: list[ir.Node] = []
    leaves: list[ir.Value] = []
    seen_nodes: set[int] = set()
    seen_values: set[int] = set()
    stack: list[tuple[ir.Value, bool]] = [(output, False)]
    while stack:
        value, expanded = stack.pop()
        node = value.producer()
        if expanded:
            assert node is not None
            if id(node) not in seen_nodes:
                seen_nodes.add(id(node))
                order.append(node)
            continue
        if id(value) in seen_values:
            continue
        seen_values.add(id(value))
        stopped = value is stop or id(value) in stops
        if value is data or stopped or value.const_value is not None or node is None:
            if value.const_value is None or stopped:
                leaves.append(value)
            continue
        if node.domain not in ONNX_DOMAINS or node.op_type not in SUPPORTED_OPS:
            leaves.append(value)
            continue
        stack.append((value, True))
        for source in node.inputs:
            if source is not None:
                stack.append((source, False))
    return order, leaves


def check_data_use(nodes: Sequence[ir.Node], data: ir.Value, gather: ir.Node) -> str | None:
    """The data may only feed Shape/Size and the views (``data_sources``) into the gather."""
    sources = data_sources(gather)
    after = next((i + 1 for i, v in enumerate(sources) if v is data), len(sources))
    allowed = {id(gather)} | {id(v.producer()) for v in sources[after:]}
    in_slice = {id(n) for n in nodes}
    for user, index in data.uses():
        if id(user) not in in_slice:
            continue
        if user.op_type in SHAPE_READERS:
            continue
        if id(user) in allowed and index == 0:
            continue
        return f"the index depends on the data's values (through {user.op_type})"
    return None


def shape_reads_only(nodes: Sequence[ir.Node], data: ir.Value) -> frozenset[int]:
    """The values a slice computes apart from the data and reads through Shape/Size alone.

    An index shared between reversals reads the dims of another node's data, which may
    be computed in the graph from other inputs: only its shape matters, so the slice
    stops there (``Matcher._dim_reads`` maps its dims to the data's). Values computed
    from the data stay in the slice: their shapes follow from the data's.
    """
    in_slice = {id(n) for n in nodes}
    from_data: set[int] = {id(data)}
    for node in nodes:  # topological: what each computed value was computed from
        if any(id(v) in from_data for v in node.inputs if v is not None):
            from_data.update(id(v) for v in node.outputs)
    found = set()
    for node in nodes:
        for value in node.outputs:
            users = [user for user, _ in value.uses() if id(user) in in_slice]
            if (
                id(value) not in from_data
                and users
                and all(u.op_type in SHAPE_READERS for u in users)
            ):
                found.add(id(value))
    return frozenset(found)


def read_by_shapes_only(value: ir.Value, nodes: Sequence[ir.Node]) -> bool:
    """Whether the slice reads ``value`` through Shape/Size alone."""
    in_slice = {id(n) for n in nodes}
    return all(
        user.op_type in SHAPE_READERS for user, _ in value.uses() if id(user) in in_slice
    )


def lengths_from_shapes(nodes: Sequence[ir.Node]) -> list[ir.Value]:
    """Values in the slice that hold one dim in every element: candidate lengths.

    Lengths built from a shape (``Expand(Gather(Shape(x), k), ...)``, as tf2onnx exports
    ``tf.reverse``) are such a value. Broadcasts (Expand, Tile) come first, latest first:
    the decomposition's own dims (a Squeeze for Range) are such values too, and are
    tried after them.
    """
    table = ShapeTable()
    found = [
        value
        for node in reversed(nodes)
        if node.op_type not in SHAPE_READERS and node.op_type != "Constant"
        for value in node.outputs
        if ir.convenience.get_const_tensor(value) is None
        and scalar_dim(value, table) is not None
    ]
    return sorted(found, key=lambda v: v.producer().op_type not in ("Expand", "Tile"))  # type: ignore[union-attr]


def constant_lengths(nodes: Sequence[ir.Node]) -> list[ir.Value]:
    """1-D integer constants the slice reads: candidate lengths given as a constant.

    ``revseq.inline`` of constant lengths with symbolic dims computes the index from the
    lengths' values (some folded in): the slice reads them as a constant, not a leaf.
    The model's own initializers come first: a constant the decomposition made (a
    Constant node, or in the main graph an initializer named ``<prefix>/Constant_<i>``)
    may hold the same values (an axis), and the model's own lengths are the ones to keep.
    """
    found: list[ir.Value] = []
    seen: set[int] = set()
    for node in nodes:
        for value in node.inputs:
            if value is None or id(value) in seen:
                continue
            seen.add(id(value))
            tensor = ir.convenience.get_const_tensor(value)
            if tensor is not None and tensor.dtype in LENGTH_TYPES and len(tensor.shape) == 1:
                found.append(value)
    return sorted(
        found,
        key=lambda v: (v.producer() is not None, _emitted_constant(v)),
    )


def _emitted_constant(value: ir.Value) -> bool:
    """Whether ``value`` is named as a constant a form emits (``EMITTED_NAME``)."""
    found = EMITTED_NAME.match(value.name or "")
    return found is not None and found.group("op") == "Constant"
