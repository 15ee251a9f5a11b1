"""What each ``revseq`` command does: load, rewrite, check, print, write; an exit code.

The command line (:mod:`revseq.cli`) parses the arguments and hands them here; the
library's own errors propagate to it, which turns them into one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

import onnx_ir as ir

import revseq
from revseq import files
from revseq.cli._verdicts import (
    EXIT_CODES,
    EXIT_DIFFERENT,
    EXIT_OK,
    verdict_json,
)
from revseq.cli.demo import run_demo
from revseq.equivalence import (
    CheckReport,
    check,
    check_nodes,
)
from revseq.errors import RevseqError
from revseq.info import count_nodes, describe
from revseq.ops.targets import PORTABLE, resolve_target

logger = logging.getLogger(__name__)


class Console:
    """Where the command's messages go: results to stdout, progress to stderr."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.verdict_said = False  # a verdict's JSON document went to stdout

    def verdict(self, document: str) -> None:
        """A verdict's JSON document on stdout: one per command, errors included."""
        if not self.verdict_said:
            self.verdict_said = True
            print(document, flush=True)

    def progress(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    @staticmethod
    def warning(message: str) -> None:
        """A warning: on stderr even when quiet."""
        print(f"revseq: warning: {message}", file=sys.stderr, flush=True)

    @staticmethod
    def result(message: str) -> None:
        print(message, flush=True)


def file_error(path: str | os.PathLike, error: Exception) -> RevseqError:
    """Prefix an error with the file it concerns, unless its message names it already."""
    text = str(error)
    if str(path) in text:
        return error if isinstance(error, RevseqError) else RevseqError(text)
    return RevseqError(f"{path}: {text}")


def load(path: str, *, checker_warning: Callable[[str], None] | None = None) -> ir.Model:
    try:
        return files.load_model(path, checker_warning=checker_warning)
    except RevseqError as e:
        raise file_error(path, e) from e


def given_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The check's keyword arguments for what the user gives of its inputs."""
    values: dict[str, Any] = {}
    for spec in args.input_values or ():
        name, equals, path = spec.partition("=")
        arrays = files.load_arrays(path, name=name) if equals else files.load_arrays(spec)
        values.update(arrays)
    dims: dict[str, int] = {}
    for each in args.dims or ():
        dims.update(each)
    return {
        "inputs": values or None,
        "dims": dims,
        "input_shapes": dict(pair for group in args.input_shapes or () for pair in group),
        "value_ranges": dict(pair for group in args.val_range or () for pair in group),
    }


def rewrite_file(
    args: argparse.Namespace,
    console: Console,
    verb: str,
    rewrite: Callable[[ir.Model], ir.Model],
) -> int:
    """Load, rewrite, optionally check, then write atomically: shared by inline/restore."""
    started = time.perf_counter()
    files.check_output_path(args.output)  # before any work
    console.progress(f"{verb}: reading {args.input}")
    model = load(args.input)
    before = count_nodes(model)
    reference = ir.to_proto(model) if args.check else None
    try:
        rewrite(model)
    except RevseqError as e:
        raise file_error(args.input, e) from e
    after = count_nodes(model)
    console.progress(
        f"{verb}: {before[0]} -> {after[0]} ReverseSequence node(s), "
        f"{before[1]} -> {after[1]} node(s) in {time.perf_counter() - started:.2f} s"
    )
    if verb == "inline" and not before[0]:
        console.warning(
            f"{args.input} holds no ReverseSequence: nothing to inline; "
            f"{args.output} is written as an unchanged copy"
        )
    elif verb == "restore" and after[0] == before[0]:
        console.warning(
            f"{args.input}: no decomposition of ReverseSequence found to fuse; "
            f"{args.output} is written as an unchanged copy"
        )
    code = EXIT_OK
    if reference is not None:
        labels = (f"{args.input} (before {verb})", f"{args.input} (after {verb})")
        report = check_models(reference, ir.to_proto(model), args, console, labels)
        if not report.ok:
            _say(args, console, report, written=None)
            console.progress(
                f"{verb}: the check found a difference; {args.output} not written"
            )
            return EXIT_DIFFERENT
        if not report.exercised:
            console.warning(f"inconclusive: {report.message}")
        code = EXIT_CODES[report.verdict]
    try:
        files.save_model(model, args.output)
    except RevseqError as e:
        raise file_error(args.output, e) from e
    console.progress(f"{verb}: wrote {args.output} in {time.perf_counter() - started:.2f} s")
    if reference is not None and args.json:
        _say(args, console, report, written=args.output)
    return code


def _say(
    args: argparse.Namespace, console: Console, report: CheckReport, *, written: str | None
) -> None:
    """The report of ``inline``/``restore --check``: as text, or one JSON document."""
    if not args.json:
        console.result(str(report))
        return
    console.verdict(
        verdict_json(
            report.verdict,
            command=args.command,
            input=args.input,
            written=written,
            **report.to_json(),
        )
    )


def check_models(
    reference: object,
    candidate: object,
    args: argparse.Namespace,
    console: Console,
    labels: tuple[str, str] = ("reference", "candidate"),
    **across: object,
) -> CheckReport:
    """The check of two models with the trials, seed and inputs the arguments give.

    ``across``: ``check``'s options of a comparison on a backend (``backend``,
    ``whole_model``, ``rtol``, ``atol``), where the command gives them.
    """
    console.progress(f"check: {args.trials} trial(s), seed {args.seed}")
    started = time.perf_counter()
    report = check(
        reference,
        candidate,
        trials=args.trials,
        seed=args.seed,
        **given_inputs(args),
        labels=labels,
        progress=console.progress,
        **across,  # type: ignore[arg-type]
    )
    on = f" on {report.domain}" if report.domain else ""  # the candidate's own domain
    console.progress(f"check: {report.verdict}{on} in {time.perf_counter() - started:.2f} s")
    return report


def _inputs_need_check(args: argparse.Namespace) -> None:
    """Refuse the check's input options where no check runs: they would do nothing."""
    if args.check:
        return
    given = [
        flag
        for flag, value in (
            ("--input-shapes", args.input_shapes), ("--dims", args.dims),
            ("--input", args.input_values), ("--val-range", args.val_range),
        )
        if value
    ]  # fmt: skip
    if not given:
        return
    fix = ""
    if args.command == "inline" and given[0] == "--input-shapes":
        shapes = " ".join(
            f"{name}:[{','.join(str(d) for d in dims)}]"
            for group in args.input_shapes
            for name, dims in group
        )
        fix = f"; to fix the model's own input sizes, --overwrite-input-shape {shapes}"
    raise RevseqError(
        f"{given[0]} gives the inputs of --check, which was not asked for: add --check{fix}"
    )


def cmd_inline(args: argparse.Namespace, console: Console) -> int:
    _inputs_need_check(args)
    # --target repeats, and takes several names at once: --target NAME OTHER
    names = [name for group in args.target or () for name in group]
    # Resolved once, here: an unknown name is refused before any work.
    target = resolve_target(names if len(names) > 1 else names[0]) if names else None
    fixed = dict(pair for group in args.overwrite_input_shape or () for pair in group)
    # The check runs at the fixed sizes, unless --input-shapes says otherwise.
    args.input_shapes = [list(fixed.items()), *(args.input_shapes or ())]

    def rewrite(model: ir.Model) -> ir.Model:
        return revseq.inline(
            model,
            strategy=args.strategy,
            as_function=args.as_function,
            target=target,
            simplify=not args.no_simplify,
            input_shapes=fixed,
        )

    return rewrite_file(args, console, "inline", rewrite)


def cmd_restore(args: argparse.Namespace, console: Console) -> int:
    _inputs_need_check(args)
    return rewrite_file(args, console, "restore", revseq.restore)


def _check_per_node(args: argparse.Namespace, console: Console) -> int:
    """``check MODEL --per-node``: each node against revseq's decomposition of it."""
    if args.candidate is not None:
        raise RevseqError("--per-node checks one model; give only REF")
    if args.whole_model:
        raise RevseqError("--per-node and --whole-model exclude each other")
    model = load(args.reference)
    try:
        reports = check_nodes(
            model,
            strategy=args.strategy,
            trials=args.trials,
            seed=args.seed,
            backend=args.backend,
            **given_inputs(args),
            progress=console.progress,
        )
    except RevseqError as e:
        raise file_error(args.reference, e) from e
    errors = [r for r in reports if r.error is not None]
    if errors:
        raise RevseqError(f"{args.reference}: {errors[0]}")
    failed = sum(not report.ok for report in reports)
    verdict = "DIFFERENT" if failed else "OK"
    if not failed and not any(r.longest >= 2 for r in reports):
        verdict = "INCONCLUSIVE"
        console.warning(
            f"{args.reference}: inconclusive: no ReverseSequence reversed 2 or more "
            "steps: the check cannot tell a reversal from the identity"
        )
    if args.json:
        nodes = [r.to_json() for r in reports]
        console.verdict(verdict_json(verdict, reference=args.reference, nodes=nodes))
    else:
        for report in reports:
            console.result(str(report))
        console.result(f"{len(reports) - failed} of {len(reports)} node(s) identical")
    return EXIT_CODES[verdict]


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    if args.per_node:
        return _check_per_node(args, console)
    if args.candidate is None:
        raise RevseqError("check needs REF and CAND (or --per-node with one model)")
    if args.save_inputs is not None:
        files.check_output_path(args.save_inputs)  # before any work
    if args.whole_model and args.backend is None:
        raise RevseqError("--whole-model compares across runtimes: name a --backend")
    reference = load(args.reference)
    candidate = load(args.candidate)
    labels = (str(args.reference), str(args.candidate))
    report = check_models(
        reference,
        candidate,
        args,
        console,
        labels,
        backend=args.backend,
        whole_model=args.whole_model,
        rtol=args.rtol,
        atol=args.atol,
    )
    _save_counterexample(args, console, report)  # before the verdict: one document
    if args.json:
        console.verdict(
            verdict_json(
                report.verdict,
                reference=args.reference,
                candidate=args.candidate,
                **report.to_json(),
            )
        )
    else:
        console.result(str(report))
    if report.verdict == "INCONCLUSIVE":
        console.warning(f"{args.reference}: inconclusive: {report.message}")
    return EXIT_CODES[report.verdict]


def _save_counterexample(
    args: argparse.Namespace, console: Console, report: CheckReport
) -> None:
    """The inputs a difference was found on, written where ``--save-inputs`` says."""
    example = report.counterexample
    if example is None:
        if args.save_inputs is not None:
            why = (
                "no difference"
                if report.ok
                else "the difference is in a decomposition run alone (its report says on "
                "what): no whole-model inputs"
            )
            console.progress(f"check: {why}: nothing written to {args.save_inputs}")
        return
    if args.save_inputs is None:
        console.progress(
            "check: --save-inputs FILE.npz writes the inputs of the first difference "
            "(--input FILE.npz feeds them back)"
        )
        return
    try:
        files.save_arrays(args.save_inputs, dict(example.inputs))
    except RevseqError as e:
        raise file_error(args.save_inputs, e) from e
    console.progress(
        f"check: the inputs of the first difference written to {args.save_inputs} "
        f"(--input {args.save_inputs} feeds them back)"
    )


def cmd_info(args: argparse.Namespace, console: Console) -> int:
    # A model onnx's checker fails (an op of another framework) is still described.
    info = describe(load(args.input, checker_warning=console.warning))
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


_TARGET_COLUMNS = ("target", "profile", "version", "has op", "symbolic", "exact on")


def _target_row(name: str, p: Any) -> tuple[str, ...]:
    """One profile as the ``targets`` table shows it (``--json`` has the whole of it)."""
    native = {True: "yes", False: "no", None: "-"}[p.native]
    ran = p.forms is None or bool(p.forms.get("dynamic"))  # a probe ran some form
    dynamic = "yes" if p.dynamic_ops and ran else "no"
    if p.dynamic_ops is None:
        dynamic = "any op"
    version = (p.backend_version or "-").partition(" (")[0].rpartition(" ")[2]
    exact = "all values" if p.domain is None else f"{p.domain} data"
    marked = f"{name}*" if name == PORTABLE else name
    return (marked, p.source, version, native, dynamic, exact)


def cmd_targets(args: argparse.Namespace, console: Console) -> int:
    profiles = revseq.TARGETS
    if args.json:
        listed = {n: {**p.to_json(), "default": n == PORTABLE} for n, p in profiles.items()}
        console.result(json.dumps(listed, indent=2))
        return EXIT_OK
    rows = [_TARGET_COLUMNS, *(_target_row(n, p) for n, p in profiles.items())]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        console.result(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        )
    console.result(
        "\n* the default (no --target). Each profile whole: revseq targets --json;\n"
        "a backend's own: revseq probe NAME"
    )
    return EXIT_OK


def cmd_setup(args: argparse.Namespace, console: Console) -> int:
    from revseq.backends import set_up

    try:
        console.result(set_up(args.backend, console.progress))
    except RuntimeError as e:  # a step failed; BackendUnavailableError is said as it is
        raise RevseqError(f"{args.backend}-setup: {e}") from e
    return EXIT_OK


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    folder = pathlib.Path(args.models) if args.models else None
    table, ok = run_demo(folder, trials=args.trials, seed=args.seed, progress=console.progress)
    console.result(table)
    return EXIT_OK if ok else EXIT_DIFFERENT
