"""x2paddle's conversion to a Paddle inference model, in an environment of its own.

x2paddle 1.6 needs onnx 1.17 (it reads ``onnx.version``): it is installed in an
environment that ``REVSEQ_X2PADDLE_PYTHON`` names (docs/backends.md#x2paddle), and
``runner.py`` is served there (``_foreign.py``).
"""

from __future__ import annotations

__all__ = ["ADAPTER"]

from revseq.backends import _foreign

ADAPTER = _foreign.served_adapter(
    "x2paddle", "REVSEQ_X2PADDLE_PYTHON", "x2paddle", "x2paddle.convert"
)
