"""Shapes: inference before planning, symbolic dims, tf.reverse as tf2onnx exports it."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest
from onnx import TensorProto as TP

import revseq
import revseq.passes
from revseq.ops.reference import reverse_sequence
from revseq.passes.graph.producers import scalar_dim
from revseq.passes.graph.shapes import ShapeTable
from tests.helpers import assert_identical, constants_of, run_ort

# Ops that compute shapes or indices at run time: a static form needs none of them.
_RUN_TIME_SHAPE_OPS = {"Shape", "Range", "CumSum", "ConstantOfShape", "Size"}


def _relu_then_reverse(shape: list[int | str], opset: int = 17) -> onnx.ModelProto:
    """x -> Relu -> ReverseSequence: only the graph input declares a shape."""
    batch = shape[1]
    nodes = [
        oh.make_node("Relu", ["x"], ["r"]),
        oh.make_node("ReverseSequence", ["r", "lens"], ["y"], batch_axis=1, time_axis=0),
    ]
    graph = oh.make_graph(
        nodes,
        "relu_reverse",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, shape),
            oh.make_tensor_value_info("lens", TP.INT64, [batch]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, shape)],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _non_constant_ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node if n.op_type != "Constant"]


@pytest.mark.parametrize("target", [None, "webnn", "tvm", "onnxruntime"])
@pytest.mark.parametrize("shape", [[6, 3, 2], [40, 4], [3, 20, 5]])
def test_static_inputs_without_value_info_get_static_forms(target, shape):
    model = _relu_then_reverse(shape)
    assert not model.graph.value_info
    inlined = revseq.inline(model, target=target)
    ops = _non_constant_ops(inlined)
    assert not _RUN_TIME_SHAPE_OPS & set(ops), ops
    # The inferred shapes stay out of the user's model.
    assert "r" not in {v.name for v in inlined.graph.value_info}
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    lens = np.array([shape[0], 0, 1, 2][: shape[1]] + [1] * (shape[1] - 4), np.int64)
    (got,) = run_ort(inlined, {"x": x, "lens": lens}, optimize=False)
    assert_identical(got, reverse_sequence(np.maximum(x, 0), lens))


def test_webnn_refused_the_dynamic_form_before_inference():
    """The issue's case: webnn has no Range; with inferred static dims it needs none."""
    inlined = revseq.inline(_relu_then_reverse([5, 4, 3]), target="webnn")
    assert "Range" not in _non_constant_ops(inlined)


def tf_reverse_model(time_axis: int, transposed: bool, opset: int) -> onnx.ModelProto:
    """``tf.reverse`` the way tf2onnx exports it: full lengths from the data's shape.

    With ``transposed``, the node reads ``Transpose(x)`` and the lengths come from
    ``Gather(Shape(x), k)``, the time dim seen through the transpose.
    """
    dims: list[int | str] = ["T", "B", 2] if time_axis == 0 else ["B", "T", 2]
    if transposed:
        dims = [dims[1], dims[0], 2]
    nodes = []
    source = "x"
    if transposed:
        nodes.append(oh.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]))
        source = "xt"
    time_in_x = 1 - time_axis if transposed else time_axis
    initializers = [
        oh.make_tensor("time_index", TP.INT64, [], [time_in_x]),
        oh.make_tensor("batch_index", TP.INT64, [1], [1 - time_axis]),
    ]
    nodes += [
        oh.make_node("Shape", ["x"], ["shape_x"]),
        oh.make_node("Gather", ["shape_x", "time_index"], ["time_len"]),
        oh.make_node("Shape", [source], ["shape_s"]),
        oh.make_node("Gather", ["shape_s", "batch_index"], ["batch_size"]),
        oh.make_node("Expand", ["time_len", "batch_size"], ["lens"]),
        oh.make_node(
            "ReverseSequence",
            [source, "lens"],
            ["r"],
            time_axis=time_axis,
            batch_axis=1 - time_axis,
        ),
    ]
    output = "r"
    if transposed:
        nodes.append(oh.make_node("Transpose", ["r"], ["y"], perm=[1, 0, 2]))
        output = "y"
    graph = oh.make_graph(
        nodes,
        "tf_reverse",
        [oh.make_tensor_value_info("x", TP.FLOAT, dims)],
        [oh.make_tensor_value_info(output, TP.FLOAT, dims)],
        initializer=initializers,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def _tf_reverse_feeds(time_axis: int, transposed: bool) -> dict[str, np.ndarray]:
    shape = [5, 3, 2] if (time_axis == 0) != transposed else [3, 5, 2]
    return {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}


TF_REVERSE_CASES = [
    (time_axis, transposed, opset)
    for time_axis in (0, 1)
    for transposed in (False, True)
    for opset in (10, 13, 18)
]


@pytest.mark.parametrize("target", [None, "onnxruntime"])
@pytest.mark.parametrize(("time_axis", "transposed", "opset"), TF_REVERSE_CASES)
def test_tf_reverse_simplifies_to_a_reversal(time_axis, transposed, opset, target):
    """Lengths read as the data's own time length reverse everything: a step -1 Slice
    where the target's Slice steps back with symbolic dims (onnxruntime), else one
    Gather along time at T-1 .. 0 (the default: tract's Slice cannot, with symbolic
    dims). Either way the lengths' chain goes (TVM cannot convert its Expand)."""
    model = tf_reverse_model(time_axis, transposed, opset)
    simplified = revseq.inline(model, target=target)
    ops = _non_constant_ops(simplified)
    assert "Expand" not in ops and "ReverseSequence" not in ops
    around = ["Transpose"] if transposed else []
    slices = [n for n in simplified.graph.node if n.op_type == "Slice"]
    steps = [
        constants_of(simplified).get(n.input[4]) if len(n.input) > 4 else None for n in slices
    ]
    backwards = [
        s is not None and onnx.numpy_helper.to_array(s).tolist() == [-1] for s in steps
    ]
    if target == "onnxruntime":
        assert ops == [*around, "Slice", *around], ops
        assert backwards == [True]
    else:
        assert not any(backwards)
        (gather,) = (n for n in simplified.graph.node if n.op_type == "Gather")
        assert oh.get_attribute_value(gather.attribute[0]) == time_axis
        assert gather.input[0] == ("xt" if transposed else "x")
    feeds = _tf_reverse_feeds(time_axis, transposed)
    for optimize in (False, True):
        assert_identical(
            run_ort(simplified, feeds, optimize=optimize)[0],
            run_ort(model, feeds, optimize=optimize)[0],
        )


@pytest.mark.parametrize(("time_axis", "transposed", "opset"), TF_REVERSE_CASES)
def test_tf_reverse_inlined_without_simplify_restores_to_one_node(
    time_axis, transposed, opset
):
    model = tf_reverse_model(time_axis, transposed, opset)
    inlined = revseq.inline(model, simplify=False)
    assert "ReverseSequence" not in _non_constant_ops(inlined)
    restored = revseq.restore(inlined)
    nodes = [n for n in restored.graph.node if n.op_type == "ReverseSequence"]
    assert len(nodes) == 1
    assert nodes[0].input[1] == "lens"  # the lengths the exporter built, read again
    feeds = _tf_reverse_feeds(time_axis, transposed)
    assert_identical(
        run_ort(restored, feeds, optimize=False)[0], run_ort(model, feeds, optimize=False)[0]
    )


# --- The symbolic dim module ------------------------------------------------------------


def _ir(model: onnx.ModelProto) -> ir.Model:
    return ir.from_proto(model)


def _value(model: ir.Model, name: str) -> ir.Value:
    for node in model.graph:
        for out in node.outputs:
            if out.name == name:
                return out
    return next(v for v in model.graph.inputs if v.name == name)


def test_dims_equal_through_transpose_and_shape_reads():
    model = _ir(tf_reverse_model(0, True, 13))
    table = ShapeTable.infer(model)
    xt, lens = _value(model, "xt"), _value(model, "lens")
    assert scalar_dim(lens, table) == table.dim_key(xt, 0)
    assert scalar_dim(lens, table) != table.dim_key(xt, 1)
    # Without inference, the dims are still related through the Transpose.
    declared = ShapeTable()
    assert declared.dim_key(xt, 0) == declared.dim_key(_value(model, "x"), 1)


def test_inferred_dims_merge_with_declared_ones():
    model = _ir(_relu_then_reverse(["T", 4, 3]))
    table = ShapeTable.infer(model)
    relu = _value(model, "r")
    assert relu.shape is None
    assert table.dims(relu) == ("T", 4, 3)
    assert table.dim_key(relu, 0) == table.dim_key(_value(model, "x"), 0) == ("sym", "T")
    assert table.dtype(relu) == ir.DataType.FLOAT


def test_a_model_onnx_cannot_infer_falls_back_to_declared_shapes():
    node = oh.make_node("Mystery", ["x"], ["m"], domain="custom")
    rs = oh.make_node("ReverseSequence", ["m", "lens"], ["y"])
    graph = oh.make_graph(
        [node, rs],
        "g",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, [4, 3]),
            oh.make_tensor_value_info("lens", TP.INT64, [3]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, [4, 3])],
    )
    model = oh.make_model(
        graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("custom", 1)]
    )
    inlined = revseq.inline(model)
    assert "ReverseSequence" not in _non_constant_ops(inlined)


# --- Shared index arithmetic ------------------------------------------------------------


def _chain(count: int, shape: list[int | str]) -> onnx.ModelProto:
    """``count`` ReverseSequence nodes on one lengths input, a Relu after each."""
    nodes, previous = [], "x"
    for i in range(count):
        nodes.append(oh.make_node("ReverseSequence", [previous, "lens"], [f"r{i}"]))
        nodes.append(oh.make_node("Relu", [f"r{i}"], [f"a{i}"]))
        previous = f"a{i}"
    graph = oh.make_graph(
        nodes,
        "chain",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, shape),
            oh.make_tensor_value_info("lens", TP.INT64, [shape[1]]),
        ],
        [oh.make_tensor_value_info(previous, TP.FLOAT, shape)],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("shape", [["T", "B", 3], [7, 3, 2]])
def test_nodes_with_one_lengths_input_share_one_index(count, shape):
    model = _chain(count, shape)
    inlined = revseq.inline(model)
    ops = _non_constant_ops(inlined)
    # One clamp of the lengths and one index for all of them: as many as one node has.
    alone = _non_constant_ops(revseq.inline(_chain(1, shape)))
    for op_type in ("Range", "Less", "Where", "Min", "Max", "Add"):
        assert ops.count(op_type) == alone.count(op_type), ops
    unshared = ir.from_proto(model)
    revseq.passes.InlineReverseSequencePass(share=False)(unshared)
    assert len(inlined.graph.node) < unshared.graph.num_nodes()
    x = np.random.default_rng(2).standard_normal([7, 3, 2 if "T" not in shape else 3])
    x = x.astype(np.float32)
    lens = np.array([7, 0, 2], np.int64)
    for optimize in (False, True):
        assert_identical(
            run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)[0],
            run_ort(model, {"x": x, "lens": lens}, optimize=optimize)[0],
        )
    restored = revseq.restore(inlined)
    assert [n.op_type for n in restored.graph.node].count("ReverseSequence") == count


def _unshared(model: onnx.ModelProto) -> onnx.ModelProto:
    unshared = ir.from_proto(model)
    revseq.passes.InlineReverseSequencePass(share=False)(unshared)
    return ir.to_proto(unshared)


def test_bundled_bidirectional_model_shares_its_index():
    from revseq.models import FOLDER

    model = onnx.load(FOLDER / "bidirectional_rnn.onnx")
    inlined = revseq.inline(model)
    alone = _unshared(model)
    # Two nodes on the same lengths and time dim: one node's Ranges (time steps and the
    # lengths' count), not two.
    assert 2 * _non_constant_ops(inlined).count("Range") == _non_constant_ops(alone).count(
        "Range"
    )
    assert revseq.check(model, inlined).ok
    restored = revseq.restore(inlined)
    assert [n.op_type for n in restored.graph.node].count("ReverseSequence") == 2


def test_dims_that_are_not_provably_equal_are_not_shared():
    """Two inputs with unrelated symbolic time dims: each node reads its own."""
    nodes = [
        oh.make_node("ReverseSequence", ["x", "lens"], ["y"]),
        oh.make_node("ReverseSequence", ["z", "lens"], ["w"]),
    ]
    graph = oh.make_graph(
        nodes,
        "two",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, ["T1", "B", 2]),
            oh.make_tensor_value_info("z", TP.FLOAT, ["T2", "B", 2]),
            oh.make_tensor_value_info("lens", TP.INT64, ["B"]),
        ],
        [
            oh.make_tensor_value_info("y", TP.FLOAT, ["T1", "B", 2]),
            oh.make_tensor_value_info("w", TP.FLOAT, ["T2", "B", 2]),
        ],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    inlined = revseq.inline(model)
    unshared = _unshared(model)
    # Each node steps through its own time dim; the count of the lengths is shared.
    assert _non_constant_ops(inlined).count("Range") == (
        _non_constant_ops(unshared).count("Range") - 1
    )
    rng = np.random.default_rng(3)
    feeds = {
        "x": rng.standard_normal([5, 3, 2]).astype(np.float32),
        "z": rng.standard_normal([2, 3, 2]).astype(np.float32),
        "lens": np.array([2, 1, 0], np.int64),
    }
    for got, want in zip(
        run_ort(inlined, feeds, optimize=False),
        run_ort(model, feeds, optimize=False),
        strict=True,
    ):
        assert_identical(got, want)


def test_info_reports_static_symbolic_and_unknown_dims_per_node(tmp_path):
    from revseq.info import describe

    model = _relu_then_reverse(["T", 4, 3])
    info = describe(ir.from_proto(model))
    (node,) = info.nodes
    assert node.dims == ("T", 4, 3)  # the Relu output declares nothing: inferred
    assert node.dim_kinds() == "static 2, symbolic 1, unknown 0"
    assert "dims=[T, 4, 3] (static 2, symbolic 1, unknown 0)" in str(info)
    assert info.to_json()["reverse_sequence"]["nodes"][0]["dims"] == ("T", 4, 3)
    # Nothing inferred is written back.
    assert ir.from_proto(model).graph.node(1).inputs[0].shape is None


def test_sharing_can_be_turned_off_and_counts_match_the_benchmark():
    from bench import _passes_bench

    (bidirectional, before, unshared, shared) = _passes_bench.sharing_counts()[0]
    assert bidirectional == "bidirectional_rnn.onnx"
    assert before < shared < unshared


def test_cli_no_simplify_decomposes_tf_reverse(tmp_path):
    from revseq.cli import main

    source = tmp_path / "tf_reverse.onnx"
    onnx.save(tf_reverse_model(0, True, 13), source)
    before = _non_constant_ops(onnx.load(source))
    # Simplified: a step -1 Slice; not: the default's row form, one Gather more.
    for flags, expected in (([], "Slice"), (["--no-simplify"], "Gather")):
        out = tmp_path / f"out{len(flags)}.onnx"
        assert main(["inline", str(source), "-o", str(out), "-q", *flags]) == 0
        after = _non_constant_ops(onnx.load(out))
        assert "ReverseSequence" not in after
        assert after.count(expected) > before.count(expected)


def test_inference_never_copies_large_weights(monkeypatch):
    """Inference needs the initializers' dims, not their bytes: a 16 MB weight is passed
    to onnx as an external reference, and is intact afterwards."""
    weights = np.arange(4_000_000, dtype=np.float32)
    nodes = [
        oh.make_node("Gather", ["w", "index"], ["g"]),
        oh.make_node("Add", ["x", "g"], ["a"]),
        oh.make_node("ReverseSequence", ["a", "lens"], ["y"]),
    ]
    graph = oh.make_graph(
        nodes,
        "weights",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, ["T", "B", 1]),
            oh.make_tensor_value_info("lens", TP.INT64, ["B"]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, ["T", "B", 1])],
        initializer=[
            onnx.numpy_helper.from_array(weights, "w"),
            onnx.numpy_helper.from_array(np.array([3]), "index"),
        ],
    )
    model = ir.from_proto(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
    sizes = []
    infer = onnx.shape_inference.infer_shapes

    def measured(proto, **kwargs):
        sizes.append(proto.ByteSize())
        return infer(proto, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", measured)
    table = ShapeTable.infer(model)
    assert sizes and sizes[0] < 100_000
    assert table.dims(_value(model, "a")) == ("T", "B", 1)
    assert model.graph.initializers["w"].const_value.numpy().tobytes() == weights.tobytes()
