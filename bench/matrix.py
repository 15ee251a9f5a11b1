"""The backend matrix: which forms run exactly where, and what the default costs there.

``python -m bench.matrix`` runs, on every backend that can run here, each form
(the default ``portable`` output, the backend's own target and every named form) with
static and symbolic dims over every element type, and prints a markdown table (a cell:
``ok``, ``WRONG``, ``FAIL``, ``CPU`` where an execution provider ran it off the device,
``refused``, or ``-`` where the backend has no such type). A second table times the
default output against the backend's own copy floor, an Identity and a full flip
(``Slice`` step -1) of the same tensor, on a 2 MiB float32 tensor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import numpy as np
import onnx
from onnx import helper

import revseq
from bench.pages import write_measured_page
from bench.sweep import types_of
from revseq import backends
from revseq.equivalence.inputs.values import held, random_array
from revseq.equivalence.off_device import harmful_nodes, harmless_size
from revseq.equivalence.reports import first_difference
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import ELEMENT_TYPES

_FORMS = ("default", "own target", "gather_elements", "gather_nd", "gather_rows")


def _model(dims, elem: int, *, op: str = "ReverseSequence") -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", elem, list(dims))]
    initializers = []
    if op == "ReverseSequence":
        node = helper.make_node(op, ["x", "lens"], ["y"], batch_axis=1, time_axis=0)
        inputs.append(helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, [dims[1]]))
    elif op == "Identity":
        node = helper.make_node("Identity", ["x"], ["y"])
    else:  # the full flip
        node = helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])
        initializers = [
            onnx.numpy_helper.from_array(np.array([v], np.int64), n)
            for n, v in (("s", -1), ("e", np.iinfo(np.int64).min), ("a", 0), ("st", -1))
        ]
    graph = helper.make_graph(
        [node],
        "matrix",
        inputs,
        [helper.make_tensor_value_info("y", elem, list(dims))],
        initializer=initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _options(name: str, form: str) -> dict[str, str] | None:
    """How ``form`` is emitted for backend ``name`` (None: it has no profile of its own)."""
    if form == "default":
        return {}
    if form == "own target":
        return {"target": name} if name in TARGETS else None
    return {"strategy": form, "target": "any"}


def _cell(backend: backends.Backend, form: str, dtype: str, dynamic: bool) -> str:
    options = _options(backend.name, form)
    if options is None:
        return "-"
    dims = ("T", "B", 3) if dynamic else (5, 4, 3)
    try:
        inlined = revseq.inline(_model(dims, ELEMENT_TYPES[dtype]), **options)
    except revseq.RevseqError:
        return "refused"
    rng = np.random.default_rng(0)
    try:
        runner = backend.prepare(inlined)
        placement = getattr(runner, "placement", None)
        for time_len, batch in ((5, 4), (3, 2)) if dynamic else ((5, 4),):
            x = random_array(rng, ELEMENT_TYPES[dtype], (time_len, batch, 3))
            lens = np.array(([0, 1, time_len, 2] * batch)[:batch], np.int64)
            feeds = {"x": x, "lens": lens}
            got = runner(feeds)[0]
            truth = reverse_sequence(held(feeds, backend.storage)["x"], lens)  # as held
            if first_difference(truth, got) is not None:
                return "WRONG"
            if placement and harmful_nodes(
                inlined, placement, feeds, limit=harmless_size(x.shape, 0, 1)
            ):
                return "CPU"
    except backends.BackendError:
        return "FAIL"
    return "ok"


def exactness_table(names: list[str], dtypes: list[str]) -> str:
    """Backend x form x static/dynamic rows, element-type columns."""
    lines = [
        "| backend | form | shapes | " + " | ".join(dtypes) + " |",
        "|---|---|---|" + "---|" * len(dtypes),
    ]
    for name in names:
        backend = backends.get(name)
        has = types_of(name)
        for form in _FORMS:
            for dynamic in (False, True):
                cells = [_cell(backend, form, d, dynamic) if d in has else "-" for d in dtypes]
                shapes = "dynamic" if dynamic else "static"
                lines.append(
                    f"| {backend.label} | {form} | {shapes} | " + " | ".join(cells) + " |"
                )
                print(f"matrix: {name} {form} {shapes}", file=sys.stderr, flush=True)
    return "\n".join(lines)


def _time(runner, feeds, repeats: int) -> float:
    runner(feeds)  # warm up (compilation, caches)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        runner(feeds)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def timing_table(names: list[str], repeats: int) -> str:
    """The default output against the backend's Identity and full flip, [64, 32, 256]."""
    dims = (64, 32, 256)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(dims).astype(np.float32)
    lens = rng.integers(0, dims[0], dims[1], endpoint=True)
    lines = [
        "| backend | default ms | Identity ms | flip ms | default / Identity "
        "| default / flip |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        backend = backends.get(name)
        try:
            default = backend.prepare(
                revseq.inline(_model(dims, onnx.TensorProto.FLOAT)), repeated=True
            )
            identity = backend.prepare(
                _model(dims, onnx.TensorProto.FLOAT, op="Identity"), repeated=True
            )
            flip = backend.prepare(
                _model(dims, onnx.TensorProto.FLOAT, op="Slice"), repeated=True
            )
            t_default = _time(default, {"x": x, "lens": lens}, repeats)
            t_identity = _time(identity, {"x": x}, repeats)
            t_flip = _time(flip, {"x": x}, repeats)
        except backends.BackendError as e:
            lines.append(f"| {backend.label} | {e} | | | | |")
            continue
        lines.append(
            f"| {backend.label} | {t_default * 1e3:.3f} | {t_identity * 1e3:.3f} | "
            f"{t_flip * 1e3:.3f} | {t_default / t_identity:.2f} | {t_default / t_flip:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print both tables for the installed backends (or those named)."""
    parser = argparse.ArgumentParser(prog="python -m bench.matrix")
    parser.add_argument("--backends", nargs="*", help="default: every installed backend")
    parser.add_argument("--types", nargs="*", default=list(ELEMENT_TYPES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--write",
        metavar="PATH",
        help="also write the tables as a Markdown page (docs/matrix.md is written so)",
    )
    args = parser.parse_args(argv)
    names = args.backends or [n for n in backends.ADAPTERS if backends.unavailable(n) is None]
    timed = [n for n in names if backends.adapter(n).untimed is None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exactness = exactness_table(names, args.types)
        timing = timing_table(timed, args.repeats)
    print(exactness)
    print()
    print(timing)
    if args.write:
        _write_page(args.write, exactness, timing, names)
    return 0


def _write_page(path: str, exactness: str, timing: str, names: list[str]) -> None:
    """The tables as a page of their own, stamped with the command, date and versions."""
    body = (
        "Each form (the default `portable` output, the backend's own target, and every "
        "named form, as emitted for `any`) on each backend, static (`[5, 4, 3]`) and "
        "dynamic (symbolic `T`, `B`, run at two sizes), over every element type, valid "
        "lengths 0, 1, T and 2, compared with the truth bit for bit (`ok`; `FAIL`: the "
        "backend raised; `WRONG`: it ran and gave other bytes; `CPU`: exact, but the "
        "execution provider placed more than a time or batch vector on the CPU or copied "
        "a value back to the host (webgpu); `-`: the backend has no such type, or no "
        "profile of its own; `refused`: revseq refused to emit it).\n\n"
        f"{exactness}\n\n## The default output against the copy floor\n\n"
        "`[64, 32, 256]` float32 (2 MiB), time-major, median of the runs after a warm-up; "
        "the floor is the backend's own Identity, and a full flip by `Slice` step -1, of "
        "the same tensor. Not for webgpu, whose runs through its worker are dominated by "
        f"moving the tensors.\n\n{timing}\n"
    )
    labels = ", ".join(backends.get(n).label for n in names)
    command = f"python -m bench.matrix --write {path}"
    write_measured_page(path, "The backend matrix", command, labels, body)


if __name__ == "__main__":
    raise SystemExit(main())
