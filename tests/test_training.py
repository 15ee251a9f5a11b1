"""Training through an inlined model: the gradient w.r.t. the data is exact.

ReverseSequence is a permutation that is its own inverse, so the gradient of its output
w.r.t. its input is ReverseSequence of the output gradient. onnx2torch turns the inlined
model into a torch module; torch's autograd must give exactly that, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import revseq
from revseq import backends
from revseq.ops.reference import reverse_sequence


def one_node(dims, batch_axis: int, time_axis: int):
    node = helper.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis
    )
    graph = helper.make_graph(
        [node],
        "rs",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, dims),
            helper.make_tensor_value_info("lens", TensorProto.INT64, [dims[batch_axis]]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.mark.backend
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize(("batch_axis", "time_axis"), [(1, 0), (0, 1)])
def test_gradient_is_reverse_sequence_of_the_output_gradient(batch_axis, time_axis, dynamic):
    if not backends.installed("onnx2torch"):
        pytest.skip('onnx2torch is not installed (pip install "onnx-revseq[onnx2torch]")')
    import torch

    from revseq.backends.onnx2torch import convert

    shape = [6, 4, 3] if time_axis == 0 else [4, 6, 3]
    dims = list(shape)
    if dynamic:
        dims[time_axis], dims[batch_axis] = "T", "B"
    module = convert(revseq.inline(one_node(dims, batch_axis, time_axis)))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    # Output gradients without -0.0: autograd accumulates into zeros, and 0 + -0 is +0.
    grad = rng.standard_normal(shape).astype(np.float32)
    lens = np.array([0, 1, 6, 9], dtype=np.int64)  # 9 > T: clamped like every form

    data = torch.from_numpy(x).requires_grad_()
    out = module(data, torch.from_numpy(lens))
    out.backward(torch.from_numpy(grad))

    expected_out = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    expected_grad = reverse_sequence(grad, lens, batch_axis=batch_axis, time_axis=time_axis)
    assert out.detach().numpy().tobytes() == expected_out.tobytes()
    assert data.grad is not None
    assert data.grad.numpy().tobytes() == expected_grad.tobytes()
