"""``revseq demo``: inline every bundled sample model, check it, and print a table."""

from __future__ import annotations

__all__ = ["run_demo"]

import dataclasses
import logging
import pathlib
import time
from collections.abc import Callable

import onnx
import onnx_ir as ir

import revseq
from revseq import files
from revseq.equivalence import check
from revseq.info import count_nodes
from revseq.ops.function import definition
from revseq.ops.vocabulary import REVSEQ_DOMAIN, default_opset

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DemoRow:
    """The outcome for one model."""

    model: str
    replaced: int
    ops_added: int
    check: str
    seconds: float


def runnable_reference(model: ir.Model) -> onnx.ModelProto:
    """The model as a proto that onnxruntime can run as the reference.

    onnxruntime has no kernel for the ``revseq`` domain op, so a model that uses it gets
    the op's definition (revseq's onnxscript function) attached as a model-local function.
    """
    proto = ir.to_proto(model)
    if not any(op.domain == REVSEQ_DOMAIN for op in proto.opset_import):
        return proto
    opset = default_opset(proto)
    proto.functions.append(definition(opset))
    return proto


def _demo_one(path: pathlib.Path, *, trials: int, seed: int) -> DemoRow:
    started = time.perf_counter()
    model = files.load_model(path)
    before = count_nodes(model)
    reference = runnable_reference(model)
    revseq.inline(model)
    after = count_nodes(model)
    report = check(reference, ir.to_proto(model), trials=trials, seed=seed)
    replaced = before[0] - after[0]
    return DemoRow(
        model=path.name,
        replaced=replaced,
        ops_added=after[1] - before[1] + replaced,
        check="bit-identical"
        if report.verdict == "OK"
        else f"{report.verdict}: {report.message}",
        seconds=time.perf_counter() - started,
    )


def run_demo(
    folder: pathlib.Path | None = None,
    *,
    trials: int = 3,
    seed: int = 0,
    progress: Callable[[str], None] = logger.info,
) -> tuple[str, bool]:
    """Inline and check each ``.onnx`` in ``folder`` (default: the bundled models).

    Returns:
        The table as Markdown, and whether every model checked bit-identical.
    """
    if folder is None:
        from revseq.models import FOLDER

        folder = FOLDER
    paths = sorted(folder.glob("*.onnx"))
    if not paths:
        raise revseq.ModelLoadError(f"{folder}: no .onnx models in this folder")
    rows = []
    for path in paths:
        progress(f"demo: {path.name}")
        rows.append(_demo_one(path, trials=trials, seed=seed))
    lines = [
        "| model | nodes replaced | ops added | check | time |",
        "|---|---|---|---|---|",
        *(
            f"| {r.model} | {r.replaced} | {r.ops_added} | {r.check} | {r.seconds:.2f} s |"
            for r in rows
        ),
    ]
    return "\n".join(lines), all(r.check == "bit-identical" for r in rows)
