"""What a model does with its inputs, read from the graph: which values each may hold.

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
"""

from __future__ import annotations

__all__ = ["IndexUse", "index_uses", "reversed_inputs"]

import dataclasses
import logging
from collections.abc import Iterator

import onnx_ir as ir

from revseq.passes import is_reverse_sequence

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
