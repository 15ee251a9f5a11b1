"""Runtimes installed in a Python environment of their own: RKNN-Toolkit2, x2paddle, LiteRT.

Their pins clash with revseq's: the RKNN toolkit (its NPU simulator, rk3588) pins numpy
1, onnx 1.18 and protobuf 4; x2paddle 1.6 needs onnx 1.17 (it reads ``onnx.version``);
onnx2tf 2.x, the converter to LiteRT, needs Python 3.12 and pins onnxruntime 1.26.
Each is installed in an environment of its own that a variable names
(``REVSEQ_RKNN_PYTHON``, ``REVSEQ_X2PADDLE_PYTHON``, ``REVSEQ_LITERT_PYTHON``:
docs/backends.md says how), and its runner (``foreign/rknn.py``, ...) is served there
(``_foreign.py``).
A model travels with the lowest IR version its opsets allow (their onnx is older). Their
failures are Python errors in their own process: the worker is kept after one.
"""

from __future__ import annotations

__all__ = ["CRASHING_INT32", "LITERT", "RKNN", "X2PADDLE"]

import functools

import onnx
import onnx.shape_inference

from revseq.backends import _foreign
from revseq.backends._adapter import Adapter, lowest_ir


def _served(name: str, variable: str, script: str, model: onnx.ModelProto):
    return _foreign.prepare(name, variable, script, lowest_ir(model))


def _versions(variable: str, distribution: str, converter: str | None) -> str:
    """``distribution``'s version, and ``converter``'s in brackets where there is one."""
    own = _foreign.version(variable, distribution)
    if converter is None:
        return own
    return f"{own} ({converter} {_foreign.version(variable, converter)})"


def _foreign_adapter(
    name: str,
    variable: str,
    distribution: str,
    module: str,
    prepare=None,
    converter: str | None = None,
    **fields,
) -> Adapter:
    """The adapter of a runtime served in the environment ``variable`` names.

    ``prepare`` where it checks a model before it travels; ``module`` is what the
    environment must import; ``converter`` the distribution that converts the model for
    ``distribution`` to run, where they differ (its version is said beside).
    """
    return Adapter(
        prepare=prepare or functools.partial(_served, name, variable, f"{name}.py"),
        distribution=distribution,
        extra=None,  # no extra: an environment of its own
        version=functools.partial(_versions, variable, distribution, converter),
        missing_requirement=functools.partial(_foreign.missing, name, variable, module),
        survives_failures=True,
        yields=True,
        **fields,
    )


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
    return _served("rknn", "REVSEQ_RKNN_PYTHON", "rknn.py", model)


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


RKNN = _foreign_adapter(
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
    # Measured on the simulator: 2^53 + 1413 came back 2^53 + 1412 at rank 4, every
    # value exact at rank 3.
    rounding={
        "int64": (
            4,
            "RKNN moves int64 data of rank 4 and more through float64: values from 2^53 "
            "up come back rounded",
        )
    },
    untimed="it simulates the NPU on the host CPU: no NPU's timing",
    simulated=True,
)

X2PADDLE = _foreign_adapter(
    "x2paddle", "REVSEQ_X2PADDLE_PYTHON", "x2paddle", "x2paddle.convert"
)

LITERT = _foreign_adapter(
    "litert",
    "REVSEQ_LITERT_PYTHON",
    "ai-edge-litert",
    "onnx2tf, ai_edge_litert.interpreter",
    converter="onnx2tf",
)
"""onnx2tf's conversion run by LiteRT's interpreter with XNNPACK (``foreign/litert.py``)."""
