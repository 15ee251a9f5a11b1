"""Passes that inline ReverseSequence into standard ops, simplify it, and fuse it back.

All are onnx-ir in-place passes: they compose with ``onnx_ir.passes.PassManager``.
"""

from __future__ import annotations

__all__ = [
    "STRATEGIES",
    "InlineReverseSequencePass",
    "RestoreReverseSequencePass",
    "SimplifyReverseSequencePass",
]

from revseq.passes._strategy import STRATEGIES
from revseq.passes.inline import InlineReverseSequencePass
from revseq.passes.restore import RestoreReverseSequencePass
from revseq.passes.simplify import SimplifyReverseSequencePass
