"""``python -m bench.share --write docs/share.md``: the reversal's share of a model.

What a user pays for inlining is the inlined model's time against the model without
its reversals. Each model (tf2onnx's exports in ``tests/fixtures``, or ``--models``) is
inlined as the README says for each runtime (its own target where it builds for fixed
shapes: ncnn, RKNN, x2paddle; the default elsewhere) and timed against the same model
with every reversal an Identity of its data, side by side in one process (interleaved
rounds, paired medians: ``_timing.paired_medians``), at batch 1. The share is how much
longer the inlined model takes; where the runtime has the op, the original model's
share is shown beside it. A runtime that does not run a model says why in its cell.

Two more models split what the inlined one costs. Its gathers alone: the inlined model
with each decomposition's index computed beforehand (run once in onnxruntime on the
same inputs) and given as a constant, the index arithmetic pruned; what the inlined
model takes beyond that is the index arithmetic, per node it adds. With ``--before
PYTHON`` (an interpreter with an earlier revseq installed), the model as that revseq
inlines it is timed in the same rounds: before and after side by side.
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
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass

import revseq
from bench.earlier import add_before_options, inlined_before
from bench.pages import stamped_command, write_measured_page
from revseq import backends
from revseq.equivalence.blame import without_reversals
from revseq.equivalence.inputs import InputGenerator
from revseq.equivalence.inputs.sizes import GivenInputs, dim_key
from revseq.errors import RevseqError, one_line
from revseq.measure._timing import paired_medians
from revseq.passes.graph.names import EMITTED_NAME
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


_GATHERS = frozenset({"Gather", "GatherElements", "GatherND"})


def graph_nodes(graph: onnx.GraphProto) -> int:
    """The nodes of ``graph`` and its subgraphs, Constants aside (weights to a runtime)."""
    count = 0
    for node in graph.node:
        count += node.op_type != "Constant"
        for attribute in node.attribute:
            for body in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                count += graph_nodes(body)
    return count


def gathers_alone(inlined: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
    """``inlined`` with the index of each decomposition's gather given as a constant.

    Each decomposition in the main graph (its nodes named ``<node>/<Op>_<i>``) moves the
    data with its last gather; that gather's index is computed once in onnxruntime on
    ``feeds`` and becomes an initializer, and the arithmetic that made it is pruned.
    What is left is the reversal's view of the data and its gathers: what the inlined
    model takes beyond this model is its index arithmetic.
    """
    last: dict[str, onnx.NodeProto] = {}
    for node in inlined.graph.node:
        named = EMITTED_NAME.match(node.name)
        if named is not None and node.op_type in _GATHERS:
            last[named["prefix"]] = node
    if not last:  # its reversals sit in subgraphs (a Loop's body): nothing given here
        return inlined
    marked = onnx.ModelProto()
    marked.CopyFrom(inlined)
    marked.graph.output.extend(onnx.ValueInfoProto(name=n.input[1]) for n in last.values())
    values = backends.get("onnxruntime").prepare(marked)(feeds)[-len(last) :]
    given = {node.name: value for node, value in zip(last.values(), values, strict=True)}
    alone = onnx.ModelProto()
    alone.CopyFrom(inlined)
    for node in alone.graph.node:
        if node.name in given:
            name = f"{node.input[1]}/given"
            value = onnx.numpy_helper.from_array(given[node.name], name)
            alone.graph.initializer.append(value)
            node.input[1] = name
    pruned = ir.from_proto(alone)
    RemoveUnusedNodesPass()(pruned)
    return ir.to_proto(pruned)


def _variants(
    model: onnx.ModelProto,
    runtime: str,
    feeds: dict[str, np.ndarray],
    before: str | None,
    refusals: dict[str, str],
) -> dict[str, onnx.ModelProto]:
    """The models timed on ``runtime``, the one without reversals first.

    Then the inlined one (by the earlier revseq too, given ``before``: where it fails,
    ``refusals`` says why), its gathers alone, and the original where the runtime has
    the op.
    """
    target = OWN_TARGET.get(runtime)
    shapes = {name: list(np.shape(value)) for name, value in feeds.items()}
    inlined = revseq.inline(model, target=target, input_shapes=shapes if target else None)
    variants = {"identity": without_reversals(model)}
    if before is not None:
        try:
            variants["before"] = inlined_before(
                before, model, target=target, input_shapes=shapes if target else None
            )
        except RevseqError as e:  # said in its cell; the rest is timed
            refusals["before"] = one_line(e)[:110]
    variants["inlined"] = inlined
    variants["gathers"] = gathers_alone(inlined, feeds)
    if runtime in NATIVE:
        variants["native"] = model
    return variants


def time_model(
    model: onnx.ModelProto,
    runtime: str,
    *,
    rounds: int,
    budget_s: float,
    before: str | None = None,
) -> dict[str, str]:
    """One row's cells: each variant's milliseconds and share, or why it did not run."""
    feeds = feeds_at_batch_1(model)
    failed: dict[str, str] = {}
    try:
        backend = backends.get(runtime)
        refusals: dict[str, str] = {}
        variants = _variants(model, runtime, feeds, before, refusals)
        runners = {}
        for label, each in variants.items():
            try:
                runners[label] = backend.prepare(each, repeated=True)
                runners[label](feeds)
            except backends.BackendError as e:
                if label in _NEEDED:
                    raise
                failed[label] = _error(e)  # said in its cell; the rest is timed
        calls = {label: (lambda r=r: r(feeds)) for label, r in runners.items()}
        timed = paired_medians(calls, rounds=rounds, budget_s=budget_s)
    except (RevseqError, backends.BackendUnavailableError) as e:
        return {"error": _error(e)}
    nodes = {label: graph_nodes(each.graph) for label, each in variants.items()}
    cells = {"identity": f"{timed['identity'][0] * 1e3:.3f} ({nodes['identity']})"}
    for label in ("before", "inlined", "gathers", "native"):
        if label in timed:
            seconds, ratio = timed[label]
            cells[label] = f"{seconds * 1e3:.3f} ({(ratio - 1) * 100:+.1f} %, {nodes[label]})"
    added = nodes["inlined"] - nodes["gathers"]
    if "gathers" in timed and added > 0:
        arithmetic = timed["inlined"][0] - timed["gathers"][0]
        cells["per_node"] = f"{arithmetic * 1e6 / added:.2f}"
    else:
        cells["per_node"] = "-"
    cells.update((label, f"not written: {why}") for label, why in refusals.items())
    cells.update((label, f"not run: {why}") for label, why in failed.items())
    return cells


_NEEDED = ("identity", "inlined")
"""The variants a row needs; where another does not run, its cell says why."""


def _error(e: Exception) -> str:
    return one_line(e).split(" Caused by")[0][:110]


_COLUMNS = (
    ("identity", "without reversals"),
    ("before", "inlined before"),
    ("inlined", "inlined"),
    ("gathers", "its gathers alone"),
    ("per_node", "index arithmetic, µs a node"),
    ("native", "own op"),
)


def page(rows: Sequence[tuple[str, str, dict[str, str]]], *, before: bool = False) -> str:
    """The table: a row per model and runtime; the earlier revseq's column with ``before``.

    Each timed cell is ms (share over the model without reversals, nodes).
    """
    columns = [(key, title) for key, title in _COLUMNS if before or key != "before"]
    lines = [
        "| model | runtime | " + " | ".join(title for _, title in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for model, runtime, cells in rows:
        if "error" in cells:
            rest = " |" * (len(columns) - 1)
            lines.append(f"| {model} | {runtime} | not run: {cells['error']} |{rest}")
            continue
        row = " | ".join(cells.get(key, "-") for key, _ in columns)
        lines.append(f"| {model} | {runtime} | {row} |")
    return "\n".join(lines)


def _row_in_a_child(path: str, runtime: str, args: argparse.Namespace) -> dict[str, str]:
    """One model's cells on one runtime, timed in a process of its own (a crash ends it)."""
    command = [
        sys.executable, "-m", "bench.share", "--models", path,
        "--runtimes", runtime, "--rounds", str(args.rounds), "--budget", str(args.budget),
        "--rows", *(["--before", args.before] if args.before else []),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return json.loads(done.stdout.splitlines()[-1])[0][2]
    if done.returncode < 0:
        return {"error": f"killed by {signal.Signals(-done.returncode).name}"}
    said = done.stderr.strip().splitlines()
    return {
        "error": f"the process ended with status {done.returncode}"
        + (f": {said[-1]}" if said else "")
    }


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
    add_before_options(parser, "its output timed beside")
    parser.add_argument("--rows", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    installed = [r for r in args.runtimes if backends.unavailable(r) is None]
    if args.rows:  # one runtime, in this process: its rows as JSON
        rows = [
            (pathlib.Path(path).stem, runtime, time_model(
                onnx.load(path), runtime, rounds=args.rounds, budget_s=args.budget,
                before=args.before,
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
    earlier = (
        f"`inlined before`: the same model as {args.before_label} inlines it (`PYTHON` "
        "in the command below: an interpreter with it installed), timed in the same "
        "rounds. "
        if args.before
        else ""
    )
    body = (
        "The inlined model against the same model without its reversals (each one's "
        "output read from its data, the lengths it read pruned), each runtime's own runs "
        "side by side (median of paired rounds, batch 1; each model on each runtime in a "
        "process of its own); the share is how much longer a model takes than the one "
        "without reversals, and each cell says ms (share, nodes: Constants aside, "
        "subgraphs' included). Where the runtime has the op, the original model's share "
        "beside it. The target is the README's for each runtime (its own where it builds "
        f"for fixed shapes). {earlier}`its gathers alone`: the inlined model with each "
        "gather's index computed beforehand and given as a constant: what the reversal "
        "costs without its index arithmetic. `index arithmetic, µs a node`: the inlined "
        "model's time beyond its gathers alone, over the nodes it adds (a negative or "
        "tiny figure: within the noise). The page times, it does not check: `revseq "
        "check --backend NAME --whole-model` says whether an output is right there (an "
        "earlier output that was wrong on a runtime may be faster).\n\n"
        + page(rows, before=bool(args.before))
    )
    print(body)
    if args.write:
        labels = ", ".join(backends.get(r).label for r in installed)
        context = f"Python {platform.python_version()}; {labels}"
        given = sys.argv[1:] if argv is None else argv
        command = stamped_command("python -m bench.share", given, placeholders=["--before"])
        write_measured_page(args.write, "The reversal's share of a model", command,
                            context, body + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
