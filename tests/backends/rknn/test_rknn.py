"""RKNN-Toolkit2's simulator: its own target, what it holds narrower, what its build refuses.

They run where ``REVSEQ_RKNN_PYTHON`` names its environment (docs/backends.md#rknn),
and skip with the reason elsewhere.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from backend_cases import backend_or_skip as _environment_or_skip

import revseq
from revseq.ops.reference import reverse_sequence_model

_TYPES = {"float32": onnx.TensorProto.FLOAT, "int32": onnx.TensorProto.INT32}
_TYPES["int64"] = onnx.TensorProto.INT64
_TYPES["float16"] = onnx.TensorProto.FLOAT16


@pytest.mark.backend
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_rknn_s_own_reverse_sequence_is_wrong_where_the_inlined_one_is_exact(dtype):
    _environment_or_skip("rknn")
    model = reverse_sequence_model([6, 3, 4], _TYPES[dtype], batch_axis=1, time_axis=0)
    inlined = revseq.check(model, revseq.inline(model), backend="rknn", trials=2)
    assert inlined.ok and inlined.exercised, inlined
    native = revseq.check(model, model, backend="rknn", trials=2)  # its own op
    assert not native.ok and "lengths [0" in str(native.nodes[0]), native


def test_rknn_s_profile_keeps_it_out_of_the_default_and_names_what_it_lacks():
    from revseq.ops.targets import TARGETS

    profile = TARGETS["rknn"]
    assert profile.yields and profile.native is False
    assert "rknn" not in {m.name for m in TARGETS["portable"].members}
    # float32 is held as float16 there: GatherND alone gives back what it holds.
    assert profile.moves("GatherND", "float32") and not profile.moves("Gather", "float32")
    assert "float32 held as float16" in profile.description
    for dtype in ("int32", "float32"):
        model = reverse_sequence_model([6, 3, 4], _TYPES[dtype], batch_axis=1, time_axis=0)
        inlined = revseq.inline(model, target="rknn")
        assert "ReverseSequence" not in {n.op_type for n in inlined.graph.node}
    float16 = reverse_sequence_model([6, 3, 4], _TYPES["float16"], batch_axis=1, time_axis=0)
    with pytest.raises(revseq.RevseqError, match="moves no float16"):
        revseq.inline(float16, target="rknn")


@pytest.mark.backend
@pytest.mark.parametrize("layout", [(1, 0), (0, 1)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "int64", "bool"])
def test_rknn_s_own_target_is_exact_there_for_the_types_it_moves(dtype, layout):
    _environment_or_skip("rknn")
    batch_axis, time_axis = layout
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = reverse_sequence_model([6, 3, 4], elem, batch_axis=batch_axis, time_axis=time_axis)
    report = revseq.check(model, revseq.inline(model, target="rknn"), backend="rknn", trials=2)
    assert report.ok and report.exercised, report


def test_rknn_builds_for_the_sizes_it_runs_at_so_its_symbolic_dims_are_its_static_ones():
    """Shape arithmetic is folded at its build: the form probes, run at fixed sizes, say
    which forms hold with symbolic dims (int64 index arithmetic: its int32 Mul fails)."""
    from revseq.ops.targets import TARGETS
    from revseq.probe.backend import FOLDED_AT_BUILD

    profile = TARGETS["rknn"]
    assert profile.static_ops | FOLDED_AT_BUILD == profile.dynamic_ops
    assert {"gather_rows", "gather_nd"} <= profile.forms["dynamic"]
    assert "gather_rows@int32" not in profile.forms["dynamic"]
    symbolic = reverse_sequence_model(
        ["T", "B", 4], _TYPES["int32"], batch_axis=1, time_axis=0
    )
    used = {n.op_type for n in revseq.inline(symbolic, target="rknn").graph.node}
    assert "Range" in used and "ReverseSequence" not in used


@pytest.mark.backend
@pytest.mark.parametrize(
    "layout", [(["T", "B", 4], 1, 0), (["B", "T", 4], 0, 1), (["T", "B"], 1, 0)], ids=str
)
@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "int64", "bool"])
def test_rknn_s_own_target_is_exact_there_with_symbolic_dims(dtype, layout):
    _environment_or_skip("rknn")
    dims, batch_axis, time_axis = layout
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = reverse_sequence_model(dims, elem, batch_axis=batch_axis, time_axis=time_axis)
    report = revseq.check(model, revseq.inline(model, target="rknn"), backend="rknn", trials=2)
    assert report.ok and report.exercised, report
    held_narrower = "exact to rknn's float16 storage of float32" in str(report)
    assert held_narrower == (dtype == "float32"), report


def test_what_a_backend_holds_narrower_is_rounded_as_ieee_converts():
    """RKNN holds float32 as float16: to nearest, a NaN's sign and top payload kept, quiet."""
    from revseq.equivalence.inputs.values import held

    bits = [0x7FC00123, 0xFF800123, 0x3F800001, 0x00000001, 0xFF800000, 0x80000000]
    x = np.array(bits, np.uint32).view(np.float32)
    got = held({"x": x, "n": np.arange(3)}, {"float32": "float16"})
    assert [hex(v) for v in got["x"].view(np.uint32)] == [
        "0x7fc00000", "0xffc00000", "0x3f800000", "0x0", "0xff800000", "0x80000000"
    ]  # fmt: skip
    assert got["n"].tobytes() == np.arange(3).tobytes()  # other types as given


def test_rknn_refuses_up_front_the_int32_arithmetic_its_build_crashes_on():
    from revseq.backends import rknn

    symbolic = reverse_sequence_model(["T", "B", 4], _TYPES["float32"])
    with pytest.raises(ValueError, match=r"int32 Less .*target='rknn'"):
        rknn.ADAPTER.prepare(revseq.inline(symbolic))  # the default: int32 index
    ids = reverse_sequence_model(["T", "B"], _TYPES["int32"])
    assert rknn._int32_arithmetic(revseq.inline(ids, target="rknn")) is None


_INT32_LENGTHS = [([5, 4], 1, 0), ([4, 5, 3], 0, 1), ([5, 4, 2, 3], 1, 0)]
"""TensorFlow's flavour at static dims: int32 lengths (the revseq domain)."""


@pytest.mark.parametrize(("dims", "batch_axis", "time_axis"), _INT32_LENGTHS)
def test_rknn_s_target_widens_int32_lengths_before_any_arithmetic(dims, batch_axis, time_axis):
    """Its build crashes on an int32 Less: the lengths are cast to int64, then clamped."""
    from revseq.backends import rknn

    model = reverse_sequence_model(
        dims, _TYPES["float32"], batch_axis=batch_axis, time_axis=time_axis,
        domain="revseq", lens_elem=onnx.TensorProto.INT32,
    )  # fmt: skip
    assert rknn._int32_arithmetic(revseq.inline(model, target="rknn")) is None


@pytest.mark.backend
@pytest.mark.parametrize(("dims", "batch_axis", "time_axis"), _INT32_LENGTHS[1:])
def test_rknn_s_target_is_exact_there_with_int32_lengths(dims, batch_axis, time_axis):
    _environment_or_skip("rknn")
    model = reverse_sequence_model(
        dims, _TYPES["int32"], batch_axis=batch_axis, time_axis=time_axis,
        domain="revseq", lens_elem=onnx.TensorProto.INT32,
    )  # fmt: skip
    report = revseq.check(model, revseq.inline(model, target="rknn"), backend="rknn", trials=2)
    assert report.ok and report.exercised, report


@pytest.mark.backend
def test_a_model_past_rknn_s_opsets_is_written_at_the_latest_it_loads():
    """RKNN loads no model past opset 19: its target's output is converted down."""
    _environment_or_skip("rknn")
    model = reverse_sequence_model([6, 3, 4], _TYPES["int32"], opset=21)
    inlined = revseq.inline(model, target="rknn")
    assert {o.domain: o.version for o in inlined.opset_import}[""] == 19
    report = revseq.check(model, inlined, backend="rknn", trials=2)
    assert report.ok and report.exercised, report


@pytest.mark.backend
def test_rknn_s_int64_rounding_at_rank_4_is_said_with_the_difference():
    """RKNN moves int64 of rank 4 through float64: the report says so beside the values."""
    _environment_or_skip("rknn")
    model = reverse_sequence_model([5, 2, 3, 2], _TYPES["int64"], batch_axis=1, time_axis=0)
    x = (np.int64(2**53) + np.arange(60, dtype=np.int64) * 1413).reshape(5, 2, 3, 2)
    lens = np.array([5, 3], np.int64)
    inlined = revseq.inline(model, target="rknn")
    report = revseq.check(model, inlined, backend="rknn", inputs={"x": x, "lens": lens})
    assert not report.ok
    assert "through float64: values from 2^53 up come back rounded" in report.message
