"""A candidate's decomposition of one ReverseSequence node, cut out as a model of its own.

To prove a decomposition on a backend, run that decomposition, and only it, there: the
rest of a model (a MatMul, an RNN the backend lacks) would round differently or not run
at all, and say nothing about the reversal. For a node of the reference that produces
``y``, the candidate's counterpart is everything the candidate computes ``y`` from,
back to values the reference has too (by name: a rewrite keeps the names of the values
it does not replace). Those values become the cut model's inputs, fed with what the
reference computes for them; initializers and constants come along.
"""

from __future__ import annotations

__all__ = ["Counterpart", "counterparts"]

import dataclasses
import itertools
import logging

import onnx
import onnx_ir as ir

from revseq.ops.vocabulary import ONNX_DOMAINS
from revseq.passes import ScopedNode, ShapeTable, is_reverse_sequence, node_label, walk
from revseq.passes.graph.producers import scalar_dim
from revseq.passes.graph.reverse_sequence import int32_source

logger = logging.getLogger(__name__)

Dims = tuple[int | str | None, ...] | None

_GRAPH_ATTRS = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


@dataclasses.dataclass(frozen=True)
class Counterpart:
    """One ReverseSequence node of the reference and the candidate's replacement of it.

    Attributes:
        name: The node's name ("" when unnamed).
        scope: Where the node sits ("main", a subgraph path, a function).
        label: How messages name the node.
        domain: The node's domain ("" or "revseq").
        batch_axis: The node's batch_axis.
        time_axis: The node's time_axis.
        data: The name of the node's data input.
        lengths: The name of the node's lengths input.
        output: The name of the node's output.
        data_dtype: The data's element type where known.
        data_dims: The data's dims where known (shape inference, as ``info`` shows them).
        lengths_dtype: The lengths' element type where known.
        constant_lengths: Whether the reference computes the lengths from constants alone
            (then only the model's own lengths are tried).
        shape_lengths: Whether they are its data's time length whatever the inputs
            hold (``Shape(x)[1]`` expanded to the batch: a full flip): in the main
            graph, only the model's own lengths are tried then, as no other lengths can
            reach the node.
        lengths_source: The cut model's input the lengths are cast from (int32 lengths
            an exporter cast to int64, which a form may read instead), or None: other
            lengths are fed there.
        inputs: The cut model's inputs, in order: values the reference has too.
        input_dims: Each input's dims as the candidate knows them (None: rank unknown).
        graph: The cut model's nodes and initializers, or None where no counterpart
            could be cut out (``error`` says why).
        error: Why the node has no counterpart that can be run alone.
    """

    name: str
    scope: str
    label: str
    domain: str
    batch_axis: int
    time_axis: int
    data: str
    lengths: str
    output: str
    data_dtype: ir.DataType | None
    data_dims: Dims
    lengths_dtype: ir.DataType | None
    constant_lengths: bool
    shape_lengths: bool = False
    lengths_source: str | None = None
    inputs: tuple[str, ...] = ()
    input_dims: tuple[Dims, ...] = ()
    graph: onnx.GraphProto | None = None
    opset_imports: tuple[tuple[str, int], ...] = ()
    error: str | None = None

    @property
    def lengths_vary(self) -> bool:
        """Whether generated lengths may replace the model's own in the cut model."""
        fixed = self.constant_lengths or (self.shape_lengths and self.scope == "main")
        return not fixed and (self.lengths in self.inputs or self.lengths_source is not None)

    def model(
        self,
        input_types: dict[str, int],
        output_type: int,
        *,
        functions: list[onnx.FunctionProto],
        ir_version: int,
    ) -> onnx.ModelProto:
        """The cut model, its inputs typed as the values that will feed it."""
        assert self.graph is not None
        symbols = (f"d{i}" for i in itertools.count())
        inputs = []
        for name, dims in zip(self.inputs, self.input_dims, strict=True):
            shape = (
                None if dims is None else [d if d is not None else next(symbols) for d in dims]
            )
            inputs.append(onnx.helper.make_tensor_value_info(name, input_types[name], shape))
        graph = onnx.GraphProto()
        graph.CopyFrom(self.graph)
        graph.input.extend(inputs)
        # The output has the data's rank; its dims are left unknown (a backend infers
        # them); an importer may require a shape on every graph output.
        dims = dict(zip(self.inputs, self.input_dims, strict=True)).get(self.data)
        dims = self.data_dims if dims is None else dims
        rank = None if dims is None else [None] * len(dims)
        graph.output.append(onnx.helper.make_tensor_value_info(self.output, output_type, rank))
        called = _called(graph, functions)
        domains = {n.domain for n in graph.node} | {n.domain for f in called for n in f.node}
        return onnx.helper.make_model(
            graph,
            opset_imports=[
                onnx.helper.make_opsetid(d, v)
                for d, v in self.opset_imports
                if d in ONNX_DOMAINS or d in domains
            ],
            functions=called,
            ir_version=ir_version,
        )


def _called(
    graph: onnx.GraphProto, functions: list[onnx.FunctionProto]
) -> list[onnx.FunctionProto]:
    """The model-local functions ``graph`` calls, directly or through other functions.

    A backend may refuse a model for a function it never runs (a domain it does not
    know), so the cut model carries only these.
    """
    by_id = {(f.domain, f.name): f for f in functions}
    called: dict[tuple[str, str], onnx.FunctionProto] = {}
    pending = [(n.domain, n.op_type) for n in graph.node]
    while pending:
        key = pending.pop()
        if key in by_id and key not in called:
            called[key] = by_id[key]
            pending.extend((n.domain, n.op_type) for n in by_id[key].node)
    return list(called.values())


class _CannotCut(Exception):
    """The candidate's replacement of a node cannot be cut out alone."""


def _graphs(model: ir.Model) -> list[ir.Graph]:
    """The main graph, every subgraph at any depth, every function's body and subgraphs."""
    graphs = list(model.graphs())
    for function in model.functions.values():
        graphs.append(function.graph)
        for node in ir.traversal.RecursiveGraphIterator(function.graph):
            for attr in node.attributes.values():
                if isinstance(attr, ir.Attr) and attr.type == ir.AttributeType.GRAPH:
                    graphs.append(attr.value)
                elif isinstance(attr, ir.Attr) and attr.type == ir.AttributeType.GRAPHS:
                    graphs.extend(attr.value)
    return graphs


def _names(model: ir.Model) -> set[str]:
    """Every value name of every scope: inputs, initializers, node outputs."""
    names: set[str] = set()
    for graph in _graphs(model):
        names.update(v.name for v in graph.inputs if v.name)
        names.update(graph.initializers)
        names.update(v.name for node in graph for v in node.outputs if v.name)
    return names


def _upstream(value: ir.Value) -> list[ir.Value]:
    """``value`` and every value it is computed from, in its scope and the outer ones."""
    found: list[ir.Value] = []
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        found.append(v)
        producer = v.producer()
        if producer is not None:
            stack.extend(i for i in producer.inputs if i is not None)
    return found


def _depends_on_input(value: ir.Value) -> bool:
    """Whether ``value`` reads some input (else constants alone make it).

    An input is a graph input, an outer-scope value or a function parameter: a value
    that nothing in reach produces and that is no initializer.
    """
    return any(
        v.is_graph_input() or (v.producer() is None and not v.is_initializer())
        for v in _upstream(value)
    )


def _cut(
    output: ir.Value, known: set[str], shapes: ShapeTable
) -> tuple[list[str], list[Dims], onnx.GraphProto]:
    """The nodes computing ``output`` back to values named in ``known``, as a graph."""
    nodes: list[ir.Node] = []
    inputs: list[ir.Value] = []
    initializers: dict[str, ir.Value] = {}
    seen: set[int] = set()
    done: set[int] = set()

    def visit(value: ir.Value) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if value.is_initializer() and value.const_value is not None:
            initializers[value.name or ""] = value
            return
        if value is not output and value.name in known:
            inputs.append(value)
            return
        producer = value.producer()
        if producer is None:
            raise _CannotCut(f"it reads {value.name!r}, which the reference does not have")
        if any(
            isinstance(a, ir.Attr) and a.type in _GRAPH_ATTRS
            for a in producer.attributes.values()
        ):
            raise _CannotCut(f"it computes {value.name!r} in a subgraph ({producer.op_type})")
        for i in producer.inputs:
            if i is not None:
                visit(i)
        if id(producer) not in done:
            done.add(id(producer))
            nodes.append(producer)

    visit(output)
    graph = onnx.helper.make_graph(
        [ir.serde.serialize_node(n) for n in nodes],
        "counterpart",
        [],
        [],
        [ir.serde.serialize_tensor(v.const_value) for v in initializers.values()],
    )
    for value, tensor in zip(initializers.values(), graph.initializer, strict=True):
        tensor.name = value.name or tensor.name
    return [v.name or "" for v in inputs], [shapes.dims(v) for v in inputs], graph


def _opset_imports(
    model: ir.Model, owner: ir.Graph | ir.Function
) -> tuple[tuple[str, int], ...]:
    imports = dict(model.opset_imports)
    imports.update(owner.opset_imports)
    return tuple(sorted(imports.items()))


def _produced(candidate: ir.Model) -> dict[tuple[str, str], tuple[ir.Value, ScopedNode]]:
    """The candidate's node outputs by (scope, name)."""
    produced = {}
    for scoped in walk(candidate):
        for value in scoped.node.outputs:
            if value.name:
                produced[(scoped.scope, value.name)] = (value, scoped)
    return produced


def counterparts(reference: ir.Model, candidate: ir.Model) -> list[Counterpart]:
    """For each ReverseSequence node of ``reference``, the candidate's replacement of it."""
    nodes = [
        s
        for s in walk(reference)
        if is_reverse_sequence(s.node) and len(s.node.inputs) == 2 and s.node.outputs
    ]
    if not nodes:
        return []  # before shape inference, which is the costly part
    known = _names(reference)
    produced = _produced(candidate)
    reference_shapes = ShapeTable.infer(reference)
    candidate_shapes = ShapeTable.infer(candidate)
    found = []
    for scoped in nodes:
        data, lengths = scoped.node.inputs
        if data is None or lengths is None:
            continue
        base = _described(scoped, reference_shapes)
        output = scoped.node.outputs[0]
        match = produced.get((scoped.scope, output.name or ""))
        if match is None:
            error = f"the candidate computes no value named {output.name!r} in {scoped.scope}"
            found.append(dataclasses.replace(base, error=error))
            continue
        value, cand_scoped = match
        try:
            inputs, dims, graph = _cut(value, known, candidate_shapes)
        except _CannotCut as e:
            found.append(
                dataclasses.replace(base, error=f"cannot run its replacement alone: {e}")
            )
            continue
        tangled = [
            n
            for n in inputs
            if n not in (base.lengths, base.data)
            and base.lengths in _upstream_of(reference, n)
        ]
        source = int32_source(lengths)
        found.append(
            dataclasses.replace(
                base,
                constant_lengths=base.constant_lengths or bool(tangled),
                lengths_source=source.name
                if source is not None and source.name in inputs and base.lengths not in inputs
                else None,
                inputs=tuple(inputs),
                input_dims=tuple(dims),
                graph=graph,
                opset_imports=_opset_imports(candidate, cand_scoped.owner),
            )
        )
    return found


def _described(scoped: ScopedNode, shapes: ShapeTable) -> Counterpart:
    """The reference node as a counterpart, before its replacement is cut out."""
    node = scoped.node
    data, lengths = node.inputs
    assert data is not None and lengths is not None
    return Counterpart(
        name=node.name or "",
        scope=scoped.scope,
        label=node_label(scoped),
        domain=node.domain,
        batch_axis=node.attributes.get_int("batch_axis", 1),
        time_axis=node.attributes.get_int("time_axis", 0),
        data=data.name or "",
        lengths=lengths.name or "",
        output=node.outputs[0].name or "",
        data_dtype=shapes.dtype(data),
        data_dims=shapes.dims(data),
        lengths_dtype=shapes.dtype(lengths),
        constant_lengths=not _depends_on_input(lengths),
        shape_lengths=_full_length(scoped, shapes),
    )


def _full_length(scoped: ScopedNode, shapes: ShapeTable) -> bool:
    """Whether the node's lengths are its data's time length, whatever the inputs hold.

    tf2onnx's full flip (``Expand(Gather(Shape(x), t), ...)``): a shape read of the
    very dim the node reverses along, seen as the inliner sees it (``scalar_dim``).
    """
    data, lengths = scoped.node.inputs
    if data is None or lengths is None:
        return False
    time_axis = scoped.node.attributes.get_int("time_axis", 0)
    if time_axis < 0:  # the revseq domain's: from the end, where the rank is known
        rank = shapes.rank(data)
        if rank is None:
            return False
        time_axis %= rank
    read = scalar_dim(lengths, shapes)
    return read is not None and read == shapes.dim_key(data, time_axis)


def _upstream_of(model: ir.Model, name: str) -> set[str]:
    """The names of the values ``name`` is computed from in ``model``."""
    for scoped in walk(model):
        for value in scoped.node.outputs:
            if value.name == name:
                return {v.name for v in _upstream(value) if v.name}
    return set()
