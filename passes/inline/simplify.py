"""Simplify pass: ReverseSequence nodes whose lengths make them trivial.

- Lengths that are a constant <= 1 everywhere reverse nothing, and neither does a node
  whose data has a static zero-sized dimension or a time axis of one step (whatever
  its lengths, clamped to [0, 1]): the node becomes Identity. (Empty data so also
  sidesteps onnxruntime's Expand elimination, which mis-shapes empty indices.)
- Lengths that equal the full time length everywhere reverse everything: the node becomes
  ``Slice`` with step -1 along the time axis. The lengths may be a constant, or built
  from the data's own shape the way tf2onnx exports ``tf.reverse``
  (``Expand(Gather(Shape(x), time_axis), ...)``, possibly with Cast/Unsqueeze/Reshape).
"""

from __future__ import annotations

__all__ = [
    "SimplifyReverseSequencePass",
    "batch_leading",
    "replace_trivial",
    "trivial_form",
]

import logging

import numpy as np
import onnx_ir as ir

from revseq.ops import forms
from revseq.ops.signature import Signature
from revseq.ops.targets.profile import Profile
from revseq.passes.graph.names import NameSource, Survey, emitted_name
from revseq.passes.graph.producers import scalar_dim
from revseq.passes.graph.reverse_sequence import remove_if_dead, signature_of
from revseq.passes.graph.scopes import ScopedNode, constants_graph, opset_version
from revseq.passes.graph.shapes import ShapeTable

logger = logging.getLogger(__name__)


class SimplifyReverseSequencePass(ir.passes.InPlacePass):
    """Replace trivial ReverseSequence nodes by Identity or a step -1 Slice."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Simplify every trivial node in every scope."""
        survey = Survey(model)
        targets = survey.targets
        if not targets:
            return ir.passes.PassResult(model, modified=False)
        shapes = ShapeTable.infer(model)
        names = survey.names
        count = sum(_simplify(scoped, shapes, model, names) for scoped in targets)
        if count:
            logger.info("simplified %d ReverseSequence node(s)", count)
        return ir.passes.PassResult(model, modified=bool(count))


def trivial_form(scoped: ScopedNode, sig: Signature, shapes: ShapeTable) -> str | None:
    """What the node ``sig`` describes becomes ("Identity" or "Slice"), or None."""
    if (opset_version(scoped.owner, "") or 0) < 10:
        return None  # no Identity or Slice to emit without the default domain
    data, lens = scoped.node.inputs
    assert data is not None and lens is not None
    time_len = sig.dim(sig.time_axis)
    # Empty data, lengths of at most 1, or a single step: nothing moves.
    if (
        (sig.dims is not None and 0 in sig.dims)
        or (sig.lens is not None and all(v <= 1 for v in sig.lens))
        or time_len == 1
    ):
        return "Identity"
    if sig.lens is not None and time_len is not None and all(v >= time_len for v in sig.lens):
        return "Slice"
    full = scalar_dim(lens, shapes)
    if full is not None and full == shapes.dim_key(data, sig.time_axis):
        return "Slice"
    return None


def _simplify(
    scoped: ScopedNode, shapes: ShapeTable, model: ir.Model, names: NameSource
) -> bool:
    """Replace one trivial ReverseSequence node; True if it was replaced."""
    sig = _signature(scoped, shapes)
    kind = trivial_form(scoped, sig, shapes)
    if kind is None:
        return False
    replace_trivial(
        scoped,
        kind,
        sig.time_axis,
        names.prefix_for(scoped.node),
        weights=constants_graph(model, scoped),
    )
    return True


def _signature(scoped: ScopedNode, shapes: ShapeTable) -> Signature:
    return signature_of(scoped, opset=opset_version(scoped.owner, "") or 0, shapes=shapes)


def replace_trivial(
    scoped: ScopedNode,
    kind: str,
    time_axis: int,
    prefix: str,
    *,
    weights: ir.Graph | None = None,
    leading: tuple[int, ...] | None = None,
) -> None:
    """Replace the node by what ``trivial_form`` said: Identity, or a step -1 Slice.

    The Slice's starts, ends, axes and steps are initializers of ``weights``, else
    Constant nodes, named ``prefix/Constant_<i>`` as a decomposition's are (restore
    reads a full reversal back by them): a converter that makes each node a module
    call pays for a Constant on every run. ``leading``, a permutation: the Slice
    reverses a view of the data transposed by it, transposed back after
    (``Profile.batch_leads``).
    """
    node = scoped.node
    graph = node.graph
    data, lens = node.inputs
    assert graph is not None and data is not None and lens is not None
    views: list[ir.Node] = []
    if leading is not None:
        views = _transposes(data, leading, prefix)
        data, time_axis = views[0].outputs[0], leading.index(time_axis)
    if kind == "Identity":
        replacement = ir.Node("", "Identity", [data], name=node.name)
    else:
        bounds = _slice_bounds(scoped, time_axis, prefix, weights)
        replacement = ir.Node("", "Slice", [data, *bounds], name=node.name)
    written = [replacement]
    if views:
        views[1].replace_input_with(0, replacement.outputs[0])
        written = [views[0], replacement, views[1]]
    ir.convenience.replace_nodes_and_values(
        graph, node, [node], written, list(node.outputs), list(written[-1].outputs)
    )
    remove_if_dead(lens)


def _slice_bounds(
    scoped: ScopedNode, time_axis: int, prefix: str, weights: ir.Graph | None
) -> list[ir.Value]:
    """The step -1 Slice's starts, ends, axes and steps: initializers, or Constants."""
    values = [ir.tensor(np.array(v, np.int64)) for v in forms.whole_reversal_bounds(time_axis)]
    if weights is not None:
        bounds = [
            ir.Value(
                name=emitted_name(prefix, "Constant", i),
                type=ir.TensorType(value.dtype),
                shape=value.shape,
                const_value=value,
            )
            for i, value in enumerate(values)
        ]
        for bound in bounds:
            weights.register_initializer(bound)
        return bounds
    constants = [
        ir.Node(
            "",
            "Constant",
            [],
            attributes=[ir.AttrTensor("value", v)],
            outputs=[ir.Value(name=emitted_name(prefix, "Constant", i))],
            name=emitted_name(prefix, "Constant", i),
        )
        for i, v in enumerate(values)
    ]
    assert scoped.node.graph is not None
    scoped.node.graph.insert_before(scoped.node, constants)
    return [c.outputs[0] for c in constants]


def _transposes(data: ir.Value, perm: tuple[int, ...], prefix: str) -> list[ir.Node]:
    """A Transpose of ``data`` by ``perm``, and one (not yet fed) back."""
    back = [perm.index(axis) for axis in range(len(perm))]
    there = ir.Node(
        "",
        "Transpose",
        [data],
        attributes=[ir.AttrInt64s("perm", list(perm))],
        name=emitted_name(prefix, "Transpose", 0),
    )
    return [
        there,
        ir.Node(
            "",
            "Transpose",
            [there.outputs[0]],
            attributes=[ir.AttrInt64s("perm", back)],
            name=emitted_name(prefix, "Transpose", 1),
        ),
    ]


def batch_leading(
    sig: Signature, profile: Profile, node: ir.Node | None = None
) -> tuple[int, ...] | None:
    """The Transpose a full reversal is written over on the target, or None.

    Where the target's converter takes a leading axis of size 1 for the batch, the
    node's batch axis is of size 1 but does not lead, and only the op types its profile
    lists (``Profile.batch_leads``: what it reads with the batch dropped) read the
    node's output: the axes with the batch first, the others in their order (its
    profile's room says what was measured).
    """
    if not profile.batch_leads or sig.rank is None or sig.batch_axis == 0:
        return None
    readers = profile.batch_leads
    if sig.dim(sig.batch_axis) != 1 or (node is not None and not _read_by(node, readers)):
        return None
    return forms.batch_first(sig)


def _read_by(node: ir.Node, op_types: frozenset[str]) -> bool:
    """Whether nodes of ``op_types`` alone read the node's output."""
    output = node.outputs[0]
    uses = list(output.uses())
    return (
        not output.is_graph_output()
        and bool(uses)
        and all(use.node.op_type in op_types for use in uses)
    )
