"""A node builder for the decomposition forms: ``op.Range(a, b, c)`` records one node.

Nodes whose inputs are all constants are evaluated on the spot (for the few integer ops
the forms use for index arithmetic) and recorded as one Constant instead, so a node with
static shapes carries its index as a constant rather than as arithmetic run every time.
"""

from __future__ import annotations

__all__ = ["NodeBuilder", "Template", "gc_paused"]

import contextlib
import copy
import gc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx_ir as ir

from revseq.ops.signature import MAX_FOLDED_ELEMENTS
from revseq.passes.graph.evaluate import evaluate_op
from revseq.passes.graph.index_sharing import IndexSharing
from revseq.passes.graph.names import emitted_name

# The ops whose constant results the builder folds (with the evaluator restore proves
# matches with): the index arithmetic, not the gathers.
FOLDED_OPS = frozenset(
    {
        "Unsqueeze",
        "Expand",
        "Add",
        "Sub",
        "Mul",
        "Min",
        "Max",
        "Less",
        "Where",
        "Concat",
        "Range",
    }
)


def _folded_size(op_type: str, args: list[np.ndarray]) -> int:
    """The number of elements folding ``op_type`` would produce, without folding it."""
    if op_type == "Unsqueeze":
        return args[0].size
    if op_type == "Concat":
        return sum(a.size for a in args)
    if op_type == "Range":
        start, limit, delta = (a.item() for a in args)
        return max(0, -(-(limit - start) // delta)) if delta else 0
    shapes = [a.shape for a in args]
    if op_type == "Expand":
        shapes = [args[0].shape, tuple(args[1].tolist())]
    return int(np.prod(np.broadcast_shapes(*shapes), dtype=np.int64))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a pass creates many IR objects.

    Building tens of thousands of nodes otherwise triggers full collections that scan
    the whole model again and again, which makes a pass grow faster than linearly.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _attribute(name: str, value: Any) -> ir.Attr:
    """The attribute kinds the forms use; cheaper than the generic converter."""
    if isinstance(value, ir.Tensor):
        return ir.Attr(name, ir.AttributeType.TENSOR, value)
    if isinstance(value, int):
        return ir.Attr(name, ir.AttributeType.INT, int(value))
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return ir.Attr(name, ir.AttributeType.INTS, [int(v) for v in value])
    raise TypeError(f"unsupported attribute {name}={value!r}")


def _constant_of(value: ir.Value | None) -> np.ndarray | None:
    if value is None or value.const_value is None:
        return None
    return value.const_value.numpy()


class NodeBuilder:
    """Records the nodes a form emits, named after the node they replace.

    Constants are held as bare values until :meth:`finish`, which emits a Constant node
    only for those that a recorded node reads: folding leaves many behind. Identical
    nodes and constants are emitted once (a form asks for ``Shape(x)`` in several places).
    """

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._count = 0
        self._nodes: list[ir.Node] = []
        self._constants: list[ir.Value] = []
        self._seen: dict[tuple[object, ...], ir.Value] = {}
        self._lacks: list[str] = []

    def lacking(self, reason: str) -> ir.Value:
        """Note why the form cannot be written for its target; the value it could not make.

        The value has no producer: a form emits on through it, so that what it does
        with the data (its view, its gathers) is still recorded for the planner to read,
        but a template that holds one is never replayed (:attr:`Template.lacks`).
        """
        self._lacks.append(reason)
        return ir.Value(name=f"lacking{len(self._lacks)}")

    @property
    def lacks(self) -> tuple[str, ...]:
        """What the form lacked, in the order it found out (:meth:`lacking`)."""
        return tuple(self._lacks)

    def __getattr__(self, op_type: str) -> Callable[..., ir.Value]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def make(*inputs: ir.Value | None, **attributes: Any) -> ir.Value:
            if op_type == "Constant":
                return self._constant(attributes["value"])
            folded = self._fold(op_type, inputs, attributes)
            if folded is not None:
                return self._constant(ir.Tensor(folded))
            return self._record(op_type, inputs, attributes)

        return make

    def _name(self, op_type: str) -> str:
        self._count += 1
        return emitted_name(self._prefix, op_type, self._count - 1)

    def _fold(
        self, op_type: str, inputs: tuple[ir.Value | None, ...], attributes: dict[str, Any]
    ) -> np.ndarray | None:
        if op_type not in FOLDED_OPS:
            return None
        args = [_constant_of(v) for v in inputs]
        if any(a is None for a in args):
            return None
        present = [a for a in args if a is not None]
        if _folded_size(op_type, present) > MAX_FOLDED_ELEMENTS:
            return None  # checked first: a static broadcast may be gigabytes
        return evaluate_op(op_type, present, attributes)

    def _constant(self, tensor: ir.Tensor) -> ir.Value:
        array = tensor.numpy()
        key = ("Constant", array.dtype.str, array.shape, array.tobytes())
        if key in self._seen:
            return self._seen[key]
        value = ir.Value(
            name=self._name("Constant"),
            type=ir.TensorType(tensor.dtype),
            shape=ir.Shape(tensor.shape),
            const_value=tensor,
        )
        self._constants.append(value)
        self._seen[key] = value
        return value

    def _record(
        self, op_type: str, inputs: tuple[ir.Value | None, ...], attributes: dict[str, Any]
    ) -> ir.Value:
        key = (
            op_type,
            *(id(v) for v in inputs),
            *(
                (k, tuple(v) if isinstance(v, list) else v)
                for k, v in sorted(attributes.items())
            ),
        )
        if key in self._seen:
            return self._seen[key]
        name = self._name(op_type)
        node = ir.Node(
            "",
            op_type,
            inputs,
            attributes=[_attribute(k, v) for k, v in attributes.items()],
            outputs=[ir.Value(name=name)],
            name=name,
        )
        self._nodes.append(node)
        self._seen[key] = node.outputs[0]
        return node.outputs[0]

    def finish(self, output: ir.Value) -> list[ir.Node]:
        """The nodes to insert: Constant nodes for the constants in use, then the rest.

        ``output`` is the value that replaces the node's output; if it is itself a
        constant, it gets a Constant node too.
        """
        # A form may emit a helper value it ends up not needing: drop dead nodes.
        live: list[ir.Node] = []
        needed = {id(output)}
        for node in reversed(self._nodes):
            if any(id(out) in needed for out in node.outputs):
                live.append(node)
                needed.update(id(v) for v in node.inputs if v is not None)
            else:  # detach it, so that the values it read forget this use
                for i in range(len(node.inputs)):
                    node.replace_input_with(i, None)
        live.reverse()
        constants = [
            ir.Node(
                "",
                "Constant",
                [],
                attributes=[_attribute("value", value.const_value)],
                outputs=[value],
                name=value.name,
            )
            for value in self._constants
            if value.uses() or value is output
        ]
        return constants + live


class Template:
    """Nodes a form emitted once, replayable for every node with the same signature.

    Emitting a form runs its Python logic, folding and de-duplication; replaying the
    recorded nodes only creates IR objects. A model with thousands of identical
    ReverseSequence nodes is rewritten at the cost of the node creation alone.
    """

    def __init__(
        self,
        nodes: list[ir.Node],
        data: ir.Value,
        lens: ir.Value,
        output: ir.Value,
        lacks: tuple[str, ...] = (),
    ):
        self._nodes = nodes
        self._data = data
        self._lens = lens
        self._output = output
        self.lacks = lacks
        """Why the form cannot be written for its target (``NodeBuilder.lacking``);
        a template with any is read by the planner, never replayed."""

    @property
    def nodes(self) -> tuple[ir.Node, ...]:
        """The recorded nodes, in order (the last one makes the output)."""
        return tuple(self._nodes)

    @property
    def written(self) -> int:
        """How many nodes replaying it writes, Constants aside: what a backend pays for."""
        return sum(node.op_type != "Constant" for node in self._nodes)

    @property
    def data(self) -> ir.Value:
        """The placeholder the recorded nodes read the data from."""
        return self._data

    @property
    def lengths(self) -> ir.Value:
        """The placeholder the recorded nodes read the lengths from."""
        return self._lens

    @classmethod
    def record(cls, emit: Callable[[NodeBuilder, ir.Value, ir.Value], ir.Value]) -> Template:
        """Run ``emit`` once on placeholder inputs and keep what it produced."""
        data, lens = ir.Value(name="input"), ir.Value(name="sequence_lens")
        op = NodeBuilder("template")
        output = emit(op, data, lens)
        return cls(op.finish(output), data, lens, output, op.lacks)

    def instantiate(
        self,
        prefix: str,
        data: ir.Value,
        lens: ir.Value,
        sharing: IndexSharing | None = None,
        *,
        weights: ir.Graph | None = None,
    ) -> tuple[list[ir.Node], ir.Value]:
        """Fresh copies of the nodes reading ``data`` and ``lens``, named ``prefix/...``.

        With ``sharing``, a node an earlier instance in the same graph already computed
        (``IndexSharing.key``) is not copied: its value is read instead. The output node
        is always copied. With ``weights``, the graph the nodes go into, each constant
        the nodes read becomes an initializer of it rather than a Constant node: a
        converter that makes each node a module call pays for a Constant on every run;
        other backends fold constants either way.
        """
        mapping: dict[int, ir.Value] = {id(self._data): data, id(self._lens): lens}
        nodes = []
        last = len(self._nodes) - 1
        for i, node in enumerate(self._nodes):
            inputs = [None if v is None else mapping[id(v)] for v in node.inputs]
            key = None
            if sharing is not None and i != last:
                key = sharing.key(node, inputs)
                earlier = sharing.reuse(key)
                if earlier is not None:
                    mapping[id(node.outputs[0])] = earlier
                    continue
            name = emitted_name(prefix, node.op_type, i)
            if weights is not None and node.op_type == "Constant" and i != last:
                source = node.outputs[0]
                weight = _constant_copy(source, ir.Value(name=name))
                weights.register_initializer(weight)
                mapping[id(source)] = weight
                if key is not None:
                    sharing.remember(key, weight)  # type: ignore[union-attr]
                continue
            copy = ir.Node(
                "",
                node.op_type,
                inputs,
                attributes=[
                    ir.Attr(a.name, a.type, _own(a.value)) for a in node.attributes.values()
                ],
                outputs=[ir.Value(name=name)],
                name=name,
            )
            source = node.outputs[0]
            if source.const_value is not None:
                _constant_copy(source, copy.outputs[0])
            mapping[id(source)] = copy.outputs[0]
            if key is not None:
                sharing.remember(key, copy.outputs[0])  # type: ignore[union-attr]
            nodes.append(copy)
        return nodes, mapping[id(self._output)]


def _constant_copy(source: ir.Value, target: ir.Value) -> ir.Value:
    """``target`` holding ``source``'s constant: its value, type and shape."""
    target.const_value = _own(source.const_value)
    target.type, target.shape = source.type, source.shape
    return target


def _own(value: Any) -> Any:
    """A tensor an instance holds alone (its bytes shared), any other value as it is.

    onnx_ir names a tensor after the value that holds it when that value is renamed or
    written as an initializer: a tensor shared with the template would carry that name
    into every later instance, and what revseq writes would hang on what it wrote
    before in the same process.
    """
    return copy.copy(value) if isinstance(value, ir.TensorProtocol) else value
