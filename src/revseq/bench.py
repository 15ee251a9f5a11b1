"""Benchmark: native ReverseSequence vs each decomposition vs a memory copy, and pass speed.

Run ``python -m revseq.bench`` (``--quick`` for a short smoke run). Times are paired
medians: every round runs each variant once, interleaved, in this one process, and each
variant's time is divided by the native kernel's time of the same round before the
median is taken, so machine noise cancels instead of being measured.
"""

from __future__ import annotations

__all__ = ["SUITE", "main"]

import argparse
import dataclasses
import io
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx.helper
import onnxruntime as ort

import revseq
from revseq import _io, backends
from revseq._bench_passes import (
    chain_model,
    format_passes,
    large_model,
    sharing_counts,
    time_once,
    time_passes,
)
from revseq._bench_tables import (
    format_memory,
    format_nodes,
    format_speed,
    format_summary,
    page_body,
)
from revseq.ops.reference import reverse_sequence_model

_TYPES = {
    "float32": (np.float32, onnx.TensorProto.FLOAT),
    "float16": (np.float16, onnx.TensorProto.FLOAT16),
    "int64": (np.int64, onnx.TensorProto.INT64),
}


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark shape: data shape, layout and element type."""

    shape: tuple[int, ...]
    batch_axis: int
    time_axis: int
    dtype: str

    @property
    def label(self) -> str:
        layout = "time-major" if self.time_axis == 0 else "batch-major"
        return f"{list(self.shape)} {layout} {self.dtype}"

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(_TYPES[self.dtype][0]).itemsize


SUITE: tuple[Case, ...] = (
    Case((2000, 16), 1, 0, "float32"),
    Case((1000, 8, 1), 1, 0, "float32"),
    Case((8, 1000, 1), 0, 1, "float32"),
    Case((512, 64), 1, 0, "float32"),
    Case((64, 512), 0, 1, "int64"),
    Case((128, 32, 64), 1, 0, "float32"),
    Case((32, 128, 64), 0, 1, "float16"),
    Case((64, 32, 256), 1, 0, "int64"),
    Case((50, 16, 8, 64), 1, 0, "float32"),
    Case((16, 50, 8, 64), 0, 1, "float16"),
    Case((64, 256, 1024), 1, 0, "float32"),
    Case((256, 64, 1024), 0, 1, "float32"),
)

_QUICK = (SUITE[0], SUITE[1], SUITE[3], SUITE[5], SUITE[8])


DIMS: tuple[str, ...] = ("static", "time+batch", "all")
"""How much of a case's shape the model declares: every dim; the time and batch dims
symbolic (the common exported form); every dim symbolic."""


def declared_dims(case: Case, dims: str = "static") -> list[int | str]:
    """The data's dims as the model declares them for ``dims`` (one of DIMS)."""
    declared: list[int | str] = list(case.shape)
    if dims == "static":
        return declared
    if dims == "all":
        declared = [f"d{axis}" for axis in range(len(case.shape))]
    declared[case.time_axis], declared[case.batch_axis] = "T", "B"
    return declared


def native_model(
    case: Case, lens: np.ndarray | None = None, dims: str = "static"
) -> onnx.ModelProto:
    """A one-node ReverseSequence model of the case, its dims declared as ``dims`` says.

    With ``lens``, the lengths are that constant instead of an input: inlined, the model
    is one gather with a constant index (what onnxruntime's gather costs alone).
    """
    return reverse_sequence_model(
        declared_dims(case, dims),
        _TYPES[case.dtype][1],
        batch_axis=case.batch_axis,
        time_axis=case.time_axis,
        lens=None if lens is None else lens.astype(np.int64),
        name="bench",
    )


def copy_model(case: Case) -> onnx.ModelProto:
    """The data through one Identity: what onnxruntime's own copy of it costs."""
    elem = _TYPES[case.dtype][1]
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])],
        "copy",
        [onnx.helper.make_tensor_value_info("x", elem, case.shape)],
        [onnx.helper.make_tensor_value_info("y", elem, case.shape)],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


def _session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


# onnxruntime runs these in place on CPU: their output shares its input's buffer.
_VIEW_OPS = frozenset({"Reshape", "Flatten", "Unsqueeze", "Squeeze", "Identity"})


def extra_bytes(model: onnx.ModelProto) -> int:
    """Bytes of the intermediate tensors a run allocates besides its input and output.

    Counted from shape inference: every value that is not a graph input or output, not
    a constant (weights, allocated once at load time) and not a view (the output of an
    op onnxruntime runs in place, or the input of such an op that produces a graph
    output, which lives in the output's buffer). An upper bound: the runtime may reuse
    buffers between nodes, never needs more.
    """
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    graph = inferred.graph
    excluded = {v.name for v in graph.input} | {v.name for v in graph.output}
    for node in graph.node:
        if node.op_type == "Constant" or node.op_type in _VIEW_OPS:
            excluded.update(node.output)
    for node in reversed(graph.node):
        if node.op_type in _VIEW_OPS and node.output[0] in excluded and node.input:
            excluded.add(node.input[0])
    total = 0
    for info in graph.value_info:
        if info.name in excluded:
            continue
        dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        total += math.prod(dims) * np.dtype(itemsize).itemsize
    return total


PLACEMENTS = 2
"""Runners (sessions, compiled modules) timed per variant, each in its own slot of the
interleaved rounds, the faster counting (``placed_medians``). Where a runner's buffers
land biases it for its whole life: two onnxruntime sessions of one model, timed side by
side in one process, measured 1.1x and 1.8x the copy of `[64, 32, 256]` float32."""


def placed_medians(
    variants: dict[str, Sequence[Callable[[], object]]], *, rounds: int, budget_s: float
) -> dict[str, tuple[float, float]]:
    """``paired_medians`` over each variant's runners, the faster runner counting.

    Ratios are to the first variant's faster runner.
    """
    slots = {
        f"{label}\t{k}": fn for label, fns in variants.items() for k, fn in enumerate(fns)
    }
    best: dict[str, tuple[float, float]] = {}
    for slot, (seconds, ratio) in paired_medians(
        slots, rounds=rounds, budget_s=budget_s
    ).items():
        label = slot.rsplit("\t", 1)[0]
        known = best.get(label, (seconds, ratio))
        best[label] = (min(known[0], seconds), min(known[1], ratio))
    base = best[next(iter(variants))][1]
    return {label: (seconds, ratio / base) for label, (seconds, ratio) in best.items()}


def distinct_models(
    models: Mapping[str, onnx.ModelProto | str],
) -> tuple[dict[str, onnx.ModelProto | str], dict[str, str]]:
    """The models to time, each distinct model once, and each repeat's first label.

    A target's chosen form is one of the form columns too (but a row Gather of
    single-element rows, which the named ``gather_rows`` emits as GatherElements does
    where that moves the type): timing the same model
    twice measures only where each runner's buffers landed (one onnxruntime model, two
    columns of one page: 1.92x and 1.18x the copy floor), so a repeat is timed once and
    shares its first label's figures (``with_repeats``).
    """
    first: dict[bytes, str] = {}
    distinct: dict[str, onnx.ModelProto | str] = {}
    repeats: dict[str, str] = {}
    for label, model in models.items():
        if isinstance(model, str):
            distinct[label] = model
            continue
        key = model.SerializeToString()
        if key in first:
            repeats[label] = first[key]
        else:
            first[key] = label
            distinct[label] = model
    return distinct, repeats


def with_repeats(
    result: Mapping[str, tuple[float, float]],
    repeats: Mapping[str, str],
    order: Sequence[str],
) -> dict[str, tuple[float, float]]:
    """``result`` with each repeat's figures copied from its first label's.

    Labels come in ``order`` (the models as given: the tables' columns follow it), then
    those of ``result`` it does not name.
    """
    shared = {label: result[first] for label, first in repeats.items() if first in result}
    merged = {**result, **shared}
    return {**{label: merged[label] for label in order if label in merged}, **merged}


def median_of_passes(
    passes: Sequence[Mapping[str, tuple[float, float]]],
) -> dict[str, tuple[float, float]]:
    """Each label's median seconds and median ratio over ``passes`` (``--passes``).

    Each pass times runners made anew (``placed_medians``): the load of this shared
    machine and where a runner's buffers land shift a whole pass, which interleaving
    within the pass does not cancel (one onnx2torch model measured 2.15-3.04x the copy
    floor of 16 MiB in five passes, 2.39x their median). A label missing from a pass
    (it failed there) counts over the passes that have it.
    """
    labels = dict.fromkeys(label for result in passes for label in result)
    return {
        label: (
            statistics.median(r[label][0] for r in passes if label in r),
            statistics.median(r[label][1] for r in passes if label in r),
        )
        for label in labels
    }


def paired_medians(
    variants: dict[str, Callable[[], object]], *, rounds: int, budget_s: float
) -> dict[str, tuple[float, float]]:
    """(median seconds, median ratio to the first variant) per variant, interleaved.

    Each round starts one variant further on, so that every variant runs at every place
    in the order as often: where a variant runs in a round biases its time (on this
    machine, onnxruntime's first two variants after its Identity of 2 MiB measured 1.8x
    the copy in a fixed order, the same model later in the round 1.1x).
    """
    for fn in variants.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    deadline = time.perf_counter() + budget_s
    for i in range(rounds):
        turn = i % len(order)
        for name, fn in order[turn:] + order[:turn]:
            times[name].append(time_once(fn))
        if i >= 4 and time.perf_counter() > deadline:
            break
    base = next(iter(variants))
    return {
        name: (
            statistics.median(ts),
            statistics.median(t / b for t, b in zip(ts, times[base], strict=True)),
        )
        for name, ts in times.items()
    }


def input_arrays(case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
    np_type = _TYPES[case.dtype][0]
    x = rng.standard_normal(case.shape).astype(np_type)
    time_len = case.shape[case.time_axis]
    lens = rng.integers(0, time_len + 1, case.shape[case.batch_axis], dtype=np.int64)
    return {"x": x, "lens": lens}


def _variants(
    models: dict[str, onnx.ModelProto], feeds: dict[str, np.ndarray], threads: int
) -> dict[str, list[Callable[[], object]]]:
    """``PLACEMENTS`` sessions per model (fed the inputs it has), and numpy's copy."""
    variants: dict[str, list[Callable[[], object]]] = {}
    for name, model in models.items():
        its_feeds = fed(model, feeds)
        sessions = [_session(model, threads) for _ in range(PLACEMENTS)]
        variants[name] = [lambda s=s, f=its_feeds: s.run(None, f) for s in sessions]
    variants["memcpy"] = [numpy_copy(feeds["x"])]
    return variants


def fed(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of ``feeds`` that ``model`` takes (constant lengths take none)."""
    return {name: feeds[name] for name in backends.input_names(model) if name in feeds}


def numpy_copy(x: np.ndarray) -> Callable[[], object]:
    """A copy of ``x`` into a new array by numpy: the floor every table compares with."""
    return lambda: np.copyto(np.empty_like(x), x)


def run_speed(
    cases: Sequence[Case],
    threads: Sequence[int],
    rounds: int,
    budget_s: float,
    dims_kinds: Sequence[str] = DIMS,
    *,
    passes: int = 1,
) -> list[dict[str, object]]:
    """Time every case at every thread count; one row per (case, dims, threads).

    Each row is ``passes`` passes of fresh sessions, the median counting.
    """
    rng = np.random.default_rng(0)
    strategies = list(revseq.STRATEGIES)
    rows = []
    for case in cases:
        feeds = input_arrays(case, rng)
        for dims in dims_kinds:
            native = native_model(case, dims=dims)
            # "portable": the default output (runs on every probed backend); then each
            # strategy as emitted for onnxruntime ("auto" is the fastest form there).
            models = {"native": native, "portable": revseq.inline(native)}
            models.update(
                {
                    s: revseq.inline(native, strategy=s, target="onnxruntime")
                    for s in strategies
                }
            )
            # The same lengths as a constant, static dims: one gather with a constant
            # index, the floor the index arithmetic adds to.
            models["gather alone"] = revseq.inline(native_model(case, feeds["lens"]))
            distinct, repeats = distinct_models(models)
            for n in threads:
                timed = {**distinct, "ort copy": copy_model(case)}
                result = median_of_passes(
                    [
                        placed_medians(
                            _variants(timed, feeds, n), rounds=rounds, budget_s=budget_s
                        )
                        for _ in range(passes)
                    ]
                )
                result = with_repeats(result, repeats, [*models, "ort copy"])
                rows.append({"case": case, "dims": dims, "threads": n, "result": result})
            # Bytes from shape inference: known for static dims only.
            if dims == "static":
                rows[-1]["extra"] = {name: extra_bytes(m) for name, m in models.items()}
            rows[-1]["nodes"] = {name: node_count(m) for name, m in models.items()}
    return rows


def node_count(model: onnx.ModelProto) -> int:
    """The nodes a backend runs: every node but the constants."""
    return sum(n.op_type != "Constant" for n in model.graph.node)


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in text.split(","))
    except ValueError:
        message = f"not a shape: {text!r} (write e.g. 128,32,64)"
        raise argparse.ArgumentTypeError(message) from None


def _dims_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(text.split(","))
    unknown = [k for k in kinds if k not in DIMS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown dims {unknown[0]!r}; choose from {', '.join(DIMS)} (comma-separated)"
        )
    return kinds


def passes_count(text: str) -> int:
    """``--passes``: a whole number, 1 or more."""
    try:
        passes = int(text)
    except ValueError:
        passes = 0
    if passes < 1:
        raise argparse.ArgumentTypeError(f"not a number of passes: {text!r} (1 or more)")
    return passes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m revseq.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few small cases, 1 thread")
    parser.add_argument("--rounds", type=int, default=41, help="rounds per case (max)")
    parser.add_argument("--budget", type=float, default=6.0, help="seconds per case (soft)")
    parser.add_argument(
        "--passes",
        type=passes_count,
        default=1,
        help="passes per case, each with its runners made anew, the median counting "
        "(default 1; the pages in docs/ use 3)",
    )
    parser.add_argument(
        "--shape",
        action="append",
        type=_shape,
        help="only the suite's cases of this shape, e.g. 128,32,64 (repeatable)",
    )
    parser.add_argument(
        "--dims",
        type=_dims_kinds,
        default=DIMS,
        help=f"which declared dims to run, comma-separated (default {','.join(DIMS)})",
    )
    parser.add_argument(
        "--backend",
        metavar="NAME",
        choices=sorted(backends.ADAPTERS),
        help="time the default output and NAME's own target on that installed backend "
        "against its copy floor, instead of onnxruntime against its native kernel",
    )
    parser.add_argument(
        "--device",
        metavar="DEVICE",
        help="with --backend onnx2torch: run the converted modules on this torch device "
        "(cuda, cuda:1, cpu), the data resident there, against a copy on the device and "
        "the op written by hand in torch",
    )
    parser.add_argument(
        "--node-costs",
        action="store_true",
        help="with --device: also time each module of the default's and the own "
        "target's graph alone, the device synchronised around it",
    )
    parser.add_argument(
        "--speed-only", action="store_true", help="the speed and memory tables only"
    )
    parser.add_argument(
        "--write",
        metavar="PATH",
        help="also write the tables as a Markdown page (docs/benchmark.md is written so)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Print the speed, memory and pass-speed tables (or one backend's table)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.node_costs and args.device is None:
        parser.error("--node-costs times modules on a device: give it with --device")
    if args.device is not None:
        if args.backend != "onnx2torch":
            parser.error(
                "--device runs onnx2torch's modules: give it with --backend onnx2torch"
            )
        from revseq import _bench_torch  # it builds on this module's cases

        suite = _bench_torch.DEVICE_SUITE
        reason = _bench_torch.unusable_device(args.device)
        if reason is not None:
            parser.error(f"--device {args.device}: {reason}")
    elif args.backend is not None:
        from revseq import _bench_backend  # it builds on this module's cases

        suite = _bench_backend.BACKEND_SUITE
        reason = backends.UNTIMED.get(args.backend) or backends.unavailable(args.backend)
        if reason is not None:
            parser.error(f"--backend {args.backend}: {reason}")
    else:
        suite = _QUICK if args.quick else SUITE
    cases = suite
    if args.shape:
        unknown = set(args.shape) - {case.shape for case in suite}
        if unknown:
            shapes = "; ".join(",".join(map(str, c.shape)) for c in suite)
            wrong = ",".join(map(str, sorted(unknown)[0]))
            parser.error(f"no suite case of shape {wrong}; the suite has {shapes}")
        cases = tuple(case for case in suite if case.shape in args.shape)
    out = io.StringIO()
    intro = None
    machine = f"Python {platform.python_version()}, {os.cpu_count()} CPUs"
    if args.device is not None:
        rows = _bench_torch.run_device(
            args.device, cases, args.dims, args.rounds, args.budget, passes=args.passes
        )
        machine = f"{machine}, {_bench_torch.device_context(args.device)}"
        out.write(_bench_torch.format_device(f"onnx2torch on {args.device}", rows) + "\n")
        if args.node_costs:
            costs = _bench_torch.node_costs(args.device, cases, args.dims)
            out.write(f"\n{_bench_torch.NODE_COSTS_INTRO}\n")
            out.write(_bench_torch.format_node_costs(costs) + "\n")
        intro = _bench_torch.PAGE_INTRO
    elif args.backend is not None:
        rows = _bench_backend.run_backend(
            args.backend, cases, args.dims, args.rounds, args.budget, passes=args.passes
        )
        label = backends.get(args.backend).label
        out.write(_bench_backend.format_backend(label, rows) + "\n")
        intro = _bench_backend.PAGE_INTRO
    else:
        threads = (1,) if args.quick else (1, 2)
        rows = run_speed(
            cases, threads, args.rounds, args.budget, args.dims, passes=args.passes
        )
        _write_tables(out, rows, args)
    sys.stdout.write(out.getvalue())
    if args.write:
        command = " ".join(
            ["python -m revseq.bench", *(sys.argv[1:] if argv is None else argv)]
        )
        body = page_body(out.getvalue(), intro)
        _io.write_measured_page(args.write, "Benchmark", command, machine, body)
    return 0


def _write_tables(
    out: io.StringIO, rows: list[dict[str, object]], args: argparse.Namespace
) -> None:
    out.write(f"onnxruntime {ort.__version__}, numpy {np.__version__}\n\n")
    out.write("## Time per run: median ms (paired median ratio to native)\n\n")
    out.write(format_speed(rows) + "\n\n")
    out.write(format_summary(rows) + "\n\n")
    out.write("## Extra memory: intermediate tensors (shape inference upper bound)\n\n")
    out.write(format_memory(rows) + "\n\n")
    out.write("## Nodes: what each model runs, constants aside\n\n")
    out.write(format_nodes(rows) + "\n\n")
    if args.speed_only:
        return
    counts = (100, 1000) if args.quick else (100, 1000, 2000, 5000)
    timings = [time_passes(f"chain of {n} ReverseSequence", chain_model(n)) for n in counts]
    if not args.quick:
        timings.append(
            time_passes("10 ReverseSequence in 100,000 nodes", large_model(), repeats=1)
        )
    out.write(
        "## Pass speed: seconds, median of 3 runs (1 for the 100,000-node model; "
        "dynamic shapes, Relu between the nodes)\n\n"
        "round trip: onnx-ir's from_proto + to_proto of the model; revseq.inline and "
        "revseq.restore take and return a ModelProto; x budget: the public call over "
        "1.5x the round trip plus the pass.\n\n"
    )
    out.write(format_passes(timings) + "\n\n")
    out.write("## Shared index arithmetic: nodes (all scopes) in the bundled models\n\n")
    out.write("| model | before inlining | inlined, not shared | inlined, shared |\n")
    out.write("|---|---|---|---|\n")
    for name, before, unshared, shared in sharing_counts():
        out.write(f"| {name} | {before} | {unshared} | {shared} |\n")


if __name__ == "__main__":
    raise SystemExit(main())
