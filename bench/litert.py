"""LiteRT through onnx2tf: each small case's outputs, exact or not, and what XNNPACK takes.

For each small case (both layouts, constant and run-time lengths, static and symbolic
dims, float32 and int32) three outputs are converted by onnx2tf and run by LiteRT's
interpreter: the op kept (onnx2tf writes LiteRT's own ``REVERSE_SEQUENCE``), the
default, and ``--target litert``. Each is checked against the truth (``revseq check
--backend litert``: bit for bit), and the ``.tflite``'s ops are listed by who runs them:
the XNNPACK delegate the interpreter applies by default, or LiteRT's own kernels.

    python -m bench.litert --write docs/litert.md

It needs LiteRT's environment (``REVSEQ_LITERT_PYTHON``: docs/backends.md#litert).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import sys
from collections.abc import Sequence

import numpy as np
import onnx

import revseq
from bench.pages import write_measured_page
from revseq import backends
from revseq.ops.reference import reverse_sequence_model

_TYPES = {"float32": onnx.TensorProto.FLOAT, "int32": onnx.TensorProto.INT32}
_OUTPUTS = ("the op kept", "default", "--target litert")
"""The outputs each case is run as (the target at the case's sizes where they are
symbolic, as ``--overwrite-input-shape`` fixes them)."""
CASES = list(
    itertools.product(["time-major", "batch-major"], ["constant", "run-time"],
                      ["static", "symbolic"], ["float32", "int32"])
)  # fmt: skip
"""(layout, lengths, dims, element type): the small cases."""


def case_model(layout: str, lengths: str, dims: str, dtype: str) -> onnx.ModelProto:
    """One reversal of [T, B, 4] (time-major) or [B, T, 4] data, T 6 and B 3."""
    batch_axis, time_axis = (1, 0) if layout == "time-major" else (0, 1)
    sizes: list[int | str] = [0, 0, 4]
    sizes[batch_axis], sizes[time_axis] = 3, 6
    if dims == "symbolic":
        sizes[batch_axis], sizes[time_axis] = "B", "T"
    constant = np.array([6, 0, 2], np.int64) if lengths == "constant" else None
    return reverse_sequence_model(
        sizes, _TYPES[dtype], batch_axis=batch_axis, time_axis=time_axis, lens=constant
    )


_SIZES = {"T": 6, "B": 3}
"""The sizes a symbolic case runs at: its constant lengths are three."""


def _fixed(model: onnx.ModelProto) -> dict[str, list[int]]:
    """The data's shape at ``_SIZES``: what ``--overwrite-input-shape`` would fix."""
    dims = model.graph.input[0].type.tensor_type.shape.dim
    return {"x": [d.dim_value or _SIZES[d.dim_param] for d in dims]}


def _output(model: onnx.ModelProto, which: str) -> onnx.ModelProto:
    if which == "the op kept":
        return model
    if which == "default":
        return revseq.inline(model)
    return revseq.inline(model, target="litert", input_shapes=_fixed(model))


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    node = model.graph.node[0]
    batch_axis = next(a.i for a in node.attribute if a.name == "batch_axis")
    shape = (3, 6, 4) if batch_axis == 0 else (6, 3, 4)
    elem = model.graph.input[0].type.tensor_type.elem_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    feeds = {"x": np.arange(72).reshape(shape).astype(dtype)}
    if len(model.graph.input) > 1:
        feeds["lens"] = np.array([6, 0, 2], np.int64)
    return feeds


def _ops(delegation: dict[str, list[str]], where: str) -> str:
    counted = collections.Counter(delegation.get(where, ()))
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(counted.items())) or "-"


def row(case: tuple[str, str, str, str], which: str) -> list[str]:
    """One table row: the case, the output, its verdict, its ops by who runs them."""
    model = case_model(*case)
    try:
        candidate = _output(model, which)
    except revseq.RevseqError as e:
        return [*case, which, f"refused: {e}", "", "", ""]
    symbolic = case[2] == "symbolic"
    sizes = {"dims": _SIZES} if symbolic else {}
    if symbolic and which == "--target litert":  # inlined at fixed shapes, run there
        sizes = {"input_shapes": _fixed(model)}
    try:
        report = revseq.check(model, candidate, backend="litert", trials=2, **sizes)
        verdict = "exact" if report.ok else f"DIFFERENT: {report.message}"
    except revseq.RevseqError as e:
        verdict = f"fails: {' '.join(str(e).split())[:160]}"
    try:
        run = backends.get("litert").prepare(candidate)
        run(_feeds(model))
        taken = dict(run.delegation or {})
    except revseq.RevseqError:
        return [*case, which, verdict, "", "", ""]
    count = str(sum(map(len, taken.values())))
    return [*case, which, verdict, count, _ops(taken, "xnnpack"), _ops(taken, "litert")]


def main(argv: Sequence[str] | None = None) -> int:
    """Run every case's outputs on LiteRT; print or write the page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="PAGE", help="write the page (docs/litert.md)")
    args = parser.parse_args(argv)
    why = backends.unavailable("litert")
    if why is not None:
        print(f"bench.litert: {why}", file=sys.stderr)
        return 2
    head = [
        "layout", "lengths", "dims", "type", "output", "on LiteRT", "ops",
        "XNNPACK takes", "LiteRT's kernels run",
    ]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case, which in itertools.product(CASES, _OUTPUTS):
        cells = row(case, which)
        print(" | ".join(cells), file=sys.stderr, flush=True)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    table = "\n".join(lines)
    if not args.write:
        print(table)
        return 0
    body = (
        "Each small case (T 6, B 3, 4 features; lengths 6, 0 and 2) with the op kept, "
        "the default output and LiteRT's own target, converted by onnx2tf (every input "
        "keeping its layout) and run by LiteRT's interpreter with its default XNNPACK "
        "delegate; a symbolic case runs at T 6 and B 3, where `--target litert` is "
        "inlined with its shapes fixed (`--overwrite-input-shape`). "
        '"on LiteRT" is `revseq check REF CAND --backend litert` (two '
        "trials, bit for bit against onnxruntime); the ops are the `.tflite`'s, by "
        "who runs them at these sizes.\n\n" + table
    )
    litert = backends.get("litert")
    write_measured_page(
        args.write,
        "LiteRT: the small cases, and what XNNPACK takes",
        "python -m bench.litert --write docs/litert.md",
        f"{litert.label}",
        body,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
