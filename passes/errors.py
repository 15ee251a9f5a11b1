"""The errors the passes raise for a model they cannot take.

Both are also onnx-ir ``PreconditionError``s, which a pass raises from ``requires``; an
``ir.passes.PassManager`` wraps whatever a pass raises in its own ``PassError`` ("An
error occurred at step 0"), with revseq's error as the ``__cause__``.
"""

from __future__ import annotations

__all__ = ["InvalidNodeError", "UnsupportedOpsetError"]

import onnx_ir as ir

from revseq.ops.errors import RevseqError


class InvalidNodeError(RevseqError, ir.passes.PreconditionError):
    """A ReverseSequence node violates the operator's specification."""


class UnsupportedOpsetError(RevseqError, ir.passes.PreconditionError):
    """The model's opset cannot host the operator or its decomposition."""
