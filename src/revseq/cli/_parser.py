"""The arguments of each ``revseq`` command, and the handler that runs it."""

from __future__ import annotations

__all__ = ["build_parser"]

import argparse
from collections.abc import Callable

import revseq
from revseq.backends import ADAPTERS, SETUPS
from revseq.cli._commands import (
    Console,
    cmd_check,
    cmd_demo,
    cmd_info,
    cmd_inline,
    cmd_restore,
    cmd_setup,
    cmd_targets,
)
from revseq.cli._probe import cmd_probe
from revseq.cli._values import dim_sizes, input_shape, positive_int, tolerance, value_range
from revseq.equivalence import WHOLE_MODEL_ATOL, WHOLE_MODEL_RTOL
from revseq.ops.forms import FORMS

_STRATEGY_HELP = "auto: the fastest form that fits each node; " + "; ".join(
    f"{form.name}: {form.description}" for form in FORMS.values()
)


class _HelpFormat(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default where it has one worth showing; examples as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.nargs == 0:  # a flag: its default is its absence
            return text
        if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings:
            text += " (default: %(default)s)"
        return text


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    """What the user gives of the inputs a check runs on; the rest is generated."""
    group = parser.add_argument_group(
        "inputs of the check (what is not given is generated to fit the model)"
    )
    group.add_argument(
        "--input",
        dest="input_values",
        action="append",
        metavar="NAME=FILE.npy|FILE.npz",
        help="values of inputs, the same in every trial: an .npy per input, or an .npz "
        "holding arrays named as the inputs; repeat it",
    )
    group.add_argument(
        "--dims",
        action="append",
        type=dim_sizes,
        metavar="SYM=N[,SYM=N]",
        help="sizes of symbolic dims by name, e.g. --dims T=64,B=2",
    )
    group.add_argument(
        "--input-shapes",
        action="append",
        nargs="+",
        type=input_shape,
        metavar="NAME:[D0,D1]",
        help="shapes of inputs, e.g. --input-shapes ids:[64,2] lens:[2]",
    )
    group.add_argument(
        "--val-range",
        action="append",
        nargs="+",
        type=value_range,
        metavar="NAME:[LO,HI]",
        help="inclusive range of an input's generated values, e.g. --val-range ids:[0,99]",
    )


def _add_check_options(parser: argparse.ArgumentParser, *, trials: int = 3) -> None:
    parser.add_argument(
        "--trials", type=positive_int, default=trials, help="random input sets (>= 1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for the random inputs")


def _add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the check's verdict as one JSON document on stdout: the verdict, the "
        "exit code and its meaning, what was compared, the largest errors, the inputs, "
        "the blame and the versions (an error too: verdict ERROR)",
    )


def _add_rewrite_command(
    commands: argparse._SubParsersAction,
    common: argparse.ArgumentParser,
    name: str,
    summary: str,
    handler: Callable[[argparse.Namespace, Console], int],
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
    _add_json_option(parser)
    _add_input_options(parser)
    parser.set_defaults(handler=handler)
    return parser


_EXAMPLES = """examples:
  revseq inline model.onnx -o inlined.onnx --check      the default output, checked
  revseq inline model.onnx -o out.onnx --target NAME    a backend's own target
  revseq check model.onnx inlined.onnx --backend NAME   each node's replacement there
  revseq check model.onnx inlined.onnx --dims T=64,B=2 --val-range ids:[0,99]
  revseq restore exported.onnx -o fused.onnx            hand-written reversals as the op
  revseq targets                                        the backends revseq knows

COMMAND --help says more; exit codes: 0 success, 1 a difference, 2 an error,
3 inconclusive (no reversal of 2 or more steps happened), 4 revseq's part exact but
the runtime's own ops differ (check --whole-model)."""

_INLINE_EXAMPLES = """examples:
  revseq inline model.onnx -o out.onnx                 runs on every probed backend
  revseq inline model.onnx -o out.onnx --target NAME OTHER    runs on both backends
  revseq inline model.onnx -o out.onnx --target Range Less Where GatherElements \\
      Gather Shape Slice Squeeze Unsqueeze Expand Add Sub Cast    only these op types
  revseq inline model.onnx -o out.onnx --check --dims T=64
  revseq inline model.onnx -o out.onnx --target NAME --overwrite-input-shape ids:[64,2]"""

_CHECK_EXAMPLES = """examples:
  revseq check model.onnx inlined.onnx                 whole models in onnxruntime
  revseq check model.onnx inlined.onnx --backend NAME  and each replacement there
  revseq check model.onnx --per-node                   one model's nodes, one by one
  revseq check model.onnx inlined.onnx --input ids=ids.npy --dims B=4
  revseq check model.onnx inlined.onnx --input feeds.npz --val-range ids:[0,99]"""


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand each, sharing ``--quiet`` and ``--debug``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    common.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    parser = argparse.ArgumentParser(
        prog="revseq",
        description="Rewrite ONNX models around ReverseSequence and prove them identical.",
        epilog=_EXAMPLES,
        formatter_class=_HelpFormat,
    )
    parser.set_defaults(quiet=False, debug=False)
    parser.add_argument("--version", action="version", version=f"revseq {revseq.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_inline, _add_restore, _add_check, _add_info, _add_targets, _add_probe,
        _add_setups, _add_demo,
    ):  # fmt: skip
        add(commands, common)
    return parser


def _add_inline(commands, common: argparse.ArgumentParser) -> None:
    """``revseq inline``: the rewrite, its strategy and target, fixed shapes."""
    inline = _add_rewrite_command(
        commands, common, "inline", "replace ReverseSequence with standard ops", cmd_inline
    )
    inline.epilog = _INLINE_EXAMPLES
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
        nargs="+",
        metavar="NAME",
        help=f"a backend profile ({', '.join(revseq.TARGETS)}) or an ONNX op type the "
        "output may use; several (--target NAME OTHER, or --target repeated) give output "
        "that runs on each profile, op types are allowed together",
    )
    inline.add_argument(
        "--overwrite-input-shape",
        action="append",
        nargs="+",
        type=input_shape,
        metavar="NAME:[D0,D1]",
        help="fix inputs' sizes first, and every symbol they bind (as onnxsim does), for "
        "runtimes that build for fixed shapes (their targets refuse symbolic dims); --check "
        "then runs at these sizes",
    )


def _add_restore(commands, common: argparse.ArgumentParser) -> None:
    """``revseq restore``: the fusion back into the op."""
    _add_rewrite_command(
        commands,
        common,
        "restore",
        "fuse decompositions back into ReverseSequence",
        cmd_restore,
    )


def _add_check(commands, common: argparse.ArgumentParser) -> None:
    """``revseq check``: two models compared, or one node by node; on a backend."""
    check = commands.add_parser(
        "check",
        parents=[common],
        help="prove CAND computes what REF does: the whole models in onnxruntime, each "
        "decomposition alone on the backend",
        epilog=_CHECK_EXAMPLES,
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
    for kind, default in (("relative", WHOLE_MODEL_RTOL), ("absolute", WHOLE_MODEL_ATOL)):
        check.add_argument(
            f"--{kind[0]}tol",
            type=tolerance,
            default=default,
            help=f"{kind} tolerance of --whole-model (0 for exact equality)",
        )
    check.add_argument(
        "--save-inputs",
        metavar="FILE.npz",
        help="where a check finds a difference, write the inputs it was found on (--input "
        "FILE.npz feeds them back, to another tool or runtime too)",
    )
    _add_json_option(check)
    _add_input_options(check)
    check.set_defaults(handler=cmd_check)


def _add_info(commands, common: argparse.ArgumentParser) -> None:
    """``revseq info``: what a model holds."""
    info = commands.add_parser(
        "info", parents=[common], help="what a model holds", formatter_class=_HelpFormat
    )
    info.add_argument("input", help="the model to describe (.onnx)")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(handler=cmd_info)


def _add_targets(commands, common: argparse.ArgumentParser) -> None:
    """``revseq targets``: the profiles and their sources."""
    targets = commands.add_parser(
        "targets",
        parents=[common],
        help="list the target profiles and where they come from",
        formatter_class=_HelpFormat,
    )
    targets.add_argument("--json", action="store_true", help="machine-readable output")
    targets.set_defaults(handler=cmd_targets)


def _add_probe(commands, common: argparse.ArgumentParser) -> None:
    """``revseq probe``: a backend probed, its profile printed or saved."""
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
        "--write",
        nargs="?",
        const="",
        metavar="FOLDER",
        help="save the profile where inline reads it: the user's profile folder "
        "($REVSEQ_PROFILES, else ~/.config/revseq/profiles), or FOLDER",
    )
    probe.add_argument("--json", action="store_true", help="print the profile as JSON")
    costs = probe.add_mutually_exclusive_group()
    costs.add_argument(
        "--no-costs",
        dest="costs",
        action="store_false",
        help="skip timing the forms (the profile then has no costs: the planner falls "
        "back to its fixed order of forms)",
    )
    costs.add_argument(
        "--keep-costs",
        action="store_true",
        help="keep the costs of the saved profile (same backend version) instead of "
        "timing the forms again: re-certify what runs without re-measuring speed (what "
        "it has no cost for, a form or class added since, is timed)",
    )
    probe.add_argument(
        "--passes",
        type=positive_int,
        default=1,
        metavar="N",
        help="time each cost case in N passes of fresh runners, the median counting "
        "(steadier costs; N times the timing)",
    )
    probe.set_defaults(handler=cmd_probe)


def _add_setups(commands, common: argparse.ArgumentParser) -> None:
    """``revseq NAME-setup``: what a backend needs beyond pip, installed (its room's)."""
    for name, what in SETUPS.items():
        setup = commands.add_parser(
            f"{name}-setup", parents=[common], help=what, formatter_class=_HelpFormat
        )
        setup.set_defaults(handler=cmd_setup, backend=name)


def _add_demo(commands, common: argparse.ArgumentParser) -> None:
    """``revseq demo``: the bundled models inlined and checked."""
    demo = commands.add_parser(
        "demo",
        parents=[common],
        help="inline and check the bundled sample models",
        formatter_class=_HelpFormat,
    )
    demo.add_argument("--models", help="a folder of .onnx models (default: the bundled ones)")
    _add_check_options(demo)
    demo.set_defaults(handler=cmd_demo)
