"""The modules of revseq whose code a call runs: the path a reader follows through it.

    python -m bench.reader_path [MODEL]

Each call (``revseq.inline``, ``revseq.check``) runs once to import what it needs and
fill the caches, then once more under ``sys.setprofile``: every Python function of
revseq entered (module bodies run at import are not counted, nor are other packages'
functions) counts its module. It prints each call's modules in the order first entered,
with how many times the walk came back to a module it had left.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable

_ROOT = pathlib.Path(__file__).resolve().parents[1]
_DEFAULT_MODEL = _ROOT / "models" / "bidirectional_rnn.onnx"


def modules_run(call: Callable[[], object]) -> tuple[list[str], int]:
    """The modules of revseq whose functions ``call`` enters, first entered first; re-entries.

    A re-entry is a call into a module other than the one the walk is in, which the walk
    had entered before.
    """
    order: list[str] = []
    reentries = 0
    current: list[str] = []

    def profile(frame, event, _arg):
        nonlocal reentries
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("revseq") or frame.f_code.co_name == "<module>":
            return
        if module not in order:
            order.append(module)
        elif current and current[-1] != module:
            reentries += 1
        current[:] = [module]

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return order, reentries


def main(argv: list[str] | None = None) -> int:
    """Print the modules ``revseq.inline`` and ``revseq.check`` run on the model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(_DEFAULT_MODEL))
    args = parser.parse_args(argv)
    import onnx

    import revseq

    model = onnx.load(args.model)
    inlined = revseq.inline(model)
    calls = {
        "revseq.inline": lambda: revseq.inline(model),
        "revseq.check": lambda: revseq.check(model, inlined, trials=1),
    }
    for name, call in calls.items():
        call()  # imports and caches filled
        order, reentries = modules_run(call)
        print(f"{name}: {len(order)} modules, {reentries} re-entries")
        for module in order:
            print(f"  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
