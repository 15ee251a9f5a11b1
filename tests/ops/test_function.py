"""The onnxscript definition of the revseq op, and the numpy reference."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnxruntime as ort
import pytest

from revseq.ops import REVSEQ_OPSET, ReverseSequence, reverse_sequence
from revseq.ops.function import definition

CASES = [
    ((5, 3, 4), 1, 0),
    ((3, 5), 0, 1),
    ((2, 3, 4, 5), 2, -1),
    ((2, 3, 4, 5), -4, 1),
    ((4, 0, 2), 1, 0),
    ((0, 4, 2), 1, 0),
    ((3, 4, 0), 0, 1),
]


def _model(rank: int, batch_axis: int, time_axis: int, lens_type: int) -> onnx.ModelProto:
    dims = [f"d{i}" for i in range(rank)]
    node = oh.make_node(
        "ReverseSequence",
        ["x", "lens"],
        ["y"],
        domain="revseq",
        batch_axis=batch_axis,
        time_axis=time_axis,
    )
    graph = oh.make_graph(
        [node],
        "g",
        [
            oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, dims),
            oh.make_tensor_value_info("lens", lens_type, ["B"]),
        ],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, dims)],
    )
    return oh.make_model(
        graph,
        opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("revseq", 1)],
        functions=[definition(18)],
    )


def test_function_proto_is_in_the_revseq_domain_with_default_attributes():
    proto = ReverseSequence.to_function_proto()
    assert (proto.domain, proto.name) == ("revseq", "ReverseSequence")
    assert REVSEQ_OPSET.domain == "revseq"
    defaults = {a.name: a.i for a in proto.attribute_proto}
    assert defaults == {"batch_axis": 1, "time_axis": 0}
    ops = {n.op_type for n in proto.node}
    assert {"Range", "Less", "Where", "GatherElements"} <= ops


@pytest.mark.parametrize("lens_type", [onnx.TensorProto.INT64, onnx.TensorProto.INT32])
@pytest.mark.parametrize(("shape", "batch_axis", "time_axis"), CASES)
def test_definition_runs_in_onnxruntime_bit_identical(shape, batch_axis, time_axis, lens_type):
    model = _model(len(shape), batch_axis, time_axis, lens_type)
    onnx.checker.check_model(model, full_check=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    time_len = shape[time_axis]
    lens = rng.integers(-2, time_len + 3, shape[batch_axis])
    if lens.size:
        lens[0] = time_len
    lens = lens.astype(onnx.helper.tensor_dtype_to_np_dtype(lens_type))
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (y,) = session.run(None, {"x": x, "lens": lens})
    expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    assert y.shape == expected.shape
    assert y.tobytes() == expected.tobytes()


def test_definition_refuses_opsets_without_reshape_allowzero():
    with pytest.raises(ValueError, match="opset >= 14"):
        definition(13)


def test_reference_matches_the_spec_examples():
    x = np.arange(16, dtype=np.float32).reshape(4, 4).T.copy()
    y = reverse_sequence(x, np.array([4, 3, 2, 1]), batch_axis=1, time_axis=0)
    expected = np.array(
        [[3, 6, 9, 12], [2, 5, 8, 13], [1, 4, 10, 14], [0, 7, 11, 15]], dtype=np.float32
    )
    np.testing.assert_array_equal(y, expected)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    y = reverse_sequence(x, np.array([1, 2, 3, 4]), batch_axis=0, time_axis=1)
    expected = np.array(
        [[0, 1, 2, 3], [5, 4, 6, 7], [10, 9, 8, 11], [15, 14, 13, 12]], dtype=np.float32
    )
    np.testing.assert_array_equal(y, expected)


def test_reference_clamps_invalid_lengths():
    x = np.arange(12).reshape(3, 4)
    assert np.array_equal(
        reverse_sequence(x, np.array([-5, 99, 0]), batch_axis=0, time_axis=1),
        np.array([[0, 1, 2, 3], [7, 6, 5, 4], [8, 9, 10, 11]]),
    )
