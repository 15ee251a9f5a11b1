"""The domains revseq's models use, defined once."""

from __future__ import annotations

__all__ = ["FUNCTION_DOMAIN", "REVSEQ_DOMAIN"]

REVSEQ_DOMAIN = "revseq"
"""Domain of the generalised op: any distinct axes, int32 or int64 lengths."""

FUNCTION_DOMAIN = "revseq.inline"
"""Domain of the model-local functions ``inline(..., as_function=True)`` emits."""
