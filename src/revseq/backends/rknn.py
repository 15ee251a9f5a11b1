"""Rockchip's RKNN-Toolkit2 (NPU simulator, rk3588), in an environment of its own.

The toolkit pins numpy 1, onnx 1.18 and protobuf 4, which revseq's environment cannot
hold: it is installed in an environment of its own that ``REVSEQ_RKNN_PYTHON`` names
(docs/backends.md says how), and runs there (``foreign/rknn.py``).
"""

from __future__ import annotations

import onnx

from revseq.backends import _foreign
from revseq.backends._adapter import lowest_ir

DISTRIBUTION = "rknn-toolkit2"
EXTRA = None  # no extra: an environment of its own (ENVIRONMENT)
IMPORTS = ()
SURVIVES_FAILURES = True
"""Its failures are Python errors in its own process: the worker is kept after one."""
BUILDS_FOR_SHAPES = True
"""It builds the model for the input sizes it is run at: symbolic dims are static there,
shape arithmetic folded at build (``revseq.measure.probe.FOLDED_AT_BUILD``)."""
STORAGE = {"float32": "float16"}
"""With quantisation off the NPU holds every float32 tensor as float16: the truth there is
the reversal of what it holds (``revseq.equivalence.values.held``)."""
ENVIRONMENT = "REVSEQ_RKNN_PYTHON"
"""The variable naming the interpreter of the environment the toolkit is installed in."""


def missing_requirement() -> str | None:
    """Why RKNN cannot run here: its environment is not named, or lacks the toolkit."""
    return _foreign.missing("rknn", ENVIRONMENT, "rknn.api")


def version() -> str:
    """The toolkit's version, as installed in its environment."""
    return _foreign.version(ENVIRONMENT, DISTRIBUTION)


CRASHING_INT32 = frozenset({"Less", "Mul", "Where"})
"""Ops whose int32 operands kill RKNN's build (SIGFPE, SIGSEGV: ``Meet unsupported tensor
dtype in Mul``): refused before it runs, its int64 forms named."""


def prepare(model: onnx.ModelProto):
    """Run ``model`` in the toolkit's environment; returns a function of the inputs.

    The model travels with the lowest IR version its opsets allow (onnx 1.18 there).

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
    return _foreign.prepare("rknn", ENVIRONMENT, "rknn.py", lowest_ir(model))


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
