"""What inlining keeps of the model, the opsets it takes, and the nodes it refuses."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest
from helpers import assert_identical, run_ort
from inline_cases import TP, data, lengths, one_node_model, scoped_model, value

import revseq
from revseq.ops import reverse_sequence

# --- What inlining keeps ---------------------------------------------------------------


def _rich_model() -> onnx.ModelProto:
    weights = oh.make_tensor("w", TP.FLOAT, [3], [1.0, 2.0, 3.0])
    nodes = [
        oh.make_node("Mul", ["x", "w"], ["scaled"], name="scale", doc_string="scale it"),
        oh.make_node("ReverseSequence", ["scaled", "lens"], ["rev"], name="rs"),
        oh.make_node("Custom", ["rev"], ["y"], name="custom", domain="vendor"),
    ]
    graph = oh.make_graph(
        nodes,
        "rich",
        [value("x", TP.FLOAT, ["T", "B", 3]), value("lens", TP.INT64, ["B"])],
        [value("y", TP.FLOAT, ["T", "B", 3])],
        [weights],
        doc_string="graph doc",
        value_info=[value("scaled", TP.FLOAT, ["T", "B", 3])],
    )
    model = oh.make_model(
        graph,
        opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("vendor", 3)],
        producer_name="tests",
        producer_version="9",
        doc_string="model doc",
    )
    oh.set_model_props(model, {"owner": "revseq", "license": "apache"})
    return model


def test_inline_keeps_everything_else():
    model = _rich_model()
    before = model.SerializeToString()
    inlined = revseq.inline(model)
    assert model.SerializeToString() == before  # a ModelProto argument is never modified
    assert {p.key: p.value for p in inlined.metadata_props} == {
        "owner": "revseq",
        "license": "apache",
    }
    assert (inlined.producer_name, inlined.producer_version) == ("tests", "9")
    assert inlined.doc_string == "model doc"
    assert inlined.graph.doc_string == "graph doc"
    assert {o.domain: o.version for o in inlined.opset_import} == {"": 17, "vendor": 3}
    # The user's initializer kept as it was, first; the decomposition's constants after.
    names = [t.name for t in inlined.graph.initializer]
    assert names[0] == "w" and all(name.startswith("rs/") for name in names[1:])
    original = next(t for t in model.graph.initializer if t.name == "w")
    assert inlined.graph.initializer[0] == original
    kept = {n.name: n for n in inlined.graph.node if not n.name.startswith("rs/")}
    assert sorted(kept) == ["custom", "scale"]
    assert kept["scale"].doc_string == "scale it"
    assert "scaled" in [v.name for v in inlined.graph.value_info]
    assert [o.name for o in inlined.graph.output] == ["y"]


def test_ir_model_is_rewritten_in_place_and_path_gives_proto(tmp_path):
    model = ir.from_proto(one_node_model("float32", ["T", "B", 2], (1, 0)))
    assert revseq.inline(model) is model
    assert "ReverseSequence" not in [n.op_type for n in model.graph]
    path = tmp_path / "m.onnx"
    onnx.save(one_node_model("float32", ["T", "B", 2], (1, 0)), path)
    assert isinstance(revseq.inline(str(path)), onnx.ModelProto)
    assert isinstance(revseq.inline(path), onnx.ModelProto)


def test_as_function_emits_functions_and_calls():
    model = scoped_model("if")
    inlined = revseq.inline(model, as_function=True)
    onnx.checker.check_model(inlined, full_check=True)
    assert [f.domain for f in inlined.functions] == ["revseq.inline"]
    assert "revseq.inline" in {o.domain for o in inlined.opset_import}
    rng = np.random.default_rng(0)
    feeds = {
        "x": data(rng, "float32", (5, 4, 3)),
        "lens": lengths(rng, 4, 5),
        "flag": np.array(True),
    }
    assert_identical(
        run_ort(inlined, feeds, optimize=False)[0], run_ort(model, feeds, optimize=False)[0]
    )


def test_revseq_import_dropped_when_unused():
    model = one_node_model("float32", [3, 4, 5], (0, 2), domain="revseq")
    inlined = revseq.inline(model)
    assert "revseq" not in {o.domain for o in inlined.opset_import}


def test_static_shapes_and_constant_lengths_fold_to_one_gather():
    model = one_node_model("float32", [5, 4, 3], (1, 0))
    lens = oh.make_tensor("lens_c", TP.INT64, [4], [5, 2, 0, 3])
    model.graph.initializer.append(lens)
    model.graph.node[0].input[1] = "lens_c"
    del model.graph.input[1]
    for strategy in ("auto", "gather_rows"):
        inlined = revseq.inline(model, strategy=strategy)
        ops = [n.op_type for n in inlined.graph.node]
        assert not {"Range", "Less", "Where"} & set(ops), ops
    inlined = revseq.inline(model, strategy="gather_rows")
    # The view (a Flatten: one dim trails) keeps the trailing dim, so the gather's
    # output has the data's shape.
    assert [op for op in (n.op_type for n in inlined.graph.node) if op != "Constant"] == [
        "Flatten",
        "Gather",
    ]

    # The lengths initializer, folded into the index, does not stay behind unused; the
    # index is an initializer the gather reads.
    read = {name for n in inlined.graph.node for name in n.input}
    assert [t.name for t in inlined.graph.initializer if t.name not in read] == []
    assert "lens_c" not in [t.name for t in inlined.graph.initializer]


def test_constant_lengths_read_elsewhere_stay():
    model = one_node_model("float32", [5, 4, 3], (1, 0))
    model.graph.initializer.append(oh.make_tensor("lens_c", TP.INT64, [4], [5, 2, 0, 3]))
    model.graph.node[0].input[1] = "lens_c"
    del model.graph.input[1]
    model.graph.node.append(oh.make_node("Identity", ["lens_c"], ["lens_out"]))
    model.graph.output.append(oh.make_tensor_value_info("lens_out", TP.INT64, [4]))
    inlined = revseq.inline(model)
    assert [i.name for i in inlined.graph.initializer if not i.name.startswith("rs/")] == [
        "lens_c"
    ]


# --- Opsets ----------------------------------------------------------------------------


def test_opset_10_is_converted_to_11():
    model = one_node_model("float32", ["T", "B", 3], (1, 0), opset=10)
    model.ir_version = 5
    inlined = revseq.inline(model)
    assert {o.domain: o.version for o in inlined.opset_import}[""] == 11
    rng = np.random.default_rng(0)
    x = data(rng, "float32", (5, 4, 3))
    lens = lengths(rng, 4, 5)
    assert_identical(
        run_ort(inlined, {"x": x, "lens": lens}, optimize=False)[0], reverse_sequence(x, lens)
    )


@pytest.mark.parametrize(("target", "limit"), [("rknn", 19), ("onnx2torch", 18), (None, 21)])
def test_a_target_s_converter_gets_the_latest_opset_it_reads(target, limit):
    """RKNN loads no model past opset 19, onnx2torch converts no Shape or Cast past 18:
    inline for them converts a later model down, exactly; the default keeps its opset."""
    model = one_node_model("float32", ["T", "B", 3], (1, 0), opset=21)
    inlined = revseq.inline(model, target=target)
    assert {o.domain: o.version for o in inlined.opset_import}[""] == limit
    rng = np.random.default_rng(0)
    x = data(rng, "float32", (5, 4, 3))
    lens = lengths(rng, 4, 5)
    assert_identical(
        run_ort(inlined, {"x": x, "lens": lens}, optimize=False)[0], reverse_sequence(x, lens)
    )


def test_a_model_the_converter_cannot_take_down_to_a_target_s_opset_is_refused():
    gelu = oh.make_node("Gelu", ["x"], ["g"])  # from opset 20: no earlier version
    reverse = oh.make_node("ReverseSequence", ["g", "lens"], ["y"], batch_axis=1, time_axis=0)
    graph = oh.make_graph(
        [gelu, reverse], "g", [value("x", TP.FLOAT, [5, 4, 3]), value("lens", TP.INT64, [4])],
        [value("y", TP.FLOAT, [5, 4, 3])],
    )  # fmt: skip
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    refusal = "to opset 19, the latest rknn reads"
    with pytest.raises(revseq.UnsupportedOpsetError, match=refusal):
        revseq.inline(model, target="rknn")
    assert revseq.inline(model).opset_import[0].version == 21  # the default needs none


def test_opset_9_reports_the_node():
    model = one_node_model("float32", ["T", "B", 3], (1, 0), opset=9)
    with pytest.raises(
        revseq.UnsupportedOpsetError, match=r"'rs'.*opset 9.*added in opset 10"
    ):
        revseq.inline(model)


# --- Invalid nodes ---------------------------------------------------------------------


def _with(model: onnx.ModelProto, **attrs) -> onnx.ModelProto:
    node = model.graph.node[-1]
    del node.attribute[:]
    node.attribute.extend(oh.make_attribute(k, v) for k, v in attrs.items())
    return model


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: _with(
                one_node_model("float32", [4, 3, 2], None), batch_axis=0, time_axis=0
            ),
            "must differ",
        ),
        (
            lambda: _with(
                one_node_model("float32", [4, 3, 2], None), batch_axis=2, time_axis=0
            ),
            "must each be 0 or 1",
        ),
        (
            lambda: _with(
                one_node_model("float32", [4, 3, 2], None, domain="revseq"),
                batch_axis=3,
                time_axis=0,
            ),
            "out of range for rank 3",
        ),
        (lambda: one_node_model("float32", [4], None), "rank >= 2"),
        (lambda: one_node_model("float32", [4, 3], None, lens_type=TP.INT16), "must be int64"),
    ],
    ids=["equal_axes", "onnx_axis_2", "revseq_axis_range", "rank_1", "int16_onnx"],
)
def test_invalid_nodes_raise_naming_the_node(make, message):
    with pytest.raises(revseq.InvalidNodeError, match=message) as info:
        revseq.inline(make())
    assert "'rs'" in str(info.value)


def test_wrong_input_counts_and_batch_mismatch():
    model = one_node_model("float32", [4, 3, 2], None)
    model.graph.node[-1].input.pop()
    with pytest.raises(revseq.InvalidNodeError, match=r"expects 2 inputs.*got 1"):
        revseq.inline(model)
    model = one_node_model("float32", [4, 3, 2], None)
    model.graph.node[-1].input.append("lens")
    with pytest.raises(revseq.InvalidNodeError, match="got 3"):
        revseq.inline(model)
    model = one_node_model("float32", [4, 3, 2], None)
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 5
    with pytest.raises(revseq.InvalidNodeError, match="5 elements but the batch axis"):
        revseq.inline(model)


def test_unknown_strategy_and_target():
    model = one_node_model("float32", [4, 3, 2], None)
    with pytest.raises(revseq.StrategyError, match="unknown strategy 'fast'"):
        revseq.inline(model, strategy="fast")
    with pytest.raises(revseq.StrategyError, match="unknown target 'tpu'"):
        revseq.inline(model, target="tpu")


# --- Lengths declared with a dim of their own -------------------------------------------


@pytest.mark.parametrize("strategy", ["auto", "gather_rows", "gather_nd", "gather_elements"])
@pytest.mark.parametrize("target", [None, "onnxruntime", "tvm", "tract", "webgpu"])
@pytest.mark.parametrize("time_major", [True, False])
def test_lengths_of_a_dim_of_their_own_count_the_batch_once(time_major, target, strategy):
    """tf2onnx declares the lengths with a symbol of their own: they are read as
    declared, or gathered by the batch's steps 0 .. B-1 where a form that counts the
    batch reads those steps (fewer nodes). With a static T the one Range, if any, is the
    batch's."""
    from revseq.ops.reference import reverse_sequence_model

    dims = [9, "B", 3] if time_major else ["B", 9, 3]
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)
    axes = {"time_axis": time_axis, "batch_axis": batch_axis}
    model = reverse_sequence_model(dims, TP.FLOAT, lens_dim="L", lens_elem=TP.INT32, **axes)
    try:
        inlined = revseq.inline(model, target=target, strategy=strategy)
    except revseq.RevseqError:
        pytest.skip(f"{strategy} does not fit {target}")
    ops = [n.op_type for n in inlined.graph.node]
    assert ops.count("Range") <= 1
    if strategy == "gather_rows" and time_major:
        # Its row offsets count the batch: the lengths gathered at its steps are one node
        # fewer than the steps counted apart, and their Range is the one.
        gathered = [
            n for n in inlined.graph.node if n.op_type == "Gather" and "lens" in n.input
        ]
        assert gathered and ops.count("Range") == 1
    rng = np.random.default_rng(0)
    lens = np.array([0, 1, 9, 4, 12, -3], dtype=np.int32)
    x = rng.standard_normal((9, 6, 3) if time_major else (6, 9, 3)).astype(np.float32)
    expected = reverse_sequence(x, lens, **axes)
    for optimize in (False, True):
        (got,) = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)
        assert_identical(got, expected)


@pytest.mark.parametrize("target", [None, "tract", "webgpu"])
@pytest.mark.parametrize("time_major", [True, False])
def test_a_dim_is_cast_to_int32_from_its_shape_read_once(time_major, target):
    """int32 lengths are clamped against T cast to int32, and a row stride is a dim cast
    to int32: each straight from its shape read, never a Cast of a Cast, so that the
    same dim's casts are one node."""
    from revseq.ops.reference import reverse_sequence_model

    dims = ["T", "B", 3] if time_major else ["B", "T", 3]
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)
    axes = {"time_axis": time_axis, "batch_axis": batch_axis}
    model = reverse_sequence_model(dims, TP.FLOAT, lens_dim="L", lens_elem=TP.INT32, **axes)
    inlined = revseq.inline(model, target=target)
    made_by = {out: n.op_type for n in inlined.graph.node for out in n.output}
    casts = [n for n in inlined.graph.node if n.op_type == "Cast"]
    assert casts and not [n.name for n in casts if made_by.get(n.input[0]) == "Cast"]
    read = [(n.input[0], n.attribute[0].i) for n in casts]
    assert len(read) == len(set(read))  # no dim cast to one type twice
    lens = np.array([0, 1, 7, 4, 12, -3], dtype=np.int32)
    x = np.arange(7 * 6 * 3, dtype=np.float32).reshape((7, 6, 3) if time_major else (6, 7, 3))
    expected = reverse_sequence(x, lens, **axes)
    for optimize in (False, True):
        (got,) = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)
        assert_identical(got, expected)
