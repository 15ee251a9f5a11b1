"""An earlier install of revseq beside this one: ``--before PYTHON`` on the pages.

A page shows what changed by running the earlier revseq in its own interpreter (an
environment with that version installed) on the same models, in the same run.
"""

from __future__ import annotations

__all__ = ["add_before_options", "inlined_before"]

import argparse
import json
import pathlib
import subprocess
import tempfile
from collections.abc import Mapping, Sequence

import onnx

from revseq.errors import RevseqError

_INLINE = (
    "import json, sys, onnx, revseq\n"
    "model, out, options = sys.argv[1:]\n"
    "onnx.save(revseq.inline(onnx.load(model), **json.loads(options)), out)\n"
)


def add_before_options(parser: argparse.ArgumentParser, beside: str) -> None:
    """``--before PYTHON`` and ``--before-label``: an earlier install's ``beside`` shown too.

    A page written so says the interpreter as ``PYTHON`` (``pages.stamped_command``).
    """
    parser.add_argument(
        "--before",
        metavar="PYTHON",
        help=f"an interpreter with an earlier revseq installed: {beside}",
    )
    parser.add_argument(
        "--before-label", default="an earlier revseq", help="what the page calls it"
    )


def inlined_before(
    python: str,
    model: onnx.ModelProto,
    *,
    target: str | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> onnx.ModelProto:
    """``model`` as the revseq installed for ``python`` inlines it.

    Raises:
        RevseqError: That revseq writes nothing (a refusal, a failure), or ``python``
            does not run; said in one line.
    """
    options = {"target": target, "input_shapes": dict(input_shapes or {}) or None}
    with tempfile.TemporaryDirectory() as folder:
        source, out = pathlib.Path(folder, "model.onnx"), pathlib.Path(folder, "out.onnx")
        onnx.save(model, source)
        command = [python, "-c", _INLINE, str(source), str(out), json.dumps(options)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as e:
            raise RevseqError(f"the earlier revseq's {python} does not run: {e}") from e
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["no message"]
            raise RevseqError(f"the earlier revseq failed: {lines[-1]}")
        return onnx.load(out)
