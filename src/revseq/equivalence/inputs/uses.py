"""What a model does with its inputs, read from the graph: which values each may hold.

Two questions are read from the graph. First, which values an input may hold:

A check runs models on generated inputs, and real models refuse most random values:
token ids index an embedding (``Gather``), so an id beyond its rows fails the run.
:func:`index_uses` follows each integer graph input forward through the ops that move
values without changing them (Cast, Reshape, Unsqueeze, Transpose, Concat, the gathers'
data, a ReverseSequence's data, ...) to the gathers that take it as their index: its
values must then lie within the gathered axis. It follows the elementwise arithmetic
exporters wrap indices in as well (TensorFlow's negative-index wrap ``Where(x < 0, x + N,
x)``, written as a select by multiply-add): ids drawn within the axis pass through it
unchanged, and a run of the reference proves it. :func:`reversed_inputs` finds the inputs
whose values reach a ReverseSequence's data, and through it an output, the same way:
only there do NaN payloads, -0.0 and infinities prove something in a whole model (a
copy must keep them), while through arithmetic they would turn its outputs into NaNs
whose sign each runtime's kernels set their own way. Each node run alone gets them
anyway.

Second, where a model's lengths come from and what their time length is. A check proves
nothing about a reversal unless some lengths are 2 or more, and no runtime takes lengths
beyond the time length: the generator must know, for each graph input that feeds a
``sequence_lens``, the data its nodes reverse (:func:`lengths_inputs`), and for nodes
with constant lengths, how long their time dims must be (:func:`time_needs`).
"""

from __future__ import annotations

__all__ = [
    "constant_reversals",
    "declared_span",
    "index_uses",
    "IndexUse",
    "input_elem",
    "lengths_inputs",
    "LengthsInput",
    "reversals_as_identities",
    "reversed_inputs",
    "steps_reversed",
    "time_needs",
    "trace_to_input",
]

import dataclasses
import logging
from collections.abc import Iterator

import onnx
import onnx_ir as ir

from revseq.ops.vocabulary import ONNX_DOMAINS, REVSEQ_DOMAIN
from revseq.passes import is_reverse_sequence, walk

logger = logging.getLogger(__name__)

# Ops whose output holds only values of the given input (positions): a value moves
# through them unchanged, or is left out.
_MOVES: dict[str, tuple[int, ...]] = {
    "Identity": (0,),
    "Reshape": (0,),
    "Transpose": (0,),
    "Squeeze": (0,),
    "Unsqueeze": (0,),
    "Flatten": (0,),
    "Slice": (0,),
    "Expand": (0,),
    "Tile": (0,),
    "Split": (0,),
    "Gather": (0,),
    "GatherElements": (0,),
    "GatherND": (0,),
    "ReverseSequence": (0,),
    "Concat": (),  # every input
    "Where": (1, 2),
}

# Ops that keep an integer's value (a Cast to another integer type keeps an index).
_INTEGER_TYPES = frozenset(
    {
        ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
        ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
    }
)  # fmt: skip

# Elementwise arithmetic an index may pass through on its way to a gather (a wrap of
# negative ids, a clamp, a select by multiply-add): followed for indices only, and
# named in the report.
_ARITHMETIC = frozenset(
    {"Add", "Sub", "Mul", "Neg", "Abs", "Max", "Min", "Clip", "Mod", "Where", "Cast"}
)

# Gathers whose input 1 is an index into input 0 along an axis attribute.
_GATHERS = ("Gather", "GatherElements")


@dataclasses.dataclass(frozen=True)
class IndexUse:
    """A gather that reads an input's values as indices.

    Attributes:
        node: The gather's label (op type and name), for the report.
        data: The gathered value's name.
        axis: The gathered axis (non-negative where the data's rank is known).
        size: The axis's static size, None where it is known only at run time.
    """

    node: str
    data: str
    axis: int
    size: int | None
    through: str | None = None

    def describe(self) -> str:
        """What the use bounds, for the report."""
        size = self.size if self.size is not None else "its run-time size"
        via = f" through {self.through}" if self.through else ""
        return f"indexes axis {self.axis} of {self.data!r} ({size}) at {self.node}{via}"


def _moved(node: ir.Node, position: int, *, integer: bool) -> bool:
    """Whether ``node`` moves the value at input ``position`` to its outputs unchanged."""
    if node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type == "Cast":
        return integer and node.attributes.get_int("to", 0) in _INTEGER_TYPES
    if node.op_type == "Pad":  # pads with a constant (0 by default) in every mode
        return integer and position == 0
    positions = _MOVES.get(node.op_type)
    if positions is None:
        return False
    return not positions or position in positions


def _uses(
    model: ir.Model, value: ir.Value, *, integer: bool, arithmetic: bool = False
) -> Iterator[tuple[ir.Node, int, str | None]]:
    """Every (node, position, through) that reads ``value``'s values, through moving ops.

    With ``arithmetic`` (an index on its way to a gather), on through elementwise
    arithmetic too: ``through`` names the first such op on the way, None where the
    values arrive unchanged. Subgraphs read outer values directly (their nodes are
    among the uses); a call of a model-local function passes the value on to the
    function's parameter.
    """
    seen: set[int] = set()
    stack: list[tuple[ir.Value, str | None]] = [(value, None)]
    while stack:
        current, through = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for node, position in current.uses():
            yield node, position, through
            if _moved(node, position, integer=integer):
                stack.extend((o, through) for o in node.outputs if o is not None)
            elif arithmetic and node.domain in ("", "ai.onnx") and node.op_type in _ARITHMETIC:
                label = through or _label(node)
                stack.extend((o, label) for o in node.outputs if o is not None)
            function = model.functions.get(node.op_identifier())
            if function is not None and position < len(function.inputs):
                stack.append((function.inputs[position], through))


def _label(node: ir.Node) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else node.op_type


def _index_use(node: ir.Node, through: str | None) -> IndexUse | None:
    data = node.inputs[0] if node.inputs else None
    if data is None or not data.name:
        return None
    axis = node.attributes.get_int("axis", 0)
    shape = data.shape
    if data.const_value is not None:
        shape = ir.Shape(data.const_value.shape)
    size = None
    if shape is not None:
        if not -len(shape) <= axis < len(shape):
            return None
        axis %= len(shape)
        dim = shape[axis]
        size = dim if isinstance(dim, int) else None
    return IndexUse(_label(node), data.name, axis, size, through)


def index_uses(model: ir.Model) -> dict[str, list[IndexUse]]:
    """Integer graph inputs read as indices by a Gather or GatherElements (main graph)."""
    found: dict[str, list[IndexUse]] = {}
    for value in model.graph.inputs:
        if value.name is None or value.dtype not in _INTEGER_TYPES:
            continue
        if value.name in model.graph.initializers:
            continue
        for node, position, through in _uses(model, value, integer=True, arithmetic=True):
            if node.op_type in _GATHERS and node.domain in ("", "ai.onnx") and position == 1:
                use = _index_use(node, through)
                # A size known only at run time is read from a run: main graph only.
                if use is None or (use.size is None and node.graph is not model.graph):
                    continue
                known = found.setdefault(value.name, [])
                if all(u.node != use.node or u.data != use.data for u in known):
                    known.append(use)
    return found


def _reaches_an_output(model: ir.Model, node: ir.Node) -> bool:
    """Whether ``node``'s output reaches a graph output unchanged.

    A node outside the main graph (a subgraph or a function returns its output) is
    taken as reaching one.
    """
    if node.graph is not model.graph:
        return True
    outputs = {id(v) for v in model.graph.outputs}
    if any(id(o) in outputs for o in node.outputs):
        return True
    for start in node.outputs:
        if start is None:
            continue
        for user, position, _ in _uses(model, start, integer=False):
            if _moved(user, position, integer=False) and any(
                id(o) in outputs for o in user.outputs
            ):
                return True
    return False


def reversed_inputs(model: ir.Model) -> set[str]:
    """Graph inputs whose values reach a ReverseSequence's data, and an output, unchanged.

    Only there do a NaN's payload and sign survive every runtime's arithmetic alike (a
    Conv after the reversal may set a NaN's sign either way).
    """
    found = set()
    for value in model.graph.inputs:
        if value.name is None or value.name in model.graph.initializers:
            continue
        integer = value.dtype in _INTEGER_TYPES
        for node, position, _ in _uses(model, value, integer=integer):
            if position == 0 and is_reverse_sequence(node) and _reaches_an_output(model, node):
                found.add(value.name)
                break
    return found


# --- The lengths: where each comes from, and the time length it runs to ----------------
@dataclasses.dataclass(frozen=True)
class LengthsInput:
    """A graph input that feeds some node's ``sequence_lens``.

    Attributes:
        data: The graph input the node's data comes from unchanged, if any.
        data_dims: The node's data dims as declared (a size, a symbol or None).
        time_axis: The node's time axis.
        batch_axis: The node's batch axis: the lengths have the data's batch size there,
            whatever dim they are declared with (exporters give them a symbol of their
            own).
        observed: Main-graph data values whose time length the lengths must not exceed
            (read from a first run), with their time and batch axes.
    """

    data: str | None
    data_dims: tuple[int | str | None, ...] | None
    time_axis: int
    batch_axis: int = 1
    observed: tuple[tuple[str, int, int], ...] = ()


def trace_to_input(value: ir.Value | None, inputs: set[str]) -> str | None:
    """The graph input ``value`` is, through Casts and Identities; None where none."""
    while value is not None:
        if value.name in inputs and value.producer() is None:
            return value.name
        node = value.producer()
        if node is None or node.op_type not in ("Cast", "Identity") or not node.inputs:
            return None
        value = node.inputs[0]
    return None


def _call_arguments(model: ir.Model) -> dict[int, list[ir.Value | None]]:
    """For each function parameter (by id), the arguments its call sites pass."""
    arguments: dict[int, list[ir.Value | None]] = {}
    for scoped in walk(model):
        function = model.functions.get(scoped.node.op_identifier())
        if function is None:
            continue
        for parameter, argument in zip(function.inputs, scoped.node.inputs, strict=False):
            arguments.setdefault(id(parameter), []).append(argument)
    return arguments


def lengths_inputs(model: ir.Model) -> dict[str, LengthsInput]:
    """Graph inputs that feed a ``sequence_lens``, with what their time length is.

    Lengths reach a node directly, through Cast/Identity, from an outer scope, or as
    the argument of a call to the model-local function that holds the node.
    """
    names = {v.name for v in model.graph.inputs if v.name}
    arguments = _call_arguments(model)

    def sources(value: ir.Value | None) -> list[ir.Value | None]:
        passed = arguments.get(id(value)) if value is not None else None
        return passed if passed else [value]

    found: dict[str, LengthsInput] = {}
    for scoped in walk(model):
        node = scoped.node
        if not is_reverse_sequence(node) or len(node.inputs) != 2:
            continue
        time_axis = node.attributes.get_int("time_axis", 0)
        batch_axis = node.attributes.get_int("batch_axis", 1)
        for lens, data in zip(sources(node.inputs[1]), sources(node.inputs[0]), strict=False):
            source = trace_to_input(lens, names)
            if source is None:
                continue
            observed = found[source].observed if source in found else ()
            if data is not None and data.name and scoped.scope == "main":
                observed = (*observed, (data.name, time_axis, batch_axis))
            if source in found:
                found[source] = dataclasses.replace(found[source], observed=observed)
                continue
            dims = None
            if data is not None and data.shape is not None:
                dims = tuple(
                    d if isinstance(d, int) else (d.value if d else None) for d in data.shape
                )
            found[source] = LengthsInput(
                data=trace_to_input(data, names),
                data_dims=dims,
                time_axis=time_axis,
                batch_axis=batch_axis,
                observed=observed,
            )
    return found


def constant_reversals(model: ir.Model) -> list[tuple[ir.Node, int, bool]]:
    """Each ReverseSequence with constant lengths: the longest, and whether in main.

    Its lengths are no input the trials generate (restore fuses a constant index so).
    """
    found = []
    for scoped in walk(model):
        node = scoped.node
        if not is_reverse_sequence(node) or len(node.inputs) != 2 or node.inputs[1] is None:
            continue
        lens = ir.convenience.get_const_tensor(node.inputs[1])
        if lens is not None and lens.size:
            found.append((node, int(lens.numpy().max()), scoped.scope == "main"))
    return found


def time_needs(
    model: ir.Model, reversals: list[tuple[ir.Node, int, bool]]
) -> tuple[dict[str, int], list[tuple[str, int, int]]]:
    """What the time dims of ``reversals`` need to hold their constant lengths.

    Floors: the least size of each symbolic time dim of a graph input the node reads
    (as is, or through Cast/Identity): it must hold the longest of its lengths (ONNX
    defines no others, and onnxruntime refuses them). Keyed as ``_concrete_dims`` keys a
    symbol: its name, else "input:axis". Computed: each main-graph node whose data is
    computed (a Slice of an input, a MatMul's result), as (data name, time axis, longest
    length): its time dim is known only once the model runs, so a trial reads it
    (the generator's growth of its dims).
    """
    inputs = {v.name: v for v in model.graph.inputs if v.name}
    names = set(inputs)
    floors: dict[str, int] = {}
    computed: list[tuple[str, int, int]] = []
    for node, longest, main in reversals:
        data = node.inputs[0]
        time_axis = node.attributes.get_int("time_axis", 0)
        source = trace_to_input(data, names)
        if source is None:
            if main and data is not None and data.name and longest >= 1:
                computed.append((data.name, time_axis, longest))
            continue
        shape = inputs[source].shape
        if shape is None or not len(shape):
            continue
        axis = time_axis % len(shape)
        dim = shape[axis]
        if not isinstance(dim, int):
            key = dim.value or f"{source}:{axis}"
            floors[key] = max(floors.get(key, 0), longest)
    return floors, computed


def steps_reversed(node: ir.Node, longest: int) -> int:
    """The most steps constant lengths reverse: the longest, at most a static T."""
    data = node.inputs[0]
    if data is not None and data.shape is not None:
        time_dim = data.shape[node.attributes.get_int("time_axis", 0)]
        if isinstance(time_dim, int):
            return min(longest, time_dim)
    return longest


def reversals_as_identities(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each main-graph ReverseSequence an Identity of its data."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for node in probe.graph.node:
        if node.op_type == "ReverseSequence" and node.domain in {*ONNX_DOMAINS, REVSEQ_DOMAIN}:
            node.op_type = "Identity"
            node.domain = ""
            del node.input[1:]
            del node.attribute[:]
    return probe


def input_elem(model: onnx.ModelProto, name: str) -> int:
    """The element type graph input ``name`` declares."""
    return next(i.type.tensor_type.elem_type for i in model.graph.input if i.name == name)


def declared_span(
    spec: LengthsInput, shapes: dict[str, tuple[int, ...]]
) -> tuple[int, int | None]:
    """T and B from the data input's shape, or its declared static dims; else 1, None."""
    if spec.data is not None and spec.data in shapes:
        dims = shapes[spec.data]
        return dims[spec.time_axis % len(dims)], dims[spec.batch_axis % len(dims)]
    if spec.data_dims is not None:
        rank = len(spec.data_dims)
        time_len = spec.data_dims[spec.time_axis % rank]
        batch = spec.data_dims[spec.batch_axis % rank]
        return (
            time_len if isinstance(time_len, int) else 1,
            batch if isinstance(batch, int) else None,
        )
    return 1, None
