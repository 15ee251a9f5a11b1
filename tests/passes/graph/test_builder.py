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


def test_what_one_model_writes_does_not_hang_on_what_was_written_before():
    """onnx_ir names a tensor after the value holding it when that value is written as
    an initializer: an instance sharing its template's tensor left that name in every
    later instance's Constants, so a model inlined after another came out other bytes."""
    import onnx

    import revseq
    from revseq.passes.inline.templates import recorded, traced

    models = [onnx.load(f"models/{name}.onnx") for name in ("batch_major", "control_flow")]
    recorded.cache_clear()
    traced.cache_clear()
    alone = revseq.inline(models[1], strategy="gather_nd", target="rknn")
    for model in models:
        after = revseq.inline(model, strategy="gather_nd", target="rknn")
    assert after.SerializeToString(deterministic=True) == alone.SerializeToString(
        deterministic=True
    )


def test_an_instance_holds_its_own_constants():
    template = Template.record(
        lambda b, data, lens: b.Add(lens, b.Constant(value=_constant([1])))
    )
    (first, _), (second, _) = (
        template.instantiate(p, ir.Value(name="x"), ir.Value(name="l")) for p in ("a", "b")
    )
    tensors = [
        n.attributes["value"].value for n in (*first, *second) if n.op_type == "Constant"
    ]
    assert len(tensors) == 2 and tensors[0] is not tensors[1]
    tensors[0].name = "renamed"
    assert tensors[1].name != "renamed"
