"""``revseq probe BACKEND``: probe an installed backend, print or save its profile."""

from __future__ import annotations

__all__ = ["cmd_probe"]

import argparse
import json

from revseq.cli._commands import Console
from revseq.cli._verdicts import EXIT_OK
from revseq.ops.vocabulary import DYNAMIC, MATRIX, MATRIX_STATIC, STATIC

_COST_CLASS_LABELS = {
    MATRIX: "single-element rows, time+batch dims",
    MATRIX_STATIC: "single-element rows, static dims",
}
"""How the cost classes of single-element rows are named."""


def cmd_probe(args: argparse.Namespace, console: Console) -> int:
    """Probe the backend; print its verdicts and costs, or its profile as JSON."""
    from revseq.probe.backend import probe_backend  # the measuring, loaded when asked for
    from revseq.probe.profile_file import saved_profile, write_profile

    folder = args.write or None  # --write alone: the user's profile folder
    keep = saved_profile(args.backend, folder) if args.keep_costs else None
    profile, results = probe_backend(
        args.backend,
        progress=console.progress,
        costs=args.costs,
        passes=args.passes,
        keep=keep,
    )
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
            f"static forms: {', '.join(sorted(profile.forms[STATIC])) or 'none'}; "
            f"dynamic forms: {', '.join(sorted(profile.forms[DYNAMIC])) or 'none'}"
        )
        for kind, costs in (profile.costs or {}).items():
            timed = ", ".join(
                f"{f} {c.ratio:.2f}x ({c.nodes} nodes)" for f, c in costs.items()
            )
            label = _COST_CLASS_LABELS.get(kind, f"{kind} dims")
            console.result(f"cost x the copy floor, {label}: {timed or 'none'}")
    if args.write is not None:
        path = write_profile(profile, folder)
        console.progress(f"probe: wrote {path}")
    return EXIT_OK
