"""``python -m bench.bench --backend NAME``: the forms timed on an installed backend.

Each variant (the default, the backend's own target, each form) over the copy floor
(``revseq.measure.floor``), run interleaved with the others in this process; ratios are
paired medians, as for onnxruntime.
"""

from __future__ import annotations

__all__ = [
    "BACKEND_SUITE",
    "DEFAULT_BEFORE",
    "PAGE_INTRO",
    "BackendTimer",
    "backend_models",
    "backend_suite",
    "bar_fractions",
    "format_backend",
    "ratio_cells",
    "table_head",
]

import dataclasses
import statistics
from collections.abc import Callable, Sequence

import numpy as np
import onnx

import revseq
from bench.earlier import inlined_before
from revseq import backends
from revseq.errors import RevseqError, one_line
from revseq.measure._cases import Case, native_model
from revseq.measure._timing import Models, Timed
from revseq.measure.floor import FLOORS, floor_ratio, time_pass
from revseq.ops.forms import FORMS
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import FINITE

PAGE_INTRO = """\
Paired medians of interleaved runs in one process, on the backend itself. Each cell is a
variant's median time over the **copy floor** of the same rounds (the slower of numpy's
copy of the data and the backend's own Identity of it, or its Neg where it runs no
Identity, per-run overhead included), its node count in brackets. Time-major data
(float32, or where the backend's own target moves no float32 exactly, the first of int32
and int64 it moves), lengths given at run time, each shape with its dims declared
(`static`), with the time and batch dims symbolic (`time+batch`, as exporters write
sequence models) and with every dim symbolic (`all`). `default` is the output with no
target; `own target` the output for the backend's own target (the form its probe
measured cheapest there); the form columns are each form as emitted for that target;
`gather alone` is the own target's output for the same lengths given as a constant,
static dims (the gather the backend's own costs pick, its index folded: what the index
arithmetic adds to); `finite target`, where the backend runs no exact form with lengths
at run time, its target exact on finite data (`NAME-finite`); `native` the backend's own
ReverseSequence where it has one; `default before`, given `--before PYTHON`, the default
as an earlier revseq writes it (`PYTHON` in the command: an interpreter with it
installed). Identical models (the own target is one of the form
columns, but where it gathers single-element rows by the row form's Gather, which the
named `gather_rows` gathers as GatherElements does) are timed once and show the same
figure. Each row is the median of its passes, each pass with every runner made anew;
ratios move between runs by more on the small tensor.
"""

BACKEND_SUITE: tuple[Case, ...] = (
    Case((2000, 16), 1, 0, "float32"),
    Case((64, 32, 256), 1, 0, "float32"),
    Case((256, 64, 256), 1, 0, "float32"),
)
"""Time-major float32, a small tensor, 2 MiB and 16 MiB: what sequence models hold."""

_PAGE_TYPES = ("float32", "int32", "int64")


def backend_suite(name: str) -> tuple[Case, ...]:
    """``BACKEND_SUITE`` in the first of float32, int32 and int64 the backend's target moves.

    A target that moves no float32 gets its page in int32 or int64 (RKNN's moves float32
    to its float16 storage). Float32 where the backend has no profile.
    """
    profile = TARGETS.get(name)
    for dtype in _PAGE_TYPES if profile is not None else _PAGE_TYPES[:1]:
        cases = tuple(dataclasses.replace(case, dtype=dtype) for case in BACKEND_SUITE)
        try:
            revseq.inline(native_model(cases[0]), target=name)
        except revseq.StrategyError:
            continue
        return cases
    return BACKEND_SUITE


def backend_models(
    name: str, case: Case, dims: str, lens: np.ndarray, *, before: str | None = None
) -> dict[str, onnx.ModelProto | str]:
    """Each variant's model, or why it has none.

    The default (first as the revseq of ``before`` writes it, given an interpreter with
    it installed), the backend's own target, and each named form emitted for that
    target (for "any" where the backend has no profile).
    """
    native = native_model(case, dims=dims)
    models: dict[str, onnx.ModelProto | str] = {}
    if before is not None:
        try:
            models[DEFAULT_BEFORE] = inlined_before(before, native)
        except RevseqError as e:
            models[DEFAULT_BEFORE] = one_line(e)
    models["default"] = revseq.inline(native)
    target = name if name in TARGETS else "any"
    for label, strategy in (("own target", "auto"), *((f, f) for f in FORMS)):
        models[label] = _inlined(native, strategy=strategy, target=target)
    # The backend's own gather: the default's (GatherND where tinygrad cannot take a
    # constant Gather index) cost tract twice its row Gather, a floor that flattered it.
    models["gather alone"] = _inlined(native_model(case, lens), target=target)
    finite = f"{name}-{FINITE}"
    if finite in TARGETS:  # where the backend runs no exact form: its finite target
        models["finite target"] = _inlined(native, target=finite)
    models["native"] = native
    return models


def _inlined(model: onnx.ModelProto, **options: object) -> onnx.ModelProto | str:
    """``revseq.inline(model, **options)``, or "refused" where no form fits."""
    try:
        return revseq.inline(model, **options)  # type: ignore[arg-type]
    except revseq.StrategyError:
        return "refused"


@dataclasses.dataclass(frozen=True)
class BackendTimer:
    """A backend's page: the default, its own target and each form, over the copy floor."""

    backend: backends.Backend
    rounds: int
    budget_s: float
    before: str | None = None

    @classmethod
    def of(
        cls, name: str, *, rounds: int, budget_s: float, before: str | None = None
    ) -> BackendTimer:
        """The timer of installed backend ``name`` (``before``: ``backend_models``)."""
        return cls(backends.get(name), rounds, budget_s, before)

    def models(self, case: Case, dims: str, lens: np.ndarray) -> Models:
        """The variants of ``backend_models``."""
        return backend_models(self.backend.name, case, dims, lens, before=self.before)

    def time(self, case: Case, feeds: dict[str, np.ndarray], models: Models) -> Timed:
        """One pass of fresh runners (``time_pass``); a backend without the op says so."""
        result, notes, nodes = time_pass(
            self.backend, case, feeds, models, rounds=self.rounds, budget_s=self.budget_s
        )
        profile = TARGETS.get(self.backend.name)
        wrong = notes.get("native") == "wrong values"  # RKNN's own op
        if "native" in notes and profile is not None and not profile.native and not wrong:
            notes["native"] = "no ReverseSequence"
        return result, notes, nodes


DEFAULT_BEFORE = "default before"
"""The default as an earlier revseq writes it (``--before``)."""

_COLUMNS = (
    DEFAULT_BEFORE, "default", "own target", *FORMS, "gather alone", "finite target",
    "native",
)  # fmt: skip

_SOMETIMES = ("finite target", DEFAULT_BEFORE)
"""Columns only where some row has them."""


def _columns(rows: Sequence[dict[str, object]]) -> tuple[str, ...]:
    """``_COLUMNS``, the finite target's and the earlier default only where rows have them."""
    held = {
        name
        for name in _SOMETIMES
        if any(name in r["result"] or name in r["notes"] for r in rows)  # type: ignore[operator]
    }
    return tuple(c for c in _COLUMNS if c not in _SOMETIMES or c in held)


def _floor(row: dict[str, object]) -> tuple[float, float, str]:
    """(seconds, ratio to Identity, name) of the slower copy: the floor."""
    result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
    floor = floor_ratio(result)
    own = next(label for label in FLOORS if label in result)
    which = "memcpy" if floor > 1.0 else own
    return result[which][0], floor, which


def _over_floor(row: dict[str, object], name: str) -> float | None:
    """Variant ``name`` of ``row`` x the copy floor, or None where it did not run."""
    result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
    return result[name][1] / _floor(row)[1] if name in result else None


Over = Callable[[dict[str, object], str], float | None]
"""A variant of a row x the row's floor, by the variant's name (None: it did not run)."""


def table_head(columns: Sequence[str]) -> list[str]:
    """A Markdown table's header and rule."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def ratio_cells(
    row: dict[str, object], columns: Sequence[str], over: Callable[[str], float | None]
) -> list[str]:
    """Each column's ratio ``over(name)`` with its node count, or why it has none."""
    notes: dict[str, str] = row["notes"]  # type: ignore[assignment]
    nodes: dict[str, int] = row["nodes"]  # type: ignore[assignment]
    cells = []
    for name in columns:
        ratio = over(name)
        if ratio is None:
            cells.append(_short(notes.get(name, "-")))
        else:
            counted = f" ({nodes[name]})" if name in nodes else ""
            cells.append(f"{ratio:.2f}x{counted}")
    return cells


_NOTE_CHARS = 100


def _short(note: str) -> str:
    """A note cut to ``_NOTE_CHARS``: a cell says what failed, not the whole message."""
    return note if len(note) <= _NOTE_CHARS else note[: _NOTE_CHARS - 1].rstrip() + "…"


def format_backend(label: str, rows: list[dict[str, object]]) -> str:
    """The table (x the copy floor, node counts in brackets) and its summary."""
    columns = _columns(rows)
    lines = [
        f"{label}: median ms of the floor, then each variant x the floor (nodes); the "
        "named forms as emitted for the backend's own target\n",
        *table_head(["shape", "dims", "MiB", "floor ms", *columns]),
    ]
    for row in rows:
        case: Case = row["case"]  # type: ignore[assignment]
        seconds, _, which = _floor(row)
        cells = ratio_cells(row, columns, lambda name, row=row: _over_floor(row, name))
        lines.append(
            f"| {case.label} | {row['dims']} | {case.nbytes / 2**20:.2f} | "
            f"{seconds * 1e3:.3f} ({which}) | " + " | ".join(cells) + " |"
        )
    lines.append("")
    for dims in dict.fromkeys(r["dims"] for r in rows):
        for name in (DEFAULT_BEFORE, "default", "own target", "finite target"):
            over = (_over_floor(r, name) for r in rows if r["dims"] == dims)
            ratios = [ratio for ratio in over if ratio is not None]
            if ratios:
                lines.append(
                    f"{name}, {dims} dims: geomean {statistics.geometric_mean(ratios):.2f}x "
                    f"the floor, worst {max(ratios):.2f}x  "
                )
    fractions = bar_fractions(rows)
    if fractions:
        lines += ["", BAR_INTRO, "", *table_head(_BAR_COLUMNS), *fractions]
    return "\n".join(lines)


GATHER_BAR, COPY_BAR = 1.2, 1.5
"""A backend's bar: its own gather alone times 1.2, or a copy times 1.5 (the looser)."""

BAR_INTRO = f"""\
Each default against the backend's bar, the looser of {GATHER_BAR}x its `gather alone` and \
{COPY_BAR}x the copy floor (1.00: at the bar; over 1, over it), and of the default's time \
the part beyond its gather alone: the index arithmetic, a fixed cost per node that no \
size of data pays back on a small tensor. `default before` has a row where it wrote \
another model than the default's."""

_BAR_COLUMNS = ("shape", "dims", "variant", "x the bar", "index arithmetic, of its time")


def bar_fractions(rows: Sequence[dict[str, object]]) -> list[str]:
    """A table row per case and default that ran beside its gather.

    The earlier default's row only where its model differs from the default's.
    """
    lines = []
    for row in rows:
        gather = _over_floor(row, "gather alone")
        if gather is None:
            continue
        bar = max(GATHER_BAR * gather, COPY_BAR)
        case: Case = row["case"]  # type: ignore[assignment]
        now = _over_floor(row, "default")
        for name in (DEFAULT_BEFORE, "default"):
            ratio = _over_floor(row, name)
            if ratio is None or (name == DEFAULT_BEFORE and ratio == now):
                continue  # the same model as the default's, timed once
            arithmetic = max(ratio - gather, 0.0) / ratio
            lines.append(
                f"| {case.label} | {row['dims']} | {name} | {ratio / bar:.2f} | "
                f"{arithmetic * 100:.0f} % |"
            )
    return lines
