"""A target exact on finite data only (``ncnn-finite``): the one_hot form, its domain.

ncnn runs no gather with a run-time index, no comparison, no select and no Cast: with
lengths given at run time, the only form it runs picks each step by a product with a
0/1 matrix computed in float32, exact on finite data without -0.0. It is a target of
its own, asked for by name; its output says its domain and the check draws data there.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import all_op_types, assert_identical, run_ort

import revseq
from revseq.backends import isolated, unavailable
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import DOMAIN_KEY, FINITE, ONE_HOT

FLOAT = onnx.TensorProto.FLOAT

# (dims, batch_axis, time_axis): time-major, batch-major of rank 4, general axes, rank 2,
# two steps (a single step is an Identity on every target: tests/passes/inline).
LAYOUTS = [
    ([6, 4, 3], 1, 0),
    ([4, 6, 2, 3], 0, 1),
    ([2, 6, 3, 4], 3, 1),
    ([6, 4], 1, 0),
    ([2, 3, 2], 1, 0),
]


def _model(dims, batch_axis=1, time_axis=0, elem=FLOAT, **kwargs) -> onnx.ModelProto:
    domain = "" if {batch_axis, time_axis} == {0, 1} else "revseq"
    return reverse_sequence_model(
        dims, elem, batch_axis=batch_axis, time_axis=time_axis, domain=domain, **kwargs
    )


def _finite_data(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _lengths(time_len: int, batch: int) -> np.ndarray:
    return np.array(([0, 1, time_len, time_len // 2] * batch)[:batch], np.int64)


def _metadata(model: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def test_the_finite_target_exists_where_the_probe_ran_its_form_and_yields():
    profile = TARGETS["ncnn-finite"]
    assert profile.domain == FINITE and profile.yields
    assert ONE_HOT in profile.forms[FINITE]
    assert TARGETS["ncnn"].domain is None  # the exact target stays as it was
    assert not any(name.endswith("-finite") for name in TARGETS if name != "ncnn-finite")


def test_the_exact_target_refuses_run_time_lengths_the_finite_one_takes_them():
    model = _model([6, 4, 3])
    with pytest.raises(revseq.StrategyError, match="no decomposition fits target 'ncnn'"):
        revseq.inline(model, target="ncnn")
    inlined = revseq.inline(model, target="ncnn-finite")
    used = set(all_op_types(inlined))
    assert not used & {"Gather", "GatherElements", "GatherND", "Less", "Where", "Cast"}
    assert "MatMul" in used and "ReverseSequence" not in used
    assert _metadata(inlined)[DOMAIN_KEY] == FINITE
    lengths = inlined.graph.input[1]
    assert lengths.type.tensor_type.elem_type == FLOAT  # what a float-only runtime is fed


@pytest.mark.parametrize("optimize", [False, True], ids=["opt-off", "opt-on"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_one_hot_is_exact_on_finite_data(layout, optimize):
    dims, batch_axis, time_axis = layout
    model = _model(dims, batch_axis, time_axis)
    inlined = revseq.inline(model, target="ncnn-finite")
    rng = np.random.default_rng(0)
    x = _finite_data(rng, dims)
    lens = _lengths(dims[time_axis], dims[batch_axis])
    got = run_ort(inlined, {"x": x, "lens": lens.astype(np.float32)}, optimize=optimize)[0]
    want = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    assert_identical(got, want)


def test_invalid_lengths_are_clamped_as_the_exact_forms_clamp_them():
    model = _model([5, 4, 2])
    inlined = revseq.inline(model, target="ncnn-finite")
    x = _finite_data(np.random.default_rng(1), (5, 4, 2))
    lens = np.array([-3, 9, 5, 2], np.int64)
    got = run_ort(inlined, {"x": x, "lens": lens.astype(np.float32)}, optimize=False)[0]
    assert_identical(got, reverse_sequence(x, lens))


def test_outside_its_domain_the_form_differs_and_the_check_draws_inside_it():
    model = _model([6, 4, 3])
    inlined = revseq.inline(model, target="ncnn-finite")
    report = revseq.check(model, inlined, trials=2)
    assert report.ok and report.exercised, report
    assert "finite" in report.domain and "domain:" in str(report)
    # The same output without its declared domain is checked on every value: NaN,
    # inf and -0.0 do not survive a product with a 0/1 matrix.
    undeclared = onnx.ModelProto()
    undeclared.CopyFrom(inlined)
    del undeclared.metadata_props[:]
    report = revseq.check(model, undeclared, trials=2)
    assert not report.ok and report.domain is None


def test_constant_lengths_keep_the_exact_form_and_declare_no_domain():
    model = _model([6, 4, 3], lens=np.array([0, 1, 6, 3]))
    inlined = revseq.inline(model, target="ncnn-finite")
    assert "MatMul" not in all_op_types(inlined)
    assert DOMAIN_KEY not in _metadata(inlined)


def test_lengths_cast_from_int32_are_read_as_the_float32_input_they_came_from():
    model = _model([6, 4, 3])
    graph = model.graph
    graph.node[0].input[1] = "lens_cast"
    graph.node.insert(0, onnx.helper.make_node("Cast", ["lens"], ["lens_cast"], to=7))
    graph.input[1].type.tensor_type.elem_type = onnx.TensorProto.INT32
    inlined = revseq.inline(model, target="ncnn-finite")
    assert "Cast" not in all_op_types(inlined)
    assert inlined.graph.input[1].type.tensor_type.elem_type == FLOAT
    assert revseq.check(model, inlined, trials=2).ok


def test_lengths_another_node_reads_keep_their_type_and_are_cast():
    model = _model([6, 4, 3])
    graph = model.graph
    graph.node.append(onnx.helper.make_node("Identity", ["lens"], ["lens_out"]))
    graph.output.append(onnx.helper.make_tensor_value_info("lens_out", 7, [4]))
    inlined = revseq.inline(model, target="ncnn-finite")
    assert inlined.graph.input[1].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert "Cast" in all_op_types(inlined)
    assert revseq.check(model, inlined, trials=2).ok


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (_model([6, 4, 3], elem=onnx.TensorProto.INT32), "moves float32 data only"),
        (_model(["T", "B", 3]), "needs static dims"),
        (_model([1025, 2, 1]), "at most 1024 steps"),
    ],
    ids=["int32", "symbolic", "long"],
)
def test_what_the_form_does_not_take_is_refused_with_its_reason(model, reason):
    with pytest.raises(revseq.StrategyError, match=reason):
        revseq.inline(model, target="ncnn-finite")


def test_a_profile_names_its_finite_forms_and_reads_back():
    from revseq.ops.targets.profile import Profile

    data = TARGETS["ncnn"].to_json()
    assert data["forms"][FINITE] == [ONE_HOT]
    assert Profile.from_json(data).finite().name == "ncnn-finite"
    data["forms"][FINITE] = ["gather_everything"]
    with pytest.raises(revseq.RevseqError, match="unknown form"):
        Profile.from_json(data)


def test_the_finite_probe_certifies_the_form_on_a_backend_that_runs_it():
    from revseq.backends import get
    from revseq.probe._runs import run_finite_probe

    result = run_finite_probe(get("onnxruntime"), TARGETS["onnxruntime"])
    assert result.failure is None and result.kind == FINITE


@pytest.mark.backend
@pytest.mark.parametrize("layout", LAYOUTS[:4], ids=str)
def test_the_finite_target_is_exact_on_ncnn_on_its_domain(layout):
    why = unavailable("ncnn")
    if why is not None:
        pytest.skip(why)
    dims, batch_axis, time_axis = layout
    model = _model(dims, batch_axis, time_axis)
    inlined = revseq.inline(model, target="ncnn-finite")
    report = revseq.check(model, inlined, backend="ncnn", trials=2)
    assert report.ok and report.exercised, report
    assert report.nodes and report.nodes[0].runs >= 4  # lengths 0, 1 and T among them
    # ncnn itself is fed the lengths as float32 values, as an ncnn application feeds them.
    x = _finite_data(np.random.default_rng(5), dims)
    lens = _lengths(dims[time_axis], dims[batch_axis])
    got = isolated("ncnn").run(inlined, {"x": x, "lens": lens.astype(np.float32)})[0]
    assert_identical(
        got, reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    )


@pytest.mark.backend
def test_a_symbolic_model_runs_on_ncnn_once_its_shapes_are_fixed():
    why = unavailable("ncnn")
    if why is not None:
        pytest.skip(why)
    model = _model(["T", "B", 4])
    with pytest.raises(revseq.StrategyError, match="needs static dims"):
        revseq.inline(model, target="ncnn-finite")
    inlined = revseq.inline(model, target="ncnn-finite", input_shapes={"x": [6, 3, 4]})
    report = revseq.check(
        model, inlined, backend="ncnn", trials=2, input_shapes={"x": [6, 3, 4]}
    )
    assert report.ok and report.exercised, report


def test_a_model_where_one_node_takes_slices_and_another_one_hot_declares_the_domain():
    """One node with constant lengths (``slices``), one with lengths at run time."""
    x = onnx.helper.make_tensor_value_info("x", FLOAT, [6, 4, 3])
    lens = onnx.helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, [4])
    y = onnx.helper.make_tensor_value_info("y", FLOAT, [6, 4, 3])
    fixed = onnx.numpy_helper.from_array(np.array([0, 1, 6, 3], np.int64), "fixed")
    nodes = [
        onnx.helper.make_node("ReverseSequence", ["x", "fixed"], ["r"], name="constant"),
        onnx.helper.make_node("ReverseSequence", ["r", "lens"], ["y"], name="run_time"),
    ]
    graph = onnx.helper.make_graph(nodes, "two", [x, lens], [y], [fixed])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    inlined = revseq.inline(model, target="ncnn-finite")
    assert "MatMul" in all_op_types(inlined) and "Slice" in all_op_types(inlined)
    assert _metadata(inlined)[DOMAIN_KEY] == FINITE
    report = revseq.check(model, inlined, trials=2)
    assert report.ok and report.domain is not None, report
