"""LiteRT (TFLite): onnx2tf's conversion, run by its interpreter, in an environment of its own.

onnx2tf 2.x needs Python 3.12 and pins onnxruntime 1.26: it is installed with
ai-edge-litert in an environment that ``REVSEQ_LITERT_PYTHON`` names
(docs/backends.md#litert), and ``runner.py`` is served there (``_foreign.py``).
"""

from __future__ import annotations

__all__ = ["ADAPTER"]

from revseq.backends import _foreign

ADAPTER = _foreign.served_adapter(
    "litert",
    "REVSEQ_LITERT_PYTHON",
    "ai-edge-litert",
    "onnx2tf, ai_edge_litert.interpreter",
    converter="onnx2tf",
)
