"""The domains revseq's models use, defined once."""

from __future__ import annotations

__all__ = ["FUNCTION_DOMAIN", "ONNX_DOMAINS", "REVSEQ_DOMAIN", "default_opset"]

import onnx

ONNX_DOMAINS = frozenset({"", "ai.onnx"})
"""The two spellings of ONNX's own (default) domain."""

REVSEQ_DOMAIN = "revseq"
"""Domain of the generalised op: any distinct axes, int32 or int64 lengths."""

FUNCTION_DOMAIN = "revseq.inline"
"""Domain of the model-local functions ``inline(..., as_function=True)`` emits."""


def default_opset(proto: onnx.ModelProto) -> int:
    """The version of ONNX's own domain the model imports (0 when none)."""
    return next((op.version for op in proto.opset_import if op.domain in ONNX_DOMAINS), 0)
