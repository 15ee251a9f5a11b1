"""x2paddle with PaddlePaddle: its own target at static dims, and the types it carries.

They run where ``REVSEQ_X2PADDLE_PYTHON`` names its environment
(docs/backends.md#x2paddle), and skip with the reason elsewhere.
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


@pytest.mark.backend
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_the_default_is_exact_on_x2paddle_with_static_dims(dtype):
    _environment_or_skip("x2paddle")
    model = reverse_sequence_model([6, 3, 4], _TYPES[dtype], batch_axis=1, time_axis=0)
    report = revseq.check(model, revseq.inline(model), backend="x2paddle", trials=2)
    assert report.ok and report.exercised, report


def test_x2paddle_s_profile_keeps_it_to_static_dims_and_out_of_the_default():
    from revseq.ops.targets import TARGETS

    profile = TARGETS["x2paddle"]
    assert profile.yields and profile.native is False
    assert "x2paddle" not in {m.name for m in TARGETS["portable"].members}
    assert profile.forms["dynamic"] == frozenset()
    static = reverse_sequence_model([6, 3, 4], _TYPES["float32"], batch_axis=1, time_axis=0)
    used = {n.op_type for n in revseq.inline(static, target="x2paddle").graph.node}
    assert "ReverseSequence" not in used and "Where" not in used  # its Where broadcasts not
    symbolic = reverse_sequence_model(
        ["T", "B", 4], _TYPES["float32"], batch_axis=1, time_axis=0
    )
    with pytest.raises(revseq.StrategyError, match="declare static input shapes"):
        revseq.inline(symbolic, target="x2paddle")


_X2PADDLE_TYPES = (
    "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "int64", "bool",
    "complex64", "complex128",
)  # fmt: skip
"""What x2paddle's profile says its gathers move: every type of the op but float16 (its
converter fails), uint32, uint64 (Paddle has none), bfloat16 and string."""


@pytest.mark.backend
@pytest.mark.parametrize("layout", [(1, 0), (0, 1)], ids=str)
@pytest.mark.parametrize("dtype", _X2PADDLE_TYPES)
def test_x2paddle_s_own_target_is_exact_there_for_every_type_it_carries(dtype, layout):
    _environment_or_skip("x2paddle")
    batch_axis, time_axis = layout
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = reverse_sequence_model([6, 3, 4], elem, batch_axis=batch_axis, time_axis=time_axis)
    inlined = revseq.inline(model, target="x2paddle")
    report = revseq.check(model, inlined, backend="x2paddle", trials=2)
    assert report.ok and report.exercised, report


def test_x2paddle_s_profile_lists_the_types_its_tests_run():
    from revseq.ops.targets import TARGETS

    assert {t for t in _X2PADDLE_TYPES if TARGETS["x2paddle"].has(t)} == set(_X2PADDLE_TYPES)
    assert not TARGETS["x2paddle"].has("float16")
