"""The graph tooling's builder: what forms emit through, and templates replayed per node."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from revseq.passes.graph.builder import NodeBuilder, Template


def _constant(values) -> ir.Tensor:
    return ir.Tensor(np.asarray(values, np.int64))


def test_constant_arithmetic_is_folded_and_no_node_is_left():
    op = NodeBuilder("t")
    total = op.Add(op.Constant(value=_constant([2])), op.Constant(value=_constant([3])))
    nodes = op.finish(total)
    assert total.const_value is not None
    assert total.const_value.numpy().tolist() == [5]
    assert [n.op_type for n in nodes] == ["Constant"]  # the output itself


def test_identical_nodes_and_constants_are_emitted_once():
    op = NodeBuilder("t")
    x = ir.Value(name="x")
    first, second = op.Shape(x), op.Shape(x)
    assert first is second
    one, again = op.Constant(value=_constant([1])), op.Constant(value=_constant([1]))
    assert one is again
    out = op.Add(first, one)
    assert [n.op_type for n in op.finish(out)] == ["Constant", "Shape", "Add"]


def test_finish_drops_what_the_output_does_not_need():
    op = NodeBuilder("t")
    x = ir.Value(name="x")
    unused = op.Neg(x)
    out = op.Relu(x)
    nodes = op.finish(out)
    assert [n.op_type for n in nodes] == ["Relu"]
    assert not unused.uses() and all(n.op_type != "Neg" for n, _ in x.uses())


def test_nodes_are_named_after_the_node_they_replace():
    op = NodeBuilder("rs")
    out = op.Relu(ir.Value(name="x"))
    (node,) = op.finish(out)
    assert node.name.startswith("rs")


def test_a_template_replays_fresh_nodes_for_each_node():
    template = Template.record(lambda op, data, lens: op.Add(op.Shape(data), lens))
    assert [n.op_type for n in template.nodes] == ["Shape", "Add"]
    a, lens_a = ir.Value(name="a"), ir.Value(name="la")
    b, lens_b = ir.Value(name="b"), ir.Value(name="lb")
    nodes_a, out_a = template.instantiate("first", a, lens_a)
    nodes_b, out_b = template.instantiate("second", b, lens_b)
    assert [n.op_type for n in nodes_a] == [n.op_type for n in nodes_b] == ["Shape", "Add"]
    assert nodes_a[0].inputs[0] is a and nodes_b[0].inputs[0] is b
    assert nodes_a[1].inputs[1] is lens_a and nodes_b[1].inputs[1] is lens_b
    assert out_a is not out_b
    assert all(n.name.startswith("first") for n in nodes_a)
    assert not set(map(id, nodes_a)) & set(map(id, template.nodes))
