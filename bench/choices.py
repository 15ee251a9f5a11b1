"""``python -m bench.choices``: both sides of each threshold the forms switch at.

The forms switch layout or index type at the thresholds of a profile's ``Tuning``
(``revseq.ops.targets.profile``). Each was set by timing both sides in onnxruntime, which
has the op: for every case of a threshold, onnxruntime's own output is emitted with the
threshold forced below the case and above it (its profile carrying the forced
:class:`~revseq.ops.targets.profile.Tuning`), and both run interleaved with the native
kernel in this process, 1 thread (paired medians, ``revseq.measure._timing``). The page
says which side was cheaper and which side the shipped threshold takes.
"""

from __future__ import annotations

__all__ = ["CHOICES", "Choice", "main", "time_choice"]

import argparse
import dataclasses
import io
import os
import platform
import sys
from collections.abc import Sequence

import numpy as np
import onnxruntime as ort

import revseq
from bench._ort_bench import session
from bench.pages import write_measured_page
from revseq.measure._cases import Case, fed, input_arrays, native_model
from revseq.measure._timing import PLACEMENTS, median_of_passes, placed_medians
from revseq.ops.targets import TARGETS
from revseq.ops.targets.cost import COST_TIE
from revseq.ops.targets.profile import DEFAULT_TUNING
from revseq.ops.vocabulary import STATIC

_NEVER = 1 << 40
"""A threshold no case reaches: its side always taken, or never."""


@dataclasses.dataclass(frozen=True)
class Choice:
    """One threshold, its two sides, and the cases on both sides of its value.

    Attributes:
        field: The :class:`~revseq.ops.targets.profile.Tuning` field.
        below: What the forms do at or below the threshold (batch thresholds) or at or
            above it (the ``_min_elements`` ones): the side ``taken`` forces.
        other: What they do on the other side.
        taken: The field's value that forces ``below`` for every case.
        dims: How much of each case the model declares (static: the thresholds compare
            static sizes; a symbolic batch counts as short).
        cases: Shapes on both sides of the shipped value.
        size: What of a case is compared with the threshold.
    """

    field: str
    below: str
    other: str
    taken: int
    dims: str
    cases: tuple[Case, ...]
    size: str


def _time_major(*shapes: tuple[int, ...]) -> tuple[Case, ...]:
    return tuple(Case(shape, 1, 0, "float32") for shape in shapes)


CHOICES: tuple[Choice, ...] = (
    Choice(
        "time_inner_max_batch",
        "index as [B, T], transposed",
        "index as [T, B]",
        _NEVER,
        STATIC,
        _time_major(
            (8192, 1, 4), (2048, 4, 4), (1024, 8, 4), (512, 16, 4), (256, 32, 4), (256, 64, 4)
        ),
        "batch",
    ),
    Choice(
        "transpose_data_max_batch",
        "gathered on the data's [B, T] transpose",
        "gathered as [T, B]",
        _NEVER,
        STATIC,
        _time_major((32768, 1), (4096, 8), (2048, 16), (1024, 32), (512, 64), (256, 128)),
        "batch",
    ),
    Choice(
        "transpose_data_min_elements",
        "gathered on the data's [B, T] transpose",
        "index transposed",
        0,
        STATIC,
        _time_major((64, 2), (128, 4), (256, 2), (512, 2), (1024, 1), (512, 8)),
        "T x B",
    ),
    Choice(
        "int32_min_elements",
        "index in int32",
        "index in int64",
        0,
        STATIC,
        _time_major(
            (128, 1, 16),
            (256, 1, 16),
            (256, 4, 16),
            (512, 8, 16),
            (1024, 16, 16),
            (2048, 32, 16),
        ),
        "T x B",
    ),
)
"""Every threshold of ``revseq.ops.targets.profile``, and where it is timed."""


def _measure(case: Case, choice: Choice) -> int:
    """What of ``case`` the threshold is compared with."""
    batch = case.shape[case.batch_axis]
    return batch if choice.size == "batch" else case.shape[case.time_axis] * batch


def _shipped_side(case: Case, choice: Choice) -> str:
    """The side the shipped threshold takes for ``case``."""
    value = getattr(DEFAULT_TUNING, choice.field)
    size = _measure(case, choice)
    below = size >= value if choice.field.endswith("_min_elements") else size <= value
    return choice.below if below else choice.other


def time_choice(
    choice: Choice, *, rounds: int, budget_s: float, passes: int
) -> list[dict[str, object]]:
    """Each case of ``choice`` with both sides forced, timed against the native kernel."""
    own = TARGETS["onnxruntime"]
    sides = {
        choice.below: choice.taken,
        choice.other: _NEVER if choice.taken == 0 else 0,
    }
    rng = np.random.default_rng(0)
    rows = []
    for case in choice.cases:
        feeds = input_arrays(case, rng)
        native = native_model(case, dims=choice.dims)
        models = {"native": native}
        for side, value in sides.items():
            tuning = dataclasses.replace(DEFAULT_TUNING, **{choice.field: value})
            target = dataclasses.replace(own, tuning=tuning)
            models[side] = revseq.inline(native, target=target)
        same = (
            models[choice.below].SerializeToString()
            == models[choice.other].SerializeToString()
        )
        variants = {label: _runs(model, feeds) for label, model in models.items()}
        result = median_of_passes(
            [placed_medians(variants, rounds=rounds, budget_s=budget_s) for _ in range(passes)]
        )
        rows.append({"case": case, "result": result, "same": same})
    return rows


def _runs(model, feeds: dict[str, np.ndarray]) -> list:
    """``PLACEMENTS`` onnxruntime sessions of ``model`` (1 thread), each a call."""
    its_feeds = fed(model, feeds)
    sessions = [session(model, 1) for _ in range(PLACEMENTS)]
    return [lambda s=s: s.run(None, its_feeds) for s in sessions]


def format_choice(choice: Choice, rows: Sequence[dict[str, object]]) -> str:
    """One table per threshold: both sides x native, the cheaper, the shipped one."""
    value = getattr(DEFAULT_TUNING, choice.field)
    lines = [
        f"### `{choice.field}` = {value}: {choice.below}, else {choice.other}",
        "",
        f"| shape | {choice.size} | {choice.below} | {choice.other} | cheaper | shipped |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        case: Case = row["case"]  # type: ignore[assignment]
        result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
        a, b = result[choice.below][1], result[choice.other][1]
        if row["same"]:
            cheaper = "same model"
        elif max(a, b) <= min(a, b) * COST_TIE:
            cheaper = "tie"
        else:
            cheaper = choice.below if a < b else choice.other
        lines.append(
            f"| {list(case.shape)} | {_measure(case, choice)} | {a:.2f}x | {b:.2f}x | "
            f"{cheaper} | {_shipped_side(case, choice)} |"
        )
    return "\n".join(lines)


_INTRO = """\
Each threshold of `Tuning` (`ops/targets/profile.py`), both sides forced on
onnxruntime's own output
(`target="onnxruntime"`, lengths at run time), each side's median time over the
native kernel's in the same rounds (1 thread, paired medians, the median of the
passes). `cheaper` names the side more than 10% faster (`tie` within 10%); `shipped` is
the side the shipped threshold takes for that case.
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Time every threshold's two sides; print the tables, and write them as a page."""
    prog = "python -m bench.choices"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--rounds", type=int, default=41, help="rounds per case (max)")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per case (soft)")
    parser.add_argument("--passes", type=int, default=3, help="passes per case")
    parser.add_argument("--write", metavar="PATH", help="also write the tables as a page")
    args = parser.parse_args(argv)
    out = io.StringIO()
    for choice in CHOICES:
        rows = time_choice(
            choice, rounds=args.rounds, budget_s=args.budget, passes=args.passes
        )
        out.write(format_choice(choice, rows) + "\n\n")
    sys.stdout.write(out.getvalue())
    if args.write:
        command = " ".join([prog, *(sys.argv[1:] if argv is None else argv)])
        machine = (
            f"onnxruntime {ort.__version__}, Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs"
        )
        body = f"{_INTRO}\n{out.getvalue()}"
        write_measured_page(args.write, "Thresholds, both sides timed", command, machine, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
