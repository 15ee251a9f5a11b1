"""Benchmark: native ReverseSequence vs each decomposition vs a copy, and pass speed.

``python -m bench.bench`` times onnxruntime (``--quick`` for a short smoke
run); ``--backend NAME`` an installed backend against its copy floor; ``--backend
onnx2torch --device cuda`` onnx2torch on a torch device. Times are paired medians
(:mod:`revseq.measure._timing`), and ``--write PAGE`` writes the tables as a page
stamped with the command.
"""

from __future__ import annotations

__all__ = ["main", "passes_count"]

import argparse
import io
import os
import platform
import sys
from collections.abc import Sequence

import numpy as np
import onnxruntime as ort

from bench._ort_bench import run_speed
from bench._passes_bench import (
    chain_model,
    format_passes,
    large_model,
    sharing_counts,
    time_passes,
)
from bench._tables import (
    format_memory,
    format_nodes,
    format_speed,
    format_summary,
    page_body,
)
from bench.earlier import add_before_options
from bench.pages import stamped_command, write_measured_page
from revseq import backends
from revseq.measure._cases import DIMS, QUICK, SUITE
from revseq.measure._timing import rows_of_passes


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
    prog = "python -m bench.bench"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
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
        "the op written directly in torch",
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
    add_before_options(parser, "with --backend, its default timed beside")
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
        from bench import _torch_bench as _bench_torch

        suite = _bench_torch.DEVICE_SUITE
        reason = _bench_torch.unusable_device(args.device)
        if reason is not None:
            parser.error(f"--device {args.device}: {reason}")
    elif args.backend is not None:
        from bench import _backend_bench as _bench_backend

        suite = _bench_backend.backend_suite(args.backend)
        reason = backends.unavailable(args.backend)
        declared = backends.adapter(args.backend)
        if not declared.simulated:
            reason = declared.untimed or reason
        if reason is not None:
            parser.error(f"--backend {args.backend}: {reason}")
    else:
        suite = QUICK if args.quick else SUITE
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
    title, setup = "onnxruntime against its own kernel", None
    machine = f"Python {platform.python_version()}, {os.cpu_count()} CPUs"
    if args.device is not None:
        timer = _bench_torch.DeviceTimer(args.device, args.rounds, args.budget)
        rows = rows_of_passes(timer, cases, args.dims, args.passes)
        machine = f"{machine}, {_bench_torch.device_context(args.device)}"
        out.write(_bench_torch.format_device(f"onnx2torch on {args.device}", rows) + "\n")
        title = f"Speed of onnx2torch on {args.device}"
        setup = (
            f"Set-up: {_bench_torch.device_context(args.device)}, {os.cpu_count()} CPUs "
            f"(Python {platform.python_version()}); float32 time-major data, lengths at "
            f"run time; {args.rounds} rounds, median of {args.passes} pass(es); each "
            "variant x the device copy."
        )
        if args.node_costs:
            from bench import _node_costs

            costs = _node_costs.node_costs(args.device, cases, args.dims)
            out.write(f"\n{_node_costs.NODE_COSTS_INTRO}\n")
            out.write(_node_costs.format_node_costs(costs) + "\n")
        intro = _bench_torch.PAGE_INTRO
    elif args.backend is not None:
        timer = _bench_backend.BackendTimer.of(
            args.backend, rounds=args.rounds, budget_s=args.budget, before=args.before
        )
        rows = rows_of_passes(timer, cases, args.dims, args.passes)
        label = backends.get(args.backend).label
        out.write(_bench_backend.format_backend(label, rows) + "\n")
        intro = _bench_backend.PAGE_INTRO
        title = f"Speed on {label}"
        setup = (
            f"Set-up: {label} on {os.cpu_count()} CPUs (Python {platform.python_version()}); "
            f"{cases[0].dtype} time-major data, lengths at run time; {args.rounds} rounds, "
            f"median of {args.passes} pass(es); each variant x the copy floor."
        )
        declared = backends.adapter(args.backend)
        if declared.simulated:
            setup += f" These are a simulator's times: {declared.untimed}."
    else:
        threads = (1,) if args.quick else (1, 2)
        rows = run_speed(
            cases, threads, args.rounds, args.budget, args.dims, passes=args.passes
        )
        _write_tables(out, rows, args)
    sys.stdout.write(out.getvalue())
    if args.write:
        given = sys.argv[1:] if argv is None else argv
        command = stamped_command("python -m bench.bench", given, placeholders=["--before"])
        body = page_body(out.getvalue(), intro)
        write_measured_page(args.write, title, command, machine, body, setup=setup)
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
