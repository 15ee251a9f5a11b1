"""The simplify pass: Identity for lengths <= 1 or one step, step -1 Slice for full lengths."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers import full_lengths_model
from real_models import tf_reverse

import revseq
from revseq.ops.reference import reverse_sequence_model
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


@pytest.mark.parametrize(
    ("target", "ops"),
    [
        ("onnxruntime", ["Slice"]),
        # tract's Slice cannot step back over symbolic dims: T-1 minus a Range, gathered
        # (T sliced out of the shape: opset 13).
        (None, ["Shape", "Slice", "Cast", "Squeeze", "Range", "Sub", "Sub", "Gather"]),
        ("tract", ["Shape", "Slice", "Cast", "Squeeze", "Range", "Sub", "Sub", "Gather"]),
        (["Slice"], ["Slice"]),  # an op type named: ONNX's own Slice steps back
    ],
)
def test_tf_reverse_becomes_a_reversal_and_the_length_chain_goes(target, ops):
    model = tf_reverse()
    out = revseq.inline(model, target=target)
    onnx.checker.check_model(out, full_check=True)
    assert [n.op_type for n in out.graph.node] == ops
    x = np.random.default_rng(1).standard_normal((2, 5, 3)).astype(np.float32)
    (y,) = _run(out, {"x": x})
    assert y.tobytes() == np.ascontiguousarray(x[:, ::-1]).tobytes()
    assert y.tobytes() == _run(model, {"x": x})[0].tobytes()


def test_a_full_reversal_that_no_op_of_the_target_spells_is_decomposed():
    """An op-type target without Slice nor Shape gets a decomposition of its own ops."""
    model = _const_lens_model([4, 4, 4])
    ops = ["Gather", "Less", "Where", "Range", "Squeeze", "Unsqueeze", "Add", "Sub", "Mul"]
    out = revseq.inline(model, target=ops)
    assert "Slice" not in [n.op_type for n in out.graph.node]
    x = np.random.default_rng(4).standard_normal((4, 3, 2)).astype(np.float32)
    assert _run(out, {"x": x})[0].tobytes() == np.ascontiguousarray(x[::-1]).tobytes()


def test_inline_without_simplify_keeps_the_general_form():
    ir_model = ir.from_proto(_const_lens_model([4, 4, 4]))
    revseq.passes.InlineReverseSequencePass(simplify=False)(ir_model)
    assert "Slice" not in [n.op_type for n in ir_model.graph]


@pytest.mark.parametrize("ir_version", [3, 8])
def test_a_slices_bounds_are_initializers_of_the_main_graph(ir_version):
    """onnx2torch calls a module for every Constant node: the Slice's starts, ends, axes
    and steps are initializers, named as a decomposition's constants are, one set per
    node; before IR version 4, where an initializer is also an input, Constant nodes."""
    model = _const_lens_model([4, 4, 4])
    node = oh.make_node("ReverseSequence", ["y", "lens"], ["z"])  # no name
    model.graph.node.append(node)
    model.graph.output[0].name = "z"
    model.ir_version = ir_version
    for inlined in (revseq.inline(model), _simplified(model)):
        onnx.checker.check_model(inlined, full_check=True)
        slices = [n for n in inlined.graph.node if n.op_type == "Slice"]
        assert len(slices) == 2
        bounds = [name for n in slices for name in n.input[1:]]
        initializers = {t.name for t in inlined.graph.initializer} - {"lens"}
        if ir_version >= 4:
            assert [n.op_type for n in inlined.graph.node] == ["Slice", "Slice"]
            assert set(bounds) == initializers and len(initializers) == 8
            assert {name.rsplit("/", 1)[0] for name in bounds} == {"rs", "ReverseSequence"}
        else:
            assert not initializers
            assert [n.op_type for n in inlined.graph.node].count("Constant") == 8
        x = np.random.default_rng(2).standard_normal((4, 3, 2)).astype(np.float32)
        assert _run(inlined, {"x": x})[0].tobytes() == x.tobytes()


def test_a_slice_in_a_body_keeps_constant_nodes():
    body = oh.make_graph(
        [oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="inner")],
        "then",
        [],
        [oh.make_tensor_value_info("r", onnx.TensorProto.FLOAT, (4, 3, 2))],
    )
    other = oh.make_graph(
        [oh.make_node("Identity", ["x"], ["o"])],
        "else",
        [],
        [oh.make_tensor_value_info("o", onnx.TensorProto.FLOAT, (4, 3, 2))],
    )
    model = _const_lens_model([4, 4, 4])
    del model.graph.node[:]
    model.graph.input.append(oh.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []))
    model.graph.node.append(
        oh.make_node("If", ["flag"], ["y"], then_branch=body, else_branch=other)
    )
    for inlined in (revseq.inline(model), _simplified(model)):
        then = next(a.g for a in inlined.graph.node[0].attribute if a.name == "then_branch")
        assert [n.op_type for n in then.node] == ["Constant"] * 4 + ["Slice"]
        assert not inlined.graph.initializer  # the lengths, read by nothing now
        x = np.random.default_rng(3).standard_normal((4, 3, 2)).astype(np.float32)
        got = _run(inlined, {"x": x, "flag": np.array(True)})[0]
        assert got.tobytes() == np.ascontiguousarray(x[::-1]).tobytes()


def _simplified(model: onnx.ModelProto) -> onnx.ModelProto:
    ir_model = ir.from_proto(model)
    assert SimplifyReverseSequencePass()(ir_model).modified
    return ir.to_proto(ir_model)


@pytest.mark.parametrize(
    ("target", "rank", "dynamic", "slice_"),
    [
        (None, 3, False, True),
        (None, 4, False, False),  # MNN reverses rank 4 wrongly with a step -1 Slice
        (None, 3, True, False),  # tract has no such Slice over symbolic dims
        ("mnn", 3, True, True),
        ("mnn", 5, False, False),
        ("tract", 5, False, True),
        ("onnxruntime", 5, True, True),
    ],
)
def test_a_full_reversal_is_a_slice_where_the_target_steps_back_over_the_rank(
    target, rank, dynamic, slice_
):
    """Full lengths give a step -1 Slice where the target's profile has one for the
    node's dims and rank (``Slice:reverse``, ``Slice:reverse:high_rank``), else one
    Gather along time at T-1 .. 0; either reverses exactly, here in onnxruntime."""
    shape = (4, 3, 2, 3, 2)[:rank]
    dims = ["T", "B", *shape[2:]] if dynamic else list(shape)
    if dynamic:  # constant lengths reach T only where T is known: read T from the data
        model = full_lengths_model(dims, 1, 0, 17)
    else:
        model = reverse_sequence_model(dims, onnx.TensorProto.FLOAT, lens=np.array([4] * 3))
    out = revseq.inline(model, target=target)
    ops = [n.op_type for n in out.graph.node]
    assert "ReverseSequence" not in ops and "Expand" not in ops
    gathers = [n for n in out.graph.node if n.op_type == "Gather" and n.input[0] == "x"]
    if slice_:
        assert ops == ["Slice"] and not gathers
    else:
        assert len(gathers) == 1 and "Slice" not in ops[-1:]
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    assert _run(out, {"x": x})[0].tobytes() == np.ascontiguousarray(x[::-1]).tobytes()


@pytest.mark.parametrize("lens", [[2, 2, 2], [3, 3, 3], [3, 4, 4], [0, 1, 2]])
def test_lengths_that_reverse_some_steps_are_no_trivial_node(lens):
    """Lengths of 2 reverse two steps (no Identity), lengths of T-1 leave the last step in
    place (no flip): such nodes are decomposed, and compute the reversal bit for bit."""
    model = _const_lens_model(lens)  # T = 4
    result = SimplifyReverseSequencePass()(ir.from_proto(model))
    assert not result.modified
    inlined = revseq.inline(model)
    assert not {"Identity", "Slice"} & {n.op_type for n in inlined.graph.node}
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    expected = _run(model, {"x": x})[0]
    assert _run(inlined, {"x": x})[0].tobytes() == expected.tobytes()


@pytest.mark.parametrize("target", [None, "onnxruntime", "litert", "ncnn-finite", "tract"])
@pytest.mark.parametrize(
    ("dims", "batch_axis", "time_axis"), [([1, 3, 2], 1, 0), ([3, 1], 0, 1)]
)
def test_a_single_step_is_an_identity_whatever_its_lengths(
    target, dims, batch_axis, time_axis
):
    """One step reverses into itself for every length (clamped to 0 or 1): no index, no
    gather; a converter may turn the clamp of the lengths to [0, 1] into an op with no
    integer kernel (LiteRT's RELU_0_TO_1)."""
    model = reverse_sequence_model(
        dims, onnx.TensorProto.FLOAT, batch_axis=batch_axis, time_axis=time_axis
    )
    inlined = revseq.inline(model, target=target)
    assert [n.op_type for n in inlined.graph.node] == ["Identity"]
    x = np.random.default_rng(2).standard_normal(dims).astype(np.float32)
    batch = dims[batch_axis]
    for lens in ([0, 1, 1][:batch], [-4, 7, 1 << 40][:batch]):
        (got,) = _run(inlined, {"x": x, "lens": np.array(lens, np.int64)})
        assert got.tobytes() == x.tobytes()
