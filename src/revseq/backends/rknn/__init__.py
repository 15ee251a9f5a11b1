"""Rockchip's RKNN-Toolkit2 simulator (rk3588), in an environment of its own.

The toolkit pins numpy 1, onnx 1.18 and protobuf 4: it is installed in an environment
that ``REVSEQ_RKNN_PYTHON`` names (docs/backends.md#rknn), and ``runner.py`` is served
there (``_foreign.py``).
"""

from __future__ import annotations

__all__ = ["ADAPTER", "CRASHING_INT32"]

import onnx
import onnx.shape_inference

from revseq.backends import _foreign

CRASHING_INT32 = frozenset({"Less", "Mul", "Where"})
"""Ops whose int32 operands kill RKNN's build (SIGFPE, SIGSEGV: ``Meet unsupported tensor
dtype in Mul``): refused before it runs, its int64 forms named."""


def _rknn_prepare(model: onnx.ModelProto):
    """Run ``model`` in the toolkit's environment; returns a function of the inputs.

    Raises:
        ValueError: A node its build crashes on (``CRASHING_INT32``).
    """
    crashing = _int32_arithmetic(model)
    if crashing is not None:
        raise ValueError(
            f"RKNN's build crashes on int32 {crashing.op_type} ({crashing.name!r} reads "
            "int32): inline for it with target='rknn' (--target rknn), whose index "
            "arithmetic is int64"
        )
    return _foreign.served("rknn", "REVSEQ_RKNN_PYTHON", model)


def _int32_arithmetic(model: onnx.ModelProto) -> onnx.NodeProto | None:
    """The first main-graph node of ``CRASHING_INT32`` that reads an int32 value."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # what shape inference cannot read, the build will say
        return None
    graph = inferred.graph
    infos = [*graph.input, *graph.value_info, *graph.output]
    types = {i.name: i.type.tensor_type.elem_type for i in infos}
    types.update((t.name, t.data_type) for t in graph.initializer)
    for node in graph.node:
        if node.op_type in CRASHING_INT32 and any(
            types.get(name) == onnx.TensorProto.INT32 for name in node.input[-2:]
        ):
            return node
    return None


ADAPTER = _foreign.served_adapter(
    "rknn",
    "REVSEQ_RKNN_PYTHON",
    "rknn-toolkit2",
    "rknn.api",
    _rknn_prepare,
    # It builds the model for the input sizes it is run at: symbolic dims are static
    # there, shape arithmetic folded at build. With quantisation off the NPU holds
    # every float32 tensor as float16: the truth there is the reversal of what it holds.
    builds_for_shapes=True,
    storage={"float32": "float16"},
    # Its int64 rounding from rank 4 (measured on the simulator: 2^53 + 1413 came back
    # 2^53 + 1412 at rank 4, every value exact at rank 3) is stated in rknn.json.
    untimed="it simulates the NPU on the host CPU: no NPU's timing",
    simulated=True,
)
