"""``python -m bench.share --write docs/share.md``: the reversal's share of a model.

What a user pays for inlining is the inlined model's time against the model without
its reversals. Each model (tf2onnx's exports in ``tests/fixtures``, or ``--models``) is
inlined as the README says for each runtime (its own target where it builds for fixed
shapes: ncnn, RKNN, x2paddle; the default elsewhere) and timed against the same model
with every reversal an Identity of its data, side by side in one process (interleaved
rounds, paired medians: ``_timing.paired_medians``), at batch 1. The share is how much
longer the inlined model takes; where the runtime has the op, the original model's
share is shown beside it. A runtime that does not run a model says why in its cell.
"""

from __future__ import annotations

import argparse
import glob
import json
import pathlib
import platform
import signal
import subprocess
import sys
from collections.abc import Sequence

import numpy as np
import onnx

import revseq
from bench.pages import write_measured_page
from revseq import backends
from revseq.equivalence.blame import without_reversals
from revseq.equivalence.inputs import InputGenerator
from revseq.equivalence.inputs.sizes import GivenInputs, dim_key
from revseq.errors import RevseqError, one_line
from revseq.measure._timing import paired_medians
from revseq.passes.graph.scopes import run_time_input_infos

RUNTIMES = (
    "onnxruntime", "opencv", "tract", "onnx2torch", "tvm", "openvino", "mnn", "ncnn",
    "rknn", "x2paddle",
)  # fmt: skip
"""The runtimes the page times where they are installed."""

OWN_TARGET = {"ncnn": "ncnn", "rknn": "rknn", "x2paddle": "x2paddle"}
"""Runtimes that build for fixed shapes: their own target, inlined at the sizes run."""

NATIVE = frozenset({"onnxruntime", "openvino", "mnn"})
"""Runtimes that have the op: the original model is timed too."""

_DEFAULT_MODELS = "tests/fixtures/tf_*.onnx"


def feeds_at_batch_1(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs as the check draws them (finite), every symbolic dim at 1."""
    infos = run_time_input_infos(model)
    symbols = {
        key: 1
        for info in infos
        for axis in range(len(info.type.tensor_type.shape.dim))
        if (key := dim_key(info, axis)) is not None
    }
    generator = InputGenerator(
        [model], seed=seed, specials=False, given=GivenInputs(dims=symbols)
    )
    return generator.trial(0)


def _variants(
    model: onnx.ModelProto, runtime: str, feeds: dict[str, np.ndarray]
) -> dict[str, onnx.ModelProto]:
    """The models timed on ``runtime``: without reversals first, then inlined, native."""
    target = OWN_TARGET.get(runtime)
    shapes = {name: list(np.shape(value)) for name, value in feeds.items()}
    inlined = revseq.inline(model, target=target, input_shapes=shapes if target else None)
    variants = {"identity": without_reversals(model), "inlined": inlined}
    if runtime in NATIVE:
        variants["native"] = model
    return variants


def time_model(
    model: onnx.ModelProto, runtime: str, *, rounds: int, budget_s: float
) -> dict[str, str]:
    """One row's cells: each variant's milliseconds and share, or why it did not run."""
    feeds = feeds_at_batch_1(model)
    try:
        backend = backends.get(runtime)
        variants = _variants(model, runtime, feeds)
        runners = {
            label: backend.prepare(each, repeated=True) for label, each in variants.items()
        }
        calls = {label: (lambda r=r: r(feeds)) for label, r in runners.items()}
        timed = paired_medians(calls, rounds=rounds, budget_s=budget_s)
    except (RevseqError, backends.BackendUnavailableError) as e:
        return {"error": one_line(e).split(" Caused by")[0][:110]}
    cells = {"identity": f"{timed['identity'][0] * 1e3:.3f}"}
    for label in ("inlined", "native"):
        if label in timed:
            seconds, ratio = timed[label]
            cells[label] = f"{seconds * 1e3:.3f} ({(ratio - 1) * 100:+.1f} %)"
    return cells


def page(rows: Sequence[tuple[str, str, dict[str, str]]]) -> str:
    """The table: a row per model and runtime."""
    lines = [
        "| model | runtime | without reversals, ms | inlined, ms (share) | own op, ms "
        "(share) |",
        "|---|---|---|---|---|",
    ]
    for model, runtime, cells in rows:
        if "error" in cells:
            lines.append(f"| {model} | {runtime} | not run: {cells['error']} | | |")
            continue
        lines.append(
            f"| {model} | {runtime} | {cells['identity']} | {cells['inlined']} | "
            f"{cells.get('native', '-')} |"
        )
    return "\n".join(lines)


def _row_in_a_child(path: str, runtime: str, args: argparse.Namespace) -> dict[str, str]:
    """One model's cells on one runtime, timed in a process of its own (a crash ends it)."""
    command = [
        sys.executable, "-m", "bench.share", "--models", path,
        "--runtimes", runtime, "--rounds", str(args.rounds), "--budget", str(args.budget),
        "--rows",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return json.loads(done.stdout.splitlines()[-1])[0][2]
    if done.returncode < 0:
        return {"error": f"killed by {signal.Signals(-done.returncode).name}"}
    return {"error": f"the process ended with status {done.returncode}"}


def _paths(pattern: str) -> list[str]:
    return sorted(p for p in glob.glob(pattern) if "opset" not in p)


def main(argv: Sequence[str] | None = None) -> int:
    """Time every model on every installed runtime; print or write the page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=_DEFAULT_MODELS, help="a glob of .onnx models")
    parser.add_argument("--runtimes", nargs="+", default=RUNTIMES, metavar="NAME")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per row")
    parser.add_argument("--write", metavar="PAGE", help="write the page (docs/share.md)")
    parser.add_argument("--rows", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    installed = [r for r in args.runtimes if backends.unavailable(r) is None]
    if args.rows:  # one runtime, in this process: its rows as JSON
        rows = [
            (pathlib.Path(path).stem, runtime, time_model(
                onnx.load(path), runtime, rounds=args.rounds, budget_s=args.budget
            ))
            for path in _paths(args.models)
            for runtime in installed
        ]  # fmt: skip
        print(json.dumps(rows))
        return 0
    rows = []
    for path in _paths(args.models):
        for runtime in installed:
            cells = _row_in_a_child(path, runtime, args)
            rows.append((pathlib.Path(path).stem, runtime, cells))
            print(f"share: {path} on {runtime}: {cells}", file=sys.stderr, flush=True)
    body = (
        "The inlined model against the same model without its reversals (each one's "
        "output read from its data, the lengths it read pruned), each runtime's own runs "
        "side by side (median of paired rounds, batch 1; each model on each runtime in a "
        "process of its own); the share is how much longer the inlined model takes. "
        "Where the runtime has the op, the original model's share beside it. The target "
        "is the README's for each runtime (its own where it builds for fixed "
        "shapes).\n\n" + page(rows)
    )
    print(body)
    if args.write:
        labels = ", ".join(backends.get(r).label for r in installed)
        context = f"Python {platform.python_version()}; {labels}"
        command = "python -m bench.share " + " ".join(sys.argv[1:] if argv is None else argv)
        write_measured_page(args.write, "The reversal's share of a model", command,
                            context, body + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
