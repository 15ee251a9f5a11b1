"""Recognise ReverseSequence nodes, validate them, and read what a form needs to know."""

from __future__ import annotations

__all__ = [
    "remove_if_dead",
    "REVSEQ_DOMAIN",
    "ONNX_MIN_OPSET",
    "DECOMPOSITION_MIN_OPSET",
    "is_reverse_sequence",
    "node_label",
    "signature_of",
    "validate_all",
    "FLAVOUR_LENGTH_TYPES",
    "LENGTH_TYPES",
]

from collections.abc import Iterable

import numpy as np
import onnx_ir as ir

from revseq.errors import InvalidNodeError, UnsupportedOpsetError
from revseq.ops.signature import Signature
from revseq.ops.vocabulary import ONNX_DOMAINS, REVSEQ_DOMAIN
from revseq.passes.graph.scopes import ScopedNode, opset_version
from revseq.passes.graph.shapes import ShapeTable

ONNX_MIN_OPSET = 10
"""ReverseSequence first appears in opset 10."""

DECOMPOSITION_MIN_OPSET = 11
"""Range and GatherElements appear in opset 11."""

LENGTH_TYPES = {
    "": (ir.DataType.INT64,),
    REVSEQ_DOMAIN: (ir.DataType.INT64, ir.DataType.INT32),
}
"""The ``sequence_lens`` element types each domain's op accepts."""

FLAVOUR_LENGTH_TYPES = (ir.DataType.INT32,)
"""Lengths types an ONNX-domain node is taken with though ONNX allows only int64.

TensorFlow's flavour of the op (and other toolkits') takes int32 lengths, and models
converted from them hold it (not valid ONNX: onnxruntime refuses it). revseq inlines
such a node as the ``revseq`` domain's op, and what it writes is valid ONNX."""


def is_reverse_sequence(node: ir.Node) -> bool:
    """Whether ``node`` is ReverseSequence of the ONNX domain or of the ``revseq`` domain."""
    return node.op_type == "ReverseSequence" and (
        node.domain in ONNX_DOMAINS or node.domain == REVSEQ_DOMAIN
    )


def node_label(scoped: ScopedNode) -> str:
    """A readable reference to a node for messages: name, domain and scope."""
    node = scoped.node
    domain = "revseq" if node.domain == REVSEQ_DOMAIN else "onnx"
    name = repr(node.name) if node.name else "(unnamed)"
    return f"ReverseSequence node {name} ({domain} domain, in {scoped.scope})"


def _fail(scoped: ScopedNode, problem: str) -> InvalidNodeError:
    return InvalidNodeError(f"{node_label(scoped)}: {problem}")


def _constant_lengths(value: ir.Value) -> np.ndarray | None:
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None:
        return None
    # A graph input with a default initializer can be overridden at run time.
    if value.is_graph_input():
        return None
    return np.asarray(tensor.numpy()).reshape(-1)


def signature_of(
    scoped: ScopedNode,
    *,
    opset: int,
    allowed: frozenset[str] | None = None,
    shapes: ShapeTable | None = None,
) -> Signature:
    """Validate ``scoped.node`` and describe it for a form emitting at ``opset``.

    ``shapes`` adds what shape inference found to the declared shapes and types.

    Raises:
        InvalidNodeError: The node breaks the operator's specification.
        UnsupportedOpsetError: The op does not exist in the node's opset.
    """
    node = scoped.node
    domain = REVSEQ_DOMAIN if node.domain == REVSEQ_DOMAIN else ""
    _check_arity(scoped, domain)
    data, lens = node.inputs
    assert data is not None and lens is not None
    table = shapes if shapes is not None else ShapeTable()
    data_dims = table.dims(data)
    rank = len(data_dims) if data_dims is not None else None
    if rank is not None and rank < 2:
        raise _fail(scoped, f"input must have rank >= 2, got rank {rank}")
    batch_axis, time_axis = _axes(scoped, domain, rank)
    lens_dtype, lens_dims = _lengths_type(scoped, domain, table)
    dims: tuple[int | None, ...] | None = None
    if data_dims is not None:
        dims = tuple(d if isinstance(d, int) else None for d in data_dims)
    constant = _constant_lengths(lens)
    batch = dims[batch_axis] if dims is not None else None
    lens_size = constant.size if constant is not None else None
    if lens_size is None and lens_dims is not None and isinstance(lens_dims[0], int):
        lens_size = lens_dims[0]
    if batch is not None and lens_size is not None and batch != lens_size:
        raise _fail(
            scoped,
            f"sequence_lens has {lens_size} elements but the batch axis ({batch_axis}) "
            f"has size {batch}",
        )
    return Signature(
        batch_axis=batch_axis,
        time_axis=time_axis,
        rank=rank,
        dims=dims,
        dtype=table.dtype(data),
        lens_dtype=lens_dtype,
        lens=tuple(int(v) for v in constant) if constant is not None else None,
        opset=opset,
        allowed=allowed,
        lens_own_dim=constant is None
        and batch is None
        and _own_dim(table, data, lens, batch_axis),
    )


def _check_arity(scoped: ScopedNode, domain: str) -> None:
    """Refuse a node of an opset without the op, or without two inputs and one output."""
    node = scoped.node
    version = opset_version(scoped.owner, node.domain)
    if domain == "" and (version is None or version < ONNX_MIN_OPSET):
        raise UnsupportedOpsetError(
            f"{node_label(scoped)}: ReverseSequence does not exist in opset {version} "
            f"(it was added in opset {ONNX_MIN_OPSET})"
        )
    if len(node.inputs) != 2 or any(v is None for v in node.inputs):
        raise _fail(scoped, f"expects 2 inputs (input, sequence_lens), got {len(node.inputs)}")
    if len(node.outputs) != 1:
        raise _fail(scoped, f"expects 1 output, got {len(node.outputs)}")


def _axes(scoped: ScopedNode, domain: str, rank: int | None) -> tuple[int, int]:
    """(batch_axis, time_axis), validated: 0 or 1 in ONNX's domain, any in revseq's."""
    batch_axis = scoped.node.attributes.get_int("batch_axis", 1)
    time_axis = scoped.node.attributes.get_int("time_axis", 0)
    if domain == "":
        if batch_axis not in (0, 1) or time_axis not in (0, 1):
            raise _fail(
                scoped,
                f"batch_axis and time_axis must each be 0 or 1, got batch_axis={batch_axis}, "
                f"time_axis={time_axis} (the revseq domain accepts any axes)",
            )
    elif rank is not None:
        for name, axis in (("batch_axis", batch_axis), ("time_axis", time_axis)):
            if not -rank <= axis < rank:
                raise _fail(scoped, f"{name}={axis} is out of range for rank {rank}")
        batch_axis %= rank
        time_axis %= rank
    elif batch_axis < 0 or time_axis < 0:
        raise UnsupportedOpsetError(
            f"{node_label(scoped)}: negative axes need a known input rank; declare the "
            "input's shape or run shape inference first"
        )
    if batch_axis == time_axis:
        raise _fail(scoped, f"batch_axis and time_axis must differ, both are {batch_axis}")
    return batch_axis, time_axis


def _lengths_type(
    scoped: ScopedNode, domain: str, table: ShapeTable
) -> tuple[ir.DataType | None, tuple | None]:
    """The lengths' element type and dims, refused unless an allowed type of rank 1."""
    lens = scoped.node.inputs[1]
    assert lens is not None
    lens_dtype = table.dtype(lens)
    accepted = LENGTH_TYPES[domain] + (FLAVOUR_LENGTH_TYPES if domain == "" else ())
    if lens_dtype is not None and lens_dtype not in accepted:
        allowed_types = " or ".join(t.name.lower() for t in LENGTH_TYPES[domain])
        raise _fail(scoped, f"sequence_lens must be {allowed_types}, got {lens_dtype.name}")
    lens_dims = table.dims(lens)
    if lens_dims is not None and len(lens_dims) != 1:
        raise _fail(scoped, f"sequence_lens must be 1-D, got rank {len(lens_dims)}")
    return lens_dtype, lens_dims


def int32_source(lens: ir.Value) -> ir.Value | None:
    """The int32 value int64 lengths were cast from (as exporters cast TensorFlow's).

    The same values exactly: a form may read them instead, and on a target that
    computes its index in int32 nothing of the lengths is then int64 (onnxruntime-web
    runs int64 arithmetic on the CPU, so lengths cast on the GPU would be copied back
    to the host for it).
    """
    cast = lens.producer()
    if (
        cast is None
        or cast.op_type != "Cast"
        or cast.domain not in ONNX_DOMAINS
        or cast.attributes.get_int("to") != ir.DataType.INT64
    ):
        return None
    source = cast.inputs[0]
    return source if source is not None and source.dtype == ir.DataType.INT32 else None


def _own_dim(table: ShapeTable, data: ir.Value, lens: ir.Value, batch_axis: int) -> bool:
    """Whether the lengths' dim is known and not provably the data's batch dim."""
    own = table.dim_key(lens, 0)
    return own is not None and own != table.dim_key(data, batch_axis)


def validate_all(scoped_nodes: Iterable[ScopedNode]) -> None:
    """Validate every ReverseSequence node among ``scoped_nodes`` (e.g. ``walk(model)``).

    Raises:
        InvalidNodeError: A node breaks the operator's specification.
        UnsupportedOpsetError: A node's op does not exist in its opset.
    """
    declared = ShapeTable()  # one table: its walks back through producers are memoised
    for scoped in scoped_nodes:
        if is_reverse_sequence(scoped.node):
            signature_of(scoped, opset=DECOMPOSITION_MIN_OPSET, shapes=declared)


def remove_if_dead(value: ir.Value) -> None:
    """Remove what computed ``value`` (nodes, or an initializer) as far as nothing reads it.

    Called on what a rewrite left unread: a replaced node's lengths (folded into
    constants, or made needless by a simpler form) and a fused decomposition's output.
    Left behind, they are dead code (onnxruntime warns of an unused initializer). A
    graph input, a graph output and anything still read stay.
    """
    if value.uses() or value.is_graph_output() or value.is_graph_input():
        return
    if value.is_initializer():
        graph = value.graph
        if graph is not None and graph.initializers.get(value.name or "") is value:
            graph.initializers.pop(value.name or "")
        return
    node = value.producer()
    if node is None or node.graph is None:
        return
    if any(out.uses() or out.is_graph_output() for out in node.outputs):
        return
    inputs = [v for v in node.inputs if v is not None]
    node.graph.remove(node, safe=True)
    for source in inputs:
        remove_if_dead(source)
