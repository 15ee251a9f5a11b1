"""Decompositions of ReverseSequence into standard ONNX ops.

- ``ReverseSequence``: an onnxscript function (domain ``revseq``) defining the op.
- ``forms``: the rank-specialised forms the passes emit, one per strategy.
- ``reference``: a numpy reference implementation.
"""

from __future__ import annotations

__all__ = ["REVSEQ_OPSET", "ReverseSequence", "reverse_sequence"]

from revseq.ops.function import REVSEQ_OPSET, ReverseSequence
from revseq.ops.reference import reverse_sequence
