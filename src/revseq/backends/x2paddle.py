"""x2paddle with PaddlePaddle, in an environment of its own.

x2paddle 1.6 needs onnx 1.17 (it reads ``onnx.version``), which revseq's environment
does not hold: it is installed in an environment of its own that
``REVSEQ_X2PADDLE_PYTHON`` names (docs/backends.md says how), and runs there
(``foreign/x2paddle.py``).
"""

from __future__ import annotations

import onnx

from revseq.backends import _foreign
from revseq.backends._adapter import lowest_ir

DISTRIBUTION = "x2paddle"
EXTRA = None  # no extra: an environment of its own (ENVIRONMENT)
IMPORTS = ()
SURVIVES_FAILURES = True
"""Its failures are Python errors in its own process: the worker is kept after one."""
ENVIRONMENT = "REVSEQ_X2PADDLE_PYTHON"
"""The variable naming the interpreter of the environment x2paddle is installed in."""


def missing_requirement() -> str | None:
    """Why x2paddle cannot run here: its environment is not named, or lacks it."""
    return _foreign.missing("x2paddle", ENVIRONMENT, "x2paddle.convert")


def version() -> str:
    """x2paddle's version, as installed in its environment."""
    return _foreign.version(ENVIRONMENT, DISTRIBUTION)


def prepare(model: onnx.ModelProto):
    """Convert and run ``model`` in x2paddle's environment.

    The model travels with the lowest IR version its opsets allow (onnx 1.17 there).
    """
    return _foreign.prepare("x2paddle", ENVIRONMENT, "x2paddle.py", lowest_ir(model))
