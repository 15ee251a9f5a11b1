"""The root of revseq's errors, the rewriting's own, and the one rendering of an error.

Every error revseq raises on purpose is a :class:`RevseqError`. The rewriting's kinds
are here (a strategy or target that fits nothing, a bad profile, an invalid node, an
opset that cannot host the op), and the check's (:class:`CheckError`: a check that
cannot be run); the files and the adapters define their own (``revseq.files``,
``revseq.backends``), and the command line turns any of them into one line. The
rewriting's node errors are also onnx-ir ``PreconditionError``s, which a pass raises
from ``requires``; an ``ir.passes.PassManager`` wraps whatever a pass raises in its own
``PassError``, with revseq's error as the ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "CheckError",
    "InvalidNodeError",
    "ProfileError",
    "RevseqError",
    "StrategyError",
    "UnsupportedOpsetError",
    "DISTRIBUTION",
    "install_hint",
    "one_line",
    "stable_line",
]

import re

import onnx_ir as ir

DISTRIBUTION = "onnx-revseq"
"""The name revseq is published under (``revseq`` on the index is another project)."""


def install_hint(extra: str) -> str:
    """How to install one of revseq's extras: from a clone, and from the index."""
    return f'pip install ".[{extra}]" in a clone, or pip install "{DISTRIBUTION}[{extra}]"'


class RevseqError(Exception):
    """Base class of every error revseq raises on purpose."""


class StrategyError(RevseqError):
    """No decomposition fits the requested strategy, target or opset."""


class ProfileError(RevseqError):
    """A profile file names something revseq does not know, or is malformed."""


class InvalidNodeError(RevseqError, ir.passes.PreconditionError):
    """A ReverseSequence node violates the operator's specification."""


class UnsupportedOpsetError(RevseqError, ir.passes.PreconditionError):
    """The model's opset cannot host the operator or its decomposition."""


class CheckError(RevseqError):
    """An equivalence check could not be run (not: it found a difference)."""


def one_line(error: BaseException, limit: int | None = 300, *, typed: bool = False) -> str:
    """An error as one line of a message, the one rendering every layer uses.

    Whitespace is collapsed (backends and the onnx checker print pages of frames and
    context) and the type put first when ``typed`` (a backend's own exception type says
    what went wrong). A text longer than ``limit`` characters (None: never cut, for
    revseq's own messages) keeps its start and its end, the middle elided: runtimes
    put where they failed first and why last ("... Status Message: sequence_lens shape
    must be {batch_size}").
    """
    text = " ".join(str(error).split()) or type(error).__name__
    if limit is not None and len(text) > limit:
        head = limit // 3
        tail = limit - head - 3
        text = f"{text[:head]} … {text[-tail:]}"
    return f"{type(error).__name__}: {text}" if typed else text


_RUN_SPECIFIC = (
    (re.compile(r"/tmp/tmp\w+"), "<tmp>"),
    (re.compile(r"/tmp/revseq-[\w-]+"), "<tmp>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "localhost"),
    (re.compile(r"\[\d\d:\d\d:\d\d\.\d+\] "), ""),  # a runtime's log time
)


def stable_line(line: str) -> str:
    """A failure line without the names of one run (``_RUN_SPECIFIC``).

    A probe's or a copy floor's reason then reads the same from run to run.
    """
    for pattern, replacement in _RUN_SPECIFIC:
        line = pattern.sub(replacement, line)
    return line
