"""Equivalence checking: bit-exact comparison, engines, input generation, per-node mode."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import revseq
from revseq.equivalence import check, check_nodes, generate_inputs
from revseq.models import FOLDER as MODELS

TP = onnx.TensorProto


def _model(*nodes, elem=TP.FLOAT, dims=("T", "B", 3), extra_inits=()) -> onnx.ModelProto:
    graph = oh.make_graph(
        list(nodes),
        "g",
        [
            oh.make_tensor_value_info("x", elem, list(dims)),
            oh.make_tensor_value_info("lens", TP.INT64, ["B"]),
        ],
        [oh.make_tensor_value_info("y", elem, list(dims))],
        list(extra_inits),
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _reverse(**attrs) -> onnx.ModelProto:
    return _model(oh.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rs", **attrs))


def test_identical_models_are_ok():
    report = check(_reverse(), revseq.inline(_reverse()), trials=3)
    assert report.ok
    assert report.trials == 3
    assert report.optimizations == ("off", "on")
    assert report.outputs_compared == 6
    assert report.engines == {
        "reference": "onnxruntime",
        "candidate": "onnxruntime",
        "decompositions": "onnxruntime",
    }
    assert "bit-identical" in str(report)
    (node,) = report.nodes
    assert node.ok and node.name == "rs" and node.longest >= 2


def test_a_difference_gives_a_counterexample():
    other = _model(
        oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs"),
        oh.make_node("Neg", ["r"], ["y"]),
    )
    report = check(_reverse(), other)
    assert not report.ok
    c = report.counterexample
    assert c is not None and c.output_name == "y" and c.index is not None
    assert set(c.inputs) == {"x", "lens"}
    assert "DIFFERENT" in str(report) and "first difference" in str(report)


def _constant_output(values: np.ndarray) -> onnx.ModelProto:
    tensor = onnx.numpy_helper.from_array(values, "c")
    node = oh.make_node("Constant", [], ["y"], value=tensor)
    graph = oh.make_graph(
        [node],
        "g",
        [oh.make_tensor_value_info("x", TP.FLOAT, [1])],
        [oh.make_tensor_value_info("y", TP.FLOAT, list(values.shape))],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_nan_payload_and_negative_zero_count():
    quiet = np.array([np.nan], dtype=np.float32)
    payload = np.array([0x7FC00123], dtype=np.uint32).view(np.float32)
    report = check(_constant_output(quiet), _constant_output(payload), trials=1)
    assert not report.ok
    zero = check(
        _constant_output(np.array([0.0], np.float32)),
        _constant_output(np.array([-0.0], np.float32)),
        trials=1,
    )
    assert not zero.ok
    same = check(_constant_output(payload), _constant_output(payload.copy()), trials=1)
    assert same.ok


@pytest.mark.parametrize("elem", [TP.FLOAT16, TP.FLOAT, TP.DOUBLE])
def test_a_candidate_that_computes_on_the_data_is_caught(elem):
    # x * 1 keeps every value and a quiet NaN's payload, but sets a signalling NaN's
    # quiet bit: only the generated inputs' signalling NaN tells the two apart.
    one = onnx.helper.make_tensor("one", elem, [], [1.0])
    times_one = _model(
        oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs"),
        oh.make_node("Constant", [], ["one"], value=one),
        oh.make_node("Mul", ["r", "one"], ["y"]),
        elem=elem,
    )
    report = check(_model(*_reverse().graph.node, elem=elem), times_one)
    assert not report.ok
    c = report.counterexample
    assert c is not None and repr(c.reference_value).startswith("nan (bits 0x")
    assert repr(c.candidate_value) != repr(c.reference_value)


@pytest.mark.parametrize("elem", [TP.FLOAT16, TP.FLOAT, TP.DOUBLE, TP.BFLOAT16])
def test_generated_floats_hold_quiet_and_signalling_nans(elem):
    x = generate_inputs(_model(*_reverse().graph.node, elem=elem), 0, 0)["x"].reshape(-1)
    bits = x.view(np.dtype(f"u{x.itemsize}"))
    width = 8 * x.itemsize
    mantissa = {16: 10 if elem == TP.FLOAT16 else 7, 32: 23, 64: 52}[width]
    quiet_bit = 1 << (mantissa - 1)
    exponent = ((1 << (width - 1)) - 1) & ~((1 << mantissa) - 1)
    fraction = (1 << mantissa) - 1
    nans = [b for b in map(int, bits) if b & exponent == exponent and b & fraction]
    assert any(b & quiet_bit and b & (quiet_bit - 1) for b in nans)  # quiet, with a payload
    assert any(not b & quiet_bit and b >> (width - 1) for b in nans)  # signalling, negative


def test_strings_compare_by_value():
    model = _reverse()
    model.graph.input[0].type.tensor_type.elem_type = TP.STRING
    model.graph.output[0].type.tensor_type.elem_type = TP.STRING
    assert check(model, revseq.inline(model, strategy="gather_rows")).ok


def test_complex_falls_back_to_the_reference_evaluator():
    model = _reverse()
    model.graph.input[0].type.tensor_type.elem_type = TP.COMPLEX64
    model.graph.output[0].type.tensor_type.elem_type = TP.COMPLEX64
    report = check(model, revseq.inline(model), trials=2)
    assert report.ok
    assert report.engines["reference"].startswith("onnx.reference (onnxruntime has no complex")


def test_revseq_domain_gets_its_definition_attached():
    node = oh.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], domain="revseq", batch_axis=1, time_axis=-1
    )
    graph = oh.make_graph(
        [node],
        "g",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, [2, 3, 4]),
            oh.make_tensor_value_info("lens", TP.INT32, [3]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, [2, 3, 4])],
    )
    model = oh.make_model(
        graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("revseq", 1)]
    )
    assert check(model, revseq.inline(model)).ok


def test_generated_lengths_cover_0_1_and_full_length():
    model = _reverse()
    seen = set()
    for trial in range(3):
        feeds = generate_inputs(model, trial, seed=0)
        time_len = feeds["x"].shape[0]
        assert feeds["lens"].shape == (feeds["x"].shape[1],)
        assert ((feeds["lens"] >= 0) & (feeds["lens"] <= time_len)).all()
        # A full length counts only where T is more than 1: at T = 1 it is the 1 already.
        seen |= {"T" if v == time_len and time_len > 1 else int(v) for v in feeds["lens"]}
    assert {0, 1, "T"} <= seen
    sizes = {generate_inputs(model, t, 0)["x"].shape for t in range(3)}
    assert any(1 in s for s in sizes) and len(sizes) > 1


def test_user_inputs_and_mismatched_signatures():
    x = np.arange(12, dtype=np.float32).reshape(4, 1, 3)
    report = check(
        _reverse(), revseq.inline(_reverse()), inputs=[{"x": x, "lens": np.array([3])}]
    )
    assert report.ok and report.trials == 1
    other = _reverse()
    other.graph.input[1].name = "lengths"
    other.graph.node[0].input[1] = "lengths"
    with pytest.raises(revseq.CheckError, match="different inputs"):
        check(_reverse(), other)


def test_rank_one_is_refused_before_onnxruntime_sees_it():
    model = _model(oh.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rs"), dims=(4,))
    with pytest.raises(revseq.CheckError, match="rank >= 2"):
        check(model, model)


def test_check_nodes_reports_each_node_and_scope():
    model = onnx.load(MODELS / "control_flow.onnx")
    reports = check_nodes(model, trials=2)
    assert len(reports) == 3
    assert all(r.ok for r in reports), [str(r) for r in reports]
    scopes = {r.scope for r in reports}
    assert "function local::ReverseThenNegate" in scopes
    assert any("Loop" in s for s in scopes)


def test_a_candidate_without_the_nodes_output_is_not_checked_alone():
    renamed = revseq.inline(_reverse())
    for node in renamed.graph.node:
        node.output[:] = ["y_renamed" if o == "y" else o for o in node.output]
    renamed.graph.node.append(oh.make_node("Identity", ["y_renamed"], ["y"]))
    # the output 'y' is now made by an Identity: the cut reaches back to 'x' and 'lens'
    assert check(_reverse(), renamed).ok
    other = revseq.inline(_reverse())
    other.graph.output[0].name = "z"
    for node in other.graph.node:
        node.output[:] = ["z" if o == "y" else o for o in node.output]
    report = check(_reverse(), other)
    (node,) = report.nodes
    assert node.error is not None and "no value named 'y'" in node.error
    with pytest.raises(revseq.CheckError, match="not checked on onnxruntime"):
        check(_reverse(), other, backend="onnxruntime")


def test_the_function_form_is_cut_with_its_function():
    report = check(_reverse(), revseq.inline(_reverse(), as_function=True))
    assert report.ok and report.nodes[0].ok and report.nodes[0].longest >= 2


def test_harmful_placements_are_a_copy_back_or_more_than_a_time_vector():
    from revseq.equivalence.off_device import harmful_nodes

    model = revseq.inline(_reverse())
    feeds = generate_inputs(_reverse(), 2, seed=0)
    names = [(n.op_type, n.name) for n in model.graph.node if n.op_type != "Constant"]
    limit = max(feeds["x"].shape[:2])
    assert harmful_nodes(model, {"WebGpuExecutionProvider": names}, feeds, limit=limit) == []
    found = harmful_nodes(model, {"CPUExecutionProvider": names}, feeds, limit=limit)
    assert any(f.startswith("Gather") for f in found)  # the data itself, on the CPU
    assert not any(f.startswith("Shape ") for f in found)  # a shape is small
    copy = {"WebGpuExecutionProvider": [("MemcpyToHost", "Memcpy_token_0")]}
    assert harmful_nodes(model, copy, feeds, limit=limit) == [
        "MemcpyToHost 'Memcpy_token_0' (a copy back to the host)"
    ]


def test_a_cut_decomposition_is_a_model_every_importer_takes():
    """IREE's importer requires a shape on every graph output: the cut model's output
    declares the data's rank (its dims left to inference), and passes onnx's checker."""
    import onnx_ir as ir

    from revseq.equivalence._counterparts import counterparts

    reference = _reverse()
    (cut,) = counterparts(ir.from_proto(reference), ir.from_proto(revseq.inline(reference)))
    model = cut.model(
        {name: onnx.TensorProto.FLOAT if name == "x" else onnx.TensorProto.INT64
         for name in cut.inputs},
        onnx.TensorProto.FLOAT,
        functions=[],
        ir_version=9,
    )  # fmt: skip
    onnx.checker.check_model(model, full_check=True)
    (output,) = model.graph.output
    assert output.type.tensor_type.HasField("shape")
    rank = len(reference.graph.input[0].type.tensor_type.shape.dim)
    assert len(output.type.tensor_type.shape.dim) == rank
