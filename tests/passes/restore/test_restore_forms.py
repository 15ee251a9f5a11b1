"""Every form revseq emits restores: forms x element types x targets x static/dynamic.

restore(inline(m)) must give back exactly one ReverseSequence reading the same data and
lengths with the same axes, whose outputs are then those of the original node.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import all_op_types, assert_identical, run_ort, run_reference

import revseq
from revseq.ops.forms import FORMS
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import ELEMENT_TYPES

LAYOUTS = {"time_major": (1, 0), "batch_major": (0, 1)}


def one_node(dtype: str, dynamic: bool, layout: str) -> onnx.ModelProto:
    batch_axis, time_axis = LAYOUTS[layout]
    dims: list = [5, 4, 3] if time_axis == 0 else [4, 5, 3]
    if dynamic:
        dims[time_axis], dims[batch_axis] = "T", "B"
    node = oh.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis
    )
    graph = oh.make_graph(
        [node],
        "rs",
        [
            oh.make_tensor_value_info("x", ELEMENT_TYPES[dtype], dims),
            oh.make_tensor_value_info("lens", onnx.TensorProto.INT64, [dims[batch_axis]]),
        ],
        [oh.make_tensor_value_info("y", ELEMENT_TYPES[dtype], dims)],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)


def assert_restores(model: onnx.ModelProto, inlined: onnx.ModelProto) -> None:
    assert "ReverseSequence" not in [n.op_type for n in inlined.graph.node]
    restored = revseq.restore(inlined)
    nodes = [n for n in restored.graph.node if n.op_type != "Constant"]
    assert [n.op_type for n in nodes] == ["ReverseSequence"], [n.op_type for n in nodes]
    (node,) = nodes
    original = model.graph.node[0]
    assert list(node.input) == list(original.input)
    axes = {a.name: a.i for a in node.attribute}
    assert (axes.get("batch_axis", 1), axes.get("time_axis", 0)) == tuple(
        a.i for a in sorted(original.attribute, key=lambda a: a.name)
    )


def run_original_and_restored(model: onnx.ModelProto, dtype: str) -> None:
    """The restored model computes what the original does (ORT, or the reference)."""
    rng = np.random.default_rng(0)
    batch_axis, time_axis = (
        a.i for a in sorted(model.graph.node[0].attribute, key=lambda a: a.name)
    )
    shape = [5, 4, 3] if time_axis == 0 else [4, 5, 3]
    if dtype == "string":
        x = rng.choice(np.array(["a", "bc", "", "d e"], dtype=object), size=shape)
    else:
        x = (rng.standard_normal(shape) * 10).astype(dtype)
    feeds = {"x": x, "lens": np.array([0, 1, 5, 3], dtype=np.int64)}
    restored = revseq.restore(revseq.inline(model, target="any"))
    expected = reverse_sequence(x, feeds["lens"], batch_axis=batch_axis, time_axis=time_axis)
    got = (
        run_ort(restored, feeds, optimize=False)[0]
        if dtype in ("float32", "string")
        else run_reference(restored, feeds)[0]
    )
    assert_identical(got, expected)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", ELEMENT_TYPES)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_and_type_restores(form, dtype, dynamic, layout):
    model = one_node(dtype, dynamic, layout)
    assert_restores(model, revseq.inline(model, strategy=form, target="any"))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", ELEMENT_TYPES)
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_target_output_restores(target, dtype, dynamic):
    for layout in LAYOUTS:
        model = one_node(dtype, dynamic, layout)
        try:
            inlined = revseq.inline(model, target=target)
        except revseq.StrategyError as e:  # the target cannot express the case
            assert "no decomposition fits" in str(e)
            continue
        if TARGETS[target].domain is not None and "MatMul" in all_op_types(inlined):
            # one_hot is exact on finite data only, and reads float32 lengths: no
            # ReverseSequence computes it on every value, so restore leaves it.
            restored = revseq.restore(inlined)
            assert "ReverseSequence" not in all_op_types(restored)
            continue
        assert_restores(model, inlined)


@pytest.mark.parametrize("dtype", ["float32", "string"])
def test_restored_models_compute_the_reversal(dtype):
    for layout in LAYOUTS:
        for dynamic in (False, True):
            run_original_and_restored(one_node(dtype, dynamic, layout), dtype)


def test_small_static_shapes_try_every_length_value():
    """A decomposition wrong for one length value only (5 of T=6) stays unfused.

    Restore tries every length 0..T at every batch position when T and B are small.
    """
    import onnx_ir as ir

    from revseq.passes import RestoreReverseSequencePass
    from revseq.passes.restore.proof import probe_lengths

    vectors = probe_lengths(np.random.default_rng(0), 3, 6)
    for value in range(7):
        assert any((v == value).all() for v in vectors)

    rs = oh.make_node("ReverseSequence", ["x", "wrong"], ["y"], batch_axis=1, time_axis=0)
    nodes = [
        oh.make_node("Constant", [], ["five"], value=oh.make_tensor("", 7, [], [5])),
        oh.make_node("Equal", ["lens", "five"], ["is_five"]),
        oh.make_node("Cast", ["is_five"], ["bump"], to=onnx.TensorProto.INT64),
        oh.make_node("Sub", ["lens", "bump"], ["wrong"]),  # 5 -> 4, every other length kept
        rs,
    ]
    graph = oh.make_graph(
        nodes,
        "near_miss",
        [
            oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [6, 3, 2]),
            oh.make_tensor_value_info("lens", onnx.TensorProto.INT64, [3]),
        ],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [6, 3, 2])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)
    inlined = ir.from_proto(revseq.inline(model, target="any"))
    result = RestoreReverseSequencePass()(inlined)
    assert "ReverseSequence" not in [n.op_type for n in inlined.graph]
    assert result.reasons and not result.modified


def _slim(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxslim

    return onnxslim.slim(model)


def _optimize(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxscript.optimizer

    return onnxscript.optimizer.optimize(model)


def _sim(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxsim

    simplified, ok = onnxsim.simplify(model)
    assert ok
    return simplified


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", ["float32", "string"])
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("tool", ["onnxslim", "onnxsim", "optimizer"])
def test_forms_restore_after_graph_optimisers(tool, form, dtype, dynamic):
    """onnxslim, onnxsim (optional test extras) and onnxscript's optimizer in between."""
    if tool != "optimizer":
        pytest.importorskip(tool, reason=f"{tool} is an optional extra (onnx-revseq[slim])")
    optimise = {
        "onnxslim": _slim,
        "onnxsim": _sim,
        "optimizer": _optimize,
    }[tool]
    for layout in LAYOUTS:
        model = one_node(dtype, dynamic, layout)
        optimised = optimise(revseq.inline(model, strategy=form, target="any"))
        assert_restores(model, optimised)
