"""Each target's inlined output: the ops it may use, the types and dims it takes."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest
from helpers import all_op_types, assert_identical, run_ort
from inline_cases import TP, data, lengths, one_node_model

import revseq
from revseq.ops import reverse_sequence
from revseq.ops.reference import reference_evaluator, reverse_sequence_model

# --- Targets ---------------------------------------------------------------------------

# What each profile can take: (static shapes + constant lengths, static + run-time
# lengths, symbolic shapes + run-time lengths). False means StrategyError.
TARGET_EXPECTATIONS = {
    "webgpu": (True, True, True),
    "webnn": (True, True, False),
    "qnn": (True, True, False),
    "coreml": (True, True, True),
    "nnapi": (True, False, False),
}


@pytest.mark.parametrize("target", sorted(TARGET_EXPECTATIONS))
def test_targets_use_only_their_ops(target):
    """The documented profiles (probed ones: test_profiles and test_backends)."""
    expectations = TARGET_EXPECTATIONS[target]
    allowed = revseq.TARGETS[target].static_ops | {"Constant"}
    rng = np.random.default_rng(0)
    x = data(rng, "float32", (5, 4, 3))
    lens = lengths(rng, 4, 5)
    constant = one_node_model("float32", [5, 4, 3], (1, 0))
    constant.graph.initializer.append(oh.make_tensor("lens", TP.INT64, [4], lens.tolist()))
    del constant.graph.input[1]
    variants = [
        (constant, {"x": x}),
        (one_node_model("float32", [5, 4, 3], (1, 0)), {"x": x, "lens": lens}),
        (one_node_model("float32", ["T", "B", 3], (1, 0)), {"x": x, "lens": lens}),
    ]
    for (model, feeds), fits in zip(variants, expectations, strict=True):
        if not fits:
            with pytest.raises(revseq.StrategyError, match=r"target lacks|needs"):
                revseq.inline(model, target=target)
            continue
        inlined = revseq.inline(model, target=target)
        used = {n.op_type for n in inlined.graph.node}
        assert used <= allowed, used - allowed
        assert_identical(run_ort(inlined, feeds, optimize=False)[0], reverse_sequence(x, lens))


@pytest.mark.parametrize(
    ("dims", "batch_axis", "time_axis"),
    [(["T", "B", 3], 1, 0), (["B", "T", 3], 0, 1), (["T", "B"], 1, 0)],
    ids=["time-major", "batch-major", "rank-2"],
)
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_coreml_takes_symbolic_dims_with_its_ops_alone(dims, batch_axis, time_axis, dtype):
    """No Less, Where, Min, Gather or Expand (CoreML's list): lengths clamped against a
    run-time T by Max and Sub, the tuples' batch column broadcast by adding zeros;
    invalid lengths (negative, past T, the type's extremes) clamped as everywhere."""
    model = one_node_model(dtype, dims, (batch_axis, time_axis))
    inlined = revseq.inline(model, target="coreml")
    used = {n.op_type for n in inlined.graph.node}
    assert used <= revseq.TARGETS["coreml"].dynamic_ops | {"Constant"}, used
    assert {"Max", "GatherND"} <= used
    rng = np.random.default_rng(0)
    for steps, batch in ((6, 5), (1, 3), (9, 1)):
        shape = [steps, batch] if time_axis == 0 else [batch, steps]
        x = data(rng, dtype, tuple(shape + dims[2:]))
        extremes = [-5, steps + 3, np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, steps]
        lens = np.array((extremes * batch)[:batch], np.int64)
        want = reverse_sequence(
            x, np.clip(lens, 0, steps), batch_axis=batch_axis, time_axis=time_axis
        )
        for optimize in (False, True):
            got = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)[0]
            assert_identical(got, want)


def test_explicit_op_sets_choose_other_arithmetic():
    model = one_node_model("float32", ["T", "B", 3], (1, 0))
    rng = np.random.default_rng(0)
    x = data(rng, "float32", (5, 4, 3))
    lens = lengths(rng, 4, 5)
    common = {
        "Shape",
        "Squeeze",
        "Gather",
        "Slice",
        "Unsqueeze",
        "Expand",
        "Concat",
        "GatherND",
        "GatherElements",
        "Reshape",
        "Sub",
        "Add",
        "Mul",
        "Min",
        "Max",
        "Cast",
    }
    for allowed, absent in (
        (common | {"Less", "Where", "ConstantOfShape", "CumSum"}, "Range"),
        (common | {"Range"}, "Where"),
    ):
        inlined = revseq.inline(model, target=sorted(allowed))
        used = {n.op_type for n in inlined.graph.node}
        assert absent not in used and used <= allowed | {"Constant"}
        assert_identical(
            run_ort(inlined, {"x": x, "lens": lens}, optimize=True)[0],
            reverse_sequence(x, lens),
        )


def test_a_node_no_form_fits_leaves_the_model_unchanged():
    # The first node has constant lengths (nnapi takes it), the second run-time lengths
    # (nnapi has no form for it): nothing may be rewritten, not even the first.
    nodes = [
        oh.make_node("ReverseSequence", ["x", "fixed"], ["r"], name="fits"),
        oh.make_node("ReverseSequence", ["r", "lens"], ["y"], name="does_not_fit"),
    ]
    graph = oh.make_graph(
        nodes,
        "g",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, [5, 4, 3]),
            oh.make_tensor_value_info("lens", TP.INT64, [4]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, [5, 4, 3])],
        [oh.make_tensor("fixed", TP.INT64, [4], [5, 2, 0, 3])],
    )
    model = ir.from_proto(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
    before = ir.to_proto(model).SerializeToString()
    with pytest.raises(revseq.StrategyError, match="does_not_fit"):
        revseq.inline(model, target="nnapi")
    assert ir.to_proto(model).SerializeToString() == before


@pytest.mark.parametrize("target", [None, "iree", "onnx2torch"])
@pytest.mark.parametrize("kind", ["static", "time+batch", "all"])
@pytest.mark.parametrize(
    ("rank", "trailing"), [(2, ()), (3, (3,)), (4, (1, 2)), (5, (2, 1, 3))]
)
def test_complex_data_runs_in_the_reference_runtime_at_every_rank(
    rank, trailing, kind, target
):
    """onnxruntime has no complex types: onnx.reference runs them, and its GatherElements
    takes at most 64 steps (np.choose's choices), so complex data is gathered otherwise."""
    time_len, batch = 70, 3
    dims: list = [time_len, batch, *trailing]
    declared = list(dims)
    if kind != "static":
        declared[:2] = ["T", "B"]
    if kind == "all":
        declared = [d if isinstance(d, str) else f"d{i}" for i, d in enumerate(declared)]
    for dtype, np_type in (
        (onnx.TensorProto.COMPLEX64, np.complex64),
        (onnx.TensorProto.COMPLEX128, np.complex128),
    ):
        model = reverse_sequence_model(declared, dtype)
        inlined = revseq.inline(model, target=target)
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(np_type)
        lens = np.array([time_len, 0, 2])
        got = reference_evaluator(inlined).run(None, {"x": x, "lens": lens})[0]
        assert_identical(got, reverse_sequence(x, lens))


def test_complex_data_takes_no_gather_elements_the_reference_runtime_cannot_run():
    """Named, GatherElements is refused for complex data along more than 63 steps; the
    matrix form (which onnx.reference gathers row by row) and short axes keep it."""
    long = reverse_sequence_model([70, 3, 2], onnx.TensorProto.COMPLEX64)
    with pytest.raises(revseq.StrategyError, match=r"onnx\.reference"):
        revseq.inline(long, strategy="gather_elements", target="iree")
    short = reverse_sequence_model([60, 3, 2], onnx.TensorProto.COMPLEX64)
    assert "GatherElements" in all_op_types(
        revseq.inline(short, strategy="gather_elements", target="iree")
    )
    matrix = reverse_sequence_model([70, 3], onnx.TensorProto.COMPLEX64)
    assert "GatherElements" in all_op_types(
        revseq.inline(matrix, strategy="gather_elements", target="iree")
    )


def _cast_lengths_model(source_type: int, dims) -> onnx.ModelProto:
    """A ReverseSequence whose int64 lengths are cast from a ``source_type`` input, as
    tf2onnx casts TensorFlow's int32 lengths."""
    model = reverse_sequence_model(dims, onnx.TensorProto.FLOAT, lens_elem=source_type)
    model.graph.node[0].input[1] = "lens_int64"
    cast = oh.make_node("Cast", ["lens"], ["lens_int64"], to=onnx.TensorProto.INT64)
    model.graph.node.insert(0, cast)
    return model


@pytest.mark.parametrize("as_function", [False, True])
@pytest.mark.parametrize("dims", [(5, 4, 3), ("T", "B", 3)])
@pytest.mark.parametrize(
    ("source_type", "target", "reads_source"),
    [
        (onnx.TensorProto.INT32, "webgpu", True),  # its index is int32: nothing int64
        (onnx.TensorProto.INT32, "onnxruntime", False),  # int64 arithmetic: as it is
        (onnx.TensorProto.INT16, "webgpu", False),  # int32 forms take no int16
    ],
)
def test_int32_lengths_cast_to_int64_are_read_as_int32(
    source_type, target, reads_source, dims, as_function
):
    """Where the target computes its index in int32, lengths cast from int32 are read as
    they were (onnxruntime-web would otherwise copy them back to the host for int64
    arithmetic on its CPU); exact either way."""
    model = _cast_lengths_model(source_type, dims)
    inlined = revseq.inline(model, target=target, as_function=as_function)
    onnx.checker.check_model(inlined, full_check=True)
    graph = inlined.graph
    readers = [n for n in graph.node if "lens" in n.input]
    casts = [n for n in graph.node if n.op_type == "Cast" and n.output[0] == "lens_int64"]
    assert bool(casts) != reads_source  # the exporter's Cast goes when nothing reads it
    assert (readers and readers[0].op_type != "Cast") == reads_source
    rng = np.random.default_rng(0)
    for time_len, batch in ((5, 4), (2, 3)) if "T" in dims else ((5, 4),):
        x = rng.standard_normal((time_len, batch, 3)).astype(np.float32)
        np_type = onnx.helper.tensor_dtype_to_np_dtype(source_type)
        lens = np.array([0, 1, time_len, 2][:batch], np_type)
        got = run_ort(inlined, {"x": x, "lens": lens}, optimize=False)[0]
        assert_identical(got, reverse_sequence(x, lens, batch_axis=1, time_axis=0))
