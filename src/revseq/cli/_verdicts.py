"""A check's verdict as it leaves a command: its exit code, what that means, its JSON.

Every command that checks (``check``, ``check --per-node``, ``inline --check``,
``restore --check``) returns the same exit code for the same verdict, and ``--json``
prints the verdict as one strict JSON document a script or CI gates on.
"""

from __future__ import annotations

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CODES",
    "EXIT_DIFFERENT",
    "EXIT_INCONCLUSIVE",
    "EXIT_MEANINGS",
    "EXIT_OK",
    "EXIT_RUNTIME_DIFFERS",
    "verdict_json",
    "versions",
]

import importlib.metadata
import json
import math

import revseq

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3
EXIT_RUNTIME_DIFFERS = 4

EXIT_CODES = {
    "OK": EXIT_OK,
    "DIFFERENT": EXIT_DIFFERENT,
    "INCONCLUSIVE": EXIT_INCONCLUSIVE,
    "RUNTIME-DIFFERS": EXIT_RUNTIME_DIFFERS,
}
"""A check's verdict as the exit code every command that checks returns for it."""

EXIT_MEANINGS = {
    EXIT_OK: "no difference, and some reversal of 2 or more steps proved it",
    EXIT_DIFFERENT: "revseq's output differs from the reference",
    EXIT_BAD_INPUT: "bad usage, bad input, or a check that could not run",
    EXIT_INCONCLUSIVE: "no difference, but no reversal of 2 or more steps happened: "
    "it cannot tell a reversal from the identity",
    EXIT_RUNTIME_DIFFERS: "revseq's part is exact, but the runtime's own computation (its "
    "kernels for the model's ops, or a type it holds narrower) differs from onnxruntime's "
    "beyond the tolerance",
}
"""What each exit code means (``--help``, ``--json``)."""


def versions() -> dict[str, str]:
    """The versions a verdict was reached with (``--json``)."""
    found = {"revseq": revseq.__version__}
    for name in ("onnx", "onnx-ir", "onnxscript", "onnxruntime", "numpy"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def verdict_json(verdict: str, /, **fields: object) -> str:
    """One JSON document: the verdict, its exit code and meaning, ``fields``, versions.

    Strict JSON: a value no JSON number holds (an infinite error) is written as a string.
    """
    code = EXIT_CODES.get(verdict, EXIT_BAD_INPUT)
    fields.pop("verdict", None)  # a report's own, the same
    document = {
        "verdict": verdict,
        "exit_code": code,
        "exit_meaning": EXIT_MEANINGS[code],
        **fields,
        "versions": versions(),
    }
    return json.dumps(_strict(document), indent=2, default=str, allow_nan=False)


def _strict(value: object) -> object:
    """``value`` with every float JSON cannot hold (inf, NaN) as its string."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value
