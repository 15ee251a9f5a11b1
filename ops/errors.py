"""Exception types raised by revseq, one per kind of problem, all under RevseqError.

The two that report a model a pass cannot take are also onnx-ir PreconditionErrors,
which a pass raises from ``requires``; an ``ir.passes.PassManager`` wraps whatever a pass
raises in its own ``PassError`` ("An error occurred at step 0"), with revseq's error as
the ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "RevseqError",
    "InvalidNodeError",
    "UnsupportedOpsetError",
    "StrategyError",
    "ModelLoadError",
    "ModelSaveError",
    "CheckError",
    "one_line",
]

import onnx_ir as ir


class RevseqError(Exception):
    """Base class of every error revseq raises on purpose."""


class InvalidNodeError(RevseqError, ir.passes.PreconditionError):
    """A ReverseSequence node violates the operator's specification."""


class UnsupportedOpsetError(RevseqError, ir.passes.PreconditionError):
    """The model's opset cannot host the operator or its decomposition."""


class StrategyError(RevseqError):
    """No decomposition fits the requested strategy, target or opset."""


class ModelLoadError(RevseqError):
    """A file could not be read as a valid ONNX model."""


class ModelSaveError(RevseqError):
    """A model could not be written to the requested path."""


class CheckError(RevseqError):
    """An equivalence check could not be run (not: it found a difference)."""


def one_line(error: BaseException, limit: int | None = 300, *, typed: bool = False) -> str:
    """An error as one line of a message, the one rendering every layer uses.

    Whitespace is collapsed (backends and the onnx checker print pages of frames and
    context), the text cut at ``limit`` characters (None: not cut, for revseq's own
    messages), and the type put first when ``typed`` (a backend's own exception type
    says what went wrong).
    """
    text = " ".join(str(error).split()) or type(error).__name__
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{type(error).__name__}: {text}" if typed else text
