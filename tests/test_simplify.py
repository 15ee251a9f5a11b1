"""The simplify pass: Identity for lengths <= 1, step -1 Slice for full lengths."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import onnxruntime as ort
import pytest

import revseq
from revseq.passes import SimplifyReverseSequencePass

INT64 = onnx.TensorProto.INT64


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def _const_lens_model(lens: list[int], shape=(4, 3, 2)) -> onnx.ModelProto:
    graph = oh.make_graph(
        [oh.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rs")],
        "g",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)],
        initializer=[oh.make_tensor("lens", INT64, [len(lens)], lens)],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _tf_reverse_model() -> onnx.ModelProto:
    """What tf2onnx emits for tf.reverse on axis 1: lengths from Shape/Gather/Expand."""
    nodes = [
        oh.make_node("Shape", ["x"], ["shape"]),
        oh.make_node("Constant", [], ["one"], value=oh.make_tensor("v", INT64, [], [1])),
        oh.make_node("Gather", ["shape", "one"], ["time"]),
        oh.make_node("Constant", [], ["zero"], value=oh.make_tensor("v", INT64, [1], [0])),
        oh.make_node("Gather", ["shape", "zero"], ["batch"]),
        oh.make_node("Expand", ["time", "batch"], ["lens"]),
        oh.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=0, time_axis=1),
    ]
    graph = oh.make_graph(
        nodes,
        "g",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", "t", 3])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["b", "t", 3])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])


@pytest.mark.parametrize(("lens", "op_type"), [([1, 0, 1], "Identity"), ([4, 4, 4], "Slice")])
def test_constant_lengths(lens, op_type):
    model = _const_lens_model(lens)
    ir_model = ir.from_proto(model)
    result = SimplifyReverseSequencePass()(ir_model)
    assert result.modified
    out = ir.to_proto(ir_model)
    onnx.checker.check_model(out, full_check=True)
    assert op_type in [n.op_type for n in out.graph.node]
    assert "ReverseSequence" not in [n.op_type for n in out.graph.node]
    x = np.random.default_rng(0).standard_normal((4, 3, 2)).astype(np.float32)
    assert _run(out, {"x": x})[0].tobytes() == _run(model, {"x": x})[0].tobytes()


def test_partial_lengths_are_left_alone():
    ir_model = ir.from_proto(_const_lens_model([4, 2, 1]))
    assert not SimplifyReverseSequencePass()(ir_model).modified


def test_tf_reverse_becomes_slice_and_the_length_chain_goes():
    model = _tf_reverse_model()
    out = revseq.inline(model)
    onnx.checker.check_model(out, full_check=True)
    assert [n.op_type for n in out.graph.node] == ["Constant"] * 4 + ["Slice"]
    x = np.random.default_rng(1).standard_normal((2, 5, 3)).astype(np.float32)
    (y,) = _run(out, {"x": x})
    assert y.tobytes() == np.ascontiguousarray(x[:, ::-1]).tobytes()
    assert y.tobytes() == _run(model, {"x": x})[0].tobytes()


def test_inline_without_simplify_keeps_the_general_form():
    ir_model = ir.from_proto(_const_lens_model([4, 4, 4]))
    revseq.passes.InlineReverseSequencePass(simplify=False)(ir_model)
    assert "Slice" not in [n.op_type for n in ir_model.graph]
