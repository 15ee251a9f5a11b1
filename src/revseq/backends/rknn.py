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
ENVIRONMENT = "REVSEQ_RKNN_PYTHON"
"""The variable naming the interpreter of the environment the toolkit is installed in."""


def missing_requirement() -> str | None:
    """Why RKNN cannot run here: its environment is not named, or lacks the toolkit."""
    return _foreign.missing("rknn", ENVIRONMENT, "rknn.api")


def version() -> str:
    """The toolkit's version, as installed in its environment."""
    return _foreign.version(ENVIRONMENT, DISTRIBUTION)


def prepare(model: onnx.ModelProto):
    """Run ``model`` in the toolkit's environment; returns a function of the inputs.

    The model travels with the lowest IR version its opsets allow (onnx 1.18 there).
    """
    return _foreign.prepare("rknn", ENVIRONMENT, "rknn.py", lowest_ir(model))
