"""The ``revseq`` command line: a thin argparse front over the library.

Exit codes: 0 success, 1 a check found a difference, 2 bad usage, bad input or a
backend that failed, 3 an inconclusive check, 4 revseq's part exact but the runtime's
own ops differ (``_verdicts.EXIT_MEANINGS``). Errors
are one line on stderr naming the file and the problem (``--debug`` adds the
traceback). Outputs are written atomically; progress and timings go to stderr unless
``--quiet``.
"""

from __future__ import annotations

__all__ = ["main"]

import logging
import os
import sys
import traceback
from collections.abc import Sequence

from revseq.cli._commands import Console
from revseq.cli._parser import build_parser
from revseq.cli._verdicts import EXIT_BAD_INPUT, verdict_json
from revseq.errors import RevseqError, one_line


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    try:
        return _run(argv)
    except BrokenPipeError:  # the reader went away (``| head``): quiet, as Unix tools are
        _silence_stdout()
        return 0


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(quiet=args.quiet)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="revseq: %(levelname)s: %(message)s",
    )
    try:
        return args.handler(args, console)
    except RevseqError as e:
        if args.debug:
            traceback.print_exc()
        print(f"revseq: error: {one_line(e, None)}", file=sys.stderr)
        _error_json(args, console, one_line(e, None))
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        raise
    except KeyboardInterrupt:
        print("revseq: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the CLI never shows a traceback unasked
        if args.debug:
            traceback.print_exc()
        print(
            f"revseq: error: {args.command}: {one_line(e, None, typed=True)} "
            "(rerun with --debug for a traceback)",
            file=sys.stderr,
        )
        _error_json(args, console, one_line(e, None, typed=True))
        return EXIT_BAD_INPUT


def _error_json(args, console: Console, message: str) -> None:
    """Where a verdict was asked for as JSON, the error is one too (verdict ERROR)."""
    if getattr(args, "json", False) and args.command in {"check", "inline", "restore"}:
        if args.command != "check" and not args.check:
            return
        console.verdict(verdict_json("ERROR", command=args.command, error=message))


def _silence_stdout() -> None:
    """Point stdout at the null device, so the exit's flush finds no closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
