"""The ``revseq`` command line: a thin argparse front over the library.

Exit codes: 0 success, 1 a check found a difference, 2 bad usage or bad input. Errors are
one line on stderr naming the file and the problem (``--debug`` adds the traceback).
Outputs are written atomically; progress and timings go to stderr unless ``--quiet``.
"""

from __future__ import annotations

__all__ = ["main"]

import argparse
import json
import logging
import os
import pathlib
import sys
import time
import traceback
from collections.abc import Callable, Sequence

import onnx_ir as ir

import revseq
from revseq import _io
from revseq.backends import ADAPTERS
from revseq.demo import run_demo
from revseq.equivalence import CheckReport, check, check_nodes
from revseq.info import describe
from revseq.ops.errors import RevseqError
from revseq.ops.forms import FORMS
from revseq.ops.targets import resolve_target

logger = logging.getLogger(__name__)

_STRATEGY_HELP = "auto: the fastest form that fits each node; " + "; ".join(
    f"{form.name}: {form.description}" for form in FORMS.values()
)


class _HelpFormat(argparse.HelpFormatter):
    """Shows each option's default where it has one worth showing (not None or off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings:
            text += " (default: %(default)s)"
        return text


EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_BAD_INPUT = 2


class _Console:
    """Where the command's messages go: results to stdout, progress to stderr."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet

    def progress(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    @staticmethod
    def result(message: str) -> None:
        print(message, flush=True)


def _file_error(path: str | os.PathLike, error: Exception) -> RevseqError:
    """Prefix an error with the file it concerns, unless its message names it already."""
    text = str(error)
    if str(path) in text:
        return error if isinstance(error, RevseqError) else RevseqError(text)
    return RevseqError(f"{path}: {text}")


def _load(path: str) -> ir.Model:
    try:
        return _io.load_model(path)
    except RevseqError as e:
        raise _file_error(path, e) from e


def _rewrite(
    args: argparse.Namespace,
    console: _Console,
    verb: str,
    rewrite: Callable[[ir.Model], ir.Model],
) -> int:
    """Load, rewrite, optionally check, then write atomically: shared by inline/restore."""
    started = time.perf_counter()
    _io.check_output_path(args.output)  # before any work
    console.progress(f"{verb}: reading {args.input}")
    model = _load(args.input)
    before = describe(model)
    reference = ir.to_proto(model) if args.check else None
    try:
        rewrite(model)
    except RevseqError as e:
        raise _file_error(args.input, e) from e
    after = describe(model)
    console.progress(
        f"{verb}: {len(before.nodes)} -> {len(after.nodes)} ReverseSequence node(s), "
        f"{before.node_count} -> {after.node_count} node(s) "
        f"in {time.perf_counter() - started:.2f} s"
    )
    if reference is not None:
        labels = (f"{args.input} (before {verb})", f"{args.input} (after {verb})")
        report = _check_models(reference, ir.to_proto(model), args, console, labels)
        if not report.ok:
            console.result(str(report))
            console.progress(
                f"{verb}: the check found a difference; {args.output} not written"
            )
            return EXIT_DIFFERENT
        if not report.exercised:
            console.progress(f"{verb}: warning: {report.message}")
    try:
        _io.save_model(model, args.output)
    except RevseqError as e:
        raise _file_error(args.output, e) from e
    console.progress(f"{verb}: wrote {args.output} in {time.perf_counter() - started:.2f} s")
    return EXIT_OK


def _check_models(
    reference: object,
    candidate: object,
    args: argparse.Namespace,
    console: _Console,
    labels: tuple[str, str] = ("reference", "candidate"),
) -> CheckReport:

    console.progress(f"check: {args.trials} trial(s), seed {args.seed}")
    started = time.perf_counter()
    report = check(
        reference,
        candidate,
        trials=args.trials,
        seed=args.seed,
        labels=labels,
        progress=console.progress,
        backend=getattr(args, "backend", None),
        whole_model=getattr(args, "whole_model", False),
        rtol=getattr(args, "rtol", 0.0),
        atol=getattr(args, "atol", 0.0),
    )
    console.progress(f"check: {report.verdict} in {time.perf_counter() - started:.2f} s")
    return report


def _cmd_inline(args: argparse.Namespace, console: _Console) -> int:
    target = args.target if args.target else None
    if target is not None and len(target) == 1:
        target = target[0]
    resolve_target(target)  # an unknown name is refused before any work

    def rewrite(model: ir.Model) -> ir.Model:
        return revseq.inline(
            model,
            strategy=args.strategy,
            as_function=args.as_function,
            target=target,
            simplify=not args.no_simplify,
        )

    return _rewrite(args, console, "inline", rewrite)


def _cmd_restore(args: argparse.Namespace, console: _Console) -> int:
    restore = getattr(revseq, "restore", None)
    if restore is None:
        _load(args.input)  # a bad input is still reported as such
        raise RevseqError("restore is not available in this version of revseq")
    return _rewrite(args, console, "restore", restore)


def _cmd_check(args: argparse.Namespace, console: _Console) -> int:
    if args.per_node:
        if args.candidate is not None:
            raise RevseqError("--per-node checks one model; give only REF")
        if args.whole_model:
            raise RevseqError("--per-node and --whole-model exclude each other")
        model = _load(args.reference)
        try:
            reports = check_nodes(
                model,
                strategy=args.strategy,
                trials=args.trials,
                seed=args.seed,
                backend=args.backend,
            )
        except RevseqError as e:
            raise _file_error(args.reference, e) from e
        errors = [r for r in reports if r.error is not None]
        if errors:
            raise RevseqError(f"{args.reference}: {errors[0]}")
        failed = 0
        for report in reports:
            console.result(str(report))
            failed += not report.ok
        console.result(f"{len(reports) - failed} of {len(reports)} node(s) identical")
        if failed:
            return EXIT_DIFFERENT
        if not any(r.longest >= 2 for r in reports):
            raise RevseqError(
                f"{args.reference}: no ReverseSequence reversed 2 or more steps: the check "
                "cannot tell a reversal from the identity"
            )
        return EXIT_OK
    if args.candidate is None:
        raise RevseqError("check needs REF and CAND (or --per-node with one model)")
    if args.whole_model and args.backend is None:
        raise RevseqError("--whole-model compares across runtimes: name a --backend")
    reference = _load(args.reference)
    candidate = _load(args.candidate)
    labels = (str(args.reference), str(args.candidate))
    report = _check_models(reference, candidate, args, console, labels)
    console.result(str(report))
    if not report.ok:
        return EXIT_DIFFERENT
    if not report.exercised:
        raise RevseqError(f"{args.reference}: inconclusive: {report.message}")
    return EXIT_OK


def _cmd_info(args: argparse.Namespace, console: _Console) -> int:
    info = describe(_load(args.input))
    if args.json:
        console.result(json.dumps(info.to_json(), indent=2))
    else:
        console.result(f"{args.input}\n{info}")
    invalid = info.invalid_nodes
    if invalid:  # after the summary, so that every invalid node is listed first
        first = invalid[0]
        raise RevseqError(
            f"{args.input}: {len(invalid)} invalid ReverseSequence node(s); "
            f"{first.name or '(unnamed)'} in {first.scope}: {first.invalid}"
        )
    return EXIT_OK


def _cmd_targets(args: argparse.Namespace, console: _Console) -> int:
    profiles = revseq.TARGETS
    if args.json:
        console.result(
            json.dumps(
                {n: p.to_json() for n, p in profiles.items() if p.static_ops is not None},
                indent=2,
            )
        )
        return EXIT_OK
    console.result(
        "| target | source | backend | native op | dynamic shapes | forms (static / dynamic) |"
    )
    console.result("|---|---|---|---|---|---|")
    for name, p in profiles.items():
        source = {"probe": "verified by execution", "documents": "from documents only"}.get(
            p.source, p.source
        )
        native = {True: "yes", False: "no", None: "?"}[p.native]
        dynamic = "any op" if p.dynamic_ops is None else ("yes" if p.dynamic_ops else "no")
        forms = "-"
        if p.forms is not None:
            forms = " / ".join(
                ", ".join(sorted(p.forms.get(k, ()))) or "none" for k in ("static", "dynamic")
            )
        version = p.backend_version or "-"
        console.result(f"| {name} | {source} | {version} | {native} | {dynamic} | {forms} |")
    return EXIT_OK


def _cmd_probe(args: argparse.Namespace, console: _Console) -> int:
    from revseq.backends.probe import probe_backend
    from revseq.ops.profiles import profile_path

    profile, results = probe_backend(args.backend, progress=console.progress)
    if args.json:
        console.result(json.dumps(profile.to_json(), indent=2))
    else:
        for r in results:
            mark = "ok  " if r.failure is None else "FAIL"
            console.result(
                f"{mark} {r.name} ({r.kind})" + (f": {r.failure}" if r.failure else "")
            )
        native = "yes" if profile.native else "no"
        console.result(
            f"{profile.backend_version}: native ReverseSequence: {native}; "
            f"static forms: {', '.join(sorted(profile.forms['static'])) or 'none'}; "
            f"dynamic forms: {', '.join(sorted(profile.forms['dynamic'])) or 'none'}"
        )
    if args.write:
        path = profile_path(profile.name)
        text = json.dumps(profile.to_json(), indent=2) + "\n"
        _io.write_text_atomically(path, text)
        console.progress(f"probe: wrote {path}")
    return EXIT_OK


def _cmd_webgpu_setup(args: argparse.Namespace, console: _Console) -> int:
    from revseq.backends import webgpu

    try:
        folder = webgpu.install(progress=console.progress)
    except RuntimeError as e:
        raise RevseqError(f"webgpu-setup: {e}") from e
    console.result(f"onnxruntime-web {webgpu.version()} installed in {folder}")
    missing = webgpu.missing_requirement()
    if missing is not None:
        raise RevseqError(missing)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace, console: _Console) -> int:
    folder = pathlib.Path(args.models) if args.models else None
    table, ok = run_demo(folder, trials=args.trials, seed=args.seed, progress=console.progress)
    console.result(table)
    return EXIT_OK if ok else EXIT_DIFFERENT


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def _add_check_options(parser: argparse.ArgumentParser, *, trials: int = 3) -> None:
    parser.add_argument(
        "--trials", type=_positive_int, default=trials, help="random input sets (>= 1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for the random inputs")


def _add_rewrite_command(
    commands: argparse._SubParsersAction,
    common: argparse.ArgumentParser,
    name: str,
    summary: str,
    handler: Callable[[argparse.Namespace, _Console], int],
) -> argparse.ArgumentParser:
    """A command that reads a model, rewrites it and writes it: inline, restore."""
    parser = commands.add_parser(
        name, parents=[common], help=summary, formatter_class=_HelpFormat
    )
    parser.add_argument("input", help="the model to rewrite (.onnx)")
    parser.add_argument("-o", "--output", required=True, help="where to write the result")
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the result against the input (bit for bit, in onnxruntime) before "
        "writing it",
    )
    _add_check_options(parser)
    parser.set_defaults(handler=handler)
    return parser


def _build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    common.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    parser = argparse.ArgumentParser(
        prog="revseq",
        description="Rewrite ONNX models around ReverseSequence and prove them identical.",
        formatter_class=_HelpFormat,
    )
    parser.set_defaults(quiet=False, debug=False)
    parser.add_argument("--version", action="version", version=f"revseq {revseq.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    inline = _add_rewrite_command(
        commands, common, "inline", "replace ReverseSequence with standard ops", _cmd_inline
    )
    inline.add_argument(
        "--strategy", choices=revseq.STRATEGIES, default="auto", help=_STRATEGY_HELP
    )
    inline.add_argument(
        "--as-function", action="store_true", help="emit model-local functions + calls"
    )
    inline.add_argument(
        "--no-simplify",
        action="store_true",
        help="decompose trivial nodes too (lengths all <= 1 or all full) instead of "
        "Identity or a step -1 Slice",
    )
    inline.add_argument(
        "--target",
        action="append",
        metavar="NAME_OR_OP",
        help=f"a backend profile ({', '.join(revseq.TARGETS)}) or an allowed op type; "
        "repeat to allow several",
    )
    _add_rewrite_command(
        commands,
        common,
        "restore",
        "fuse decompositions back into ReverseSequence",
        _cmd_restore,
    )

    check = commands.add_parser(
        "check",
        parents=[common],
        help="prove CAND computes what REF does: the whole models in onnxruntime, each "
        "decomposition alone on the backend",
        formatter_class=_HelpFormat,
    )
    check.add_argument("reference", metavar="REF", help="the model taken as right (.onnx)")
    check.add_argument(
        "candidate",
        metavar="CAND",
        nargs="?",
        help="the rewritten model to check against REF (.onnx); omit with --per-node",
    )
    check.add_argument(
        "--per-node",
        action="store_true",
        help="check each ReverseSequence node of REF against revseq's decomposition of it",
    )
    check.add_argument(
        "--strategy", choices=revseq.STRATEGIES, default="auto", help=_STRATEGY_HELP
    )
    _add_check_options(check)
    check.add_argument(
        "--backend",
        choices=sorted(ADAPTERS),
        metavar="BACKEND",
        help="run each decomposition of CAND alone on this installed backend, in a child "
        "process, on the values its node receives in REF: " + ", ".join(sorted(ADAPTERS)),
    )
    check.add_argument(
        "--whole-model",
        action="store_true",
        help="instead, run the whole of CAND on --backend and compare its outputs with "
        "REF's in onnxruntime within --rtol/--atol (finite inputs; arithmetic may round "
        "differently across runtimes, so this is never reported as bit-identical)",
    )
    check.add_argument(
        "--rtol", type=_tolerance, default=0.0, help="relative tolerance of --whole-model"
    )
    check.add_argument(
        "--atol", type=_tolerance, default=0.0, help="absolute tolerance of --whole-model"
    )
    check.set_defaults(handler=_cmd_check)

    info = commands.add_parser(
        "info", parents=[common], help="what a model holds", formatter_class=_HelpFormat
    )
    info.add_argument("input", help="the model to describe (.onnx)")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(handler=_cmd_info)

    targets = commands.add_parser(
        "targets",
        parents=[common],
        help="list the target profiles and where they come from",
        formatter_class=_HelpFormat,
    )
    targets.add_argument("--json", action="store_true", help="machine-readable output")
    targets.set_defaults(handler=_cmd_targets)

    probe = commands.add_parser(
        "probe",
        parents=[common],
        help="run probe models on an installed backend and print its profile",
        formatter_class=_HelpFormat,
    )
    probe.add_argument(
        "backend",
        choices=sorted(ADAPTERS),
        metavar="BACKEND",
        help="the backend to probe (run in a child process): " + ", ".join(sorted(ADAPTERS)),
    )
    probe.add_argument(
        "--write", action="store_true", help="save the profile where inline reads it"
    )
    probe.add_argument("--json", action="store_true", help="print the profile as JSON")
    probe.set_defaults(handler=_cmd_probe)

    setup = commands.add_parser(
        "webgpu-setup",
        parents=[common],
        help="npm install the pinned onnxruntime-web that the webgpu backend runs "
        "(into ~/.cache/revseq, or $REVSEQ_CACHE)",
        formatter_class=_HelpFormat,
    )
    setup.set_defaults(handler=_cmd_webgpu_setup)

    demo = commands.add_parser(
        "demo",
        parents=[common],
        help="inline and check the bundled sample models",
        formatter_class=_HelpFormat,
    )
    demo.add_argument("--models", help="a folder of .onnx models (default: the bundled ones)")
    _add_check_options(demo)
    demo.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    console = _Console(quiet=args.quiet)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="revseq: %(levelname)s: %(message)s",
    )
    try:
        return args.handler(args, console)
    except RevseqError as e:
        if args.debug:
            traceback.print_exc()
        print(f"revseq: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("revseq: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the CLI never shows a traceback unasked
        if args.debug:
            traceback.print_exc()
        print(
            f"revseq: error: {args.command}: {type(e).__name__}: {_one_line(e)} "
            "(rerun with --debug for a traceback)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return " ".join(text.split())
