"""What each form costs on a backend, measured there, for its profile (``revseq probe``).

A backend that lacks ReverseSequence has no native kernel to compare with: the floor is
a copy of the data, the slower of numpy's copy and the backend's own Identity of the
same tensor. Each form that ran exactly is timed interleaved with that floor, in this
process, and its cost is the geometric mean over the cases of its paired median ratio
to the floor (a ratio, never an absolute time: machines differ, ratios travel), with
its node count. The planner orders forms by these (``Profile.cheapest``).
"""

from __future__ import annotations

__all__ = [
    "COST_CASES",
    "COST_CLASSES",
    "COST_DIMS",
    "MATRIX_CASES",
    "MATRIX_FORMS",
    "form_costs",
    "layout_costs",
    "timed_forms",
]

import dataclasses
import statistics
from collections.abc import Callable, Mapping

import numpy as np
import onnx

import revseq
from revseq import backends
from revseq._bench_backend import floor_ratio, time_pass
from revseq.bench import Case, input_arrays, median_of_passes, native_model
from revseq.ops.profiles import (
    GATHER_ELEMENTS_KINDS,
    MATRIX,
    MATRIX_STATIC,
    NARROW,
    Cost,
    Layout,
    Profile,
)
from revseq.ops.reference import reverse_sequence

COST_CASES: tuple[Case, ...] = (
    Case((200, 16, 8), 1, 0, "float32"),
    Case((64, 32, 256), 1, 0, "float32"),
    Case((256, 64, 256), 1, 0, "float32"),
)
"""Time-major float32 rows of several elements: 0.1, 2 and 16 MiB."""

COST_DIMS: tuple[str, ...] = ("static", "time+batch", "all")
"""The shape classes a cost is measured for (``revseq.bench``'s declared dims)."""

COST_CLASSES: tuple[str, ...] = (*COST_DIMS, MATRIX_STATIC, MATRIX)
"""Every class a profile's costs and layouts are kept for: the shape classes, and
single-element rows' static and symbolic ones."""

MATRIX_CASES: tuple[Case, ...] = (
    Case((2000, 16), 1, 0, "float32"),
    Case((8192, 64), 1, 0, "float32"),
    Case((16384, 256), 1, 0, "float32"),
)
"""Time-major float32 single-element rows, 0.1, 2 and 16 MiB, timed (``MATRIX_FORMS``)
with time and batch symbolic for the ``matrix`` class and static for ``matrix:static``."""

MATRIX_FORMS = frozenset(
    form + suffix
    for form in ("gather_elements", "gather_nd", "gather_rows")
    for suffix in ("", NARROW)
)
"""The forms timed on ``MATRIX_CASES``, each with either index type: GatherElements on
the data as a matrix, GatherND with one index tuple per element, and the row form's
Gather of single elements (``gather_rows``, emitted as for a type GatherElements does
not move: where it moves one, the row form named gathers as GatherElements does, and
``auto`` emits it so, as timed). Which is cheapest differs by backend: per element,
onnxruntime's GatherND costs several times its GatherElements, and tinygrad's less;
tract's row Gather costs less than half its GatherElements with static dims."""


def _without_gather_elements(ops: Profile) -> Profile:
    """``ops`` with no GatherElements (1-D or not) moving float32.

    The row form then gathers single-element rows by Gather.
    """
    if ops.dtypes is None:
        return ops
    kept = {
        gather: types - {"float32"} if gather in GATHER_ELEMENTS_KINDS else types
        for gather, types in ops.dtypes.items()
    }
    return dataclasses.replace(ops, dtypes=kept)


def _emitted(
    case: Case, kind: str, name: str, ops: Profile, *, single: bool = False
) -> onnx.ModelProto | str:
    """Form ``name`` as emitted for ``ops`` on the case's model with ``kind`` dims.

    Or why not. ``form@int32`` is emitted for ``ops`` without int64 index arithmetic,
    ``form@lean`` with the lean index, a form's own name without it
    (``Profile.variant``). With ``single`` (single-element rows), the row form as for a
    type GatherElements does not move (``MATRIX_FORMS``).
    """
    if single and name.startswith("gather_rows"):
        ops = _without_gather_elements(ops)
    form, target = ops.variant(name)
    if target is None:
        return f"{ops.name} has one kind of index arithmetic only"
    try:
        return revseq.inline(native_model(case, dims=kind), strategy=form, target=target)
    except revseq.RevseqError as e:
        return str(e)


def timed_forms(forms: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Per cost class, the forms ``form_costs`` times, of those that ran exactly."""
    static, dynamic = forms.get("static", frozenset()), forms.get("dynamic", frozenset())
    timing = {kind: static if kind == "static" else dynamic for kind in COST_DIMS}
    timing[MATRIX_STATIC] = static & MATRIX_FORMS
    timing[MATRIX] = dynamic & MATRIX_FORMS
    return timing


def _floor_ratios(
    backend: backends.Backend,
    case: Case,
    feeds: dict[str, np.ndarray],
    models: Mapping[str, onnx.ModelProto | str],
    *,
    rounds: int,
    budget_s: float,
    passes: int,
) -> tuple[dict[str, float], dict[str, int]]:
    """Each model's ratio to the copy floor, and the node counts of the first pass.

    The median of ``passes`` passes of fresh runners, the floor's too; a model that did
    not time (an error) has no ratio.
    """
    each = [
        time_pass(backend, case, feeds, models, rounds=rounds, budget_s=budget_s)
        for _ in range(passes)
    ]
    per_pass = [
        {label: (0.0, r[label][1] / floor_ratio(r)) for label in models.keys() & r.keys()}
        for r, _, _ in each
    ]
    medians = median_of_passes(per_pass)
    return {label: ratio for label, (_, ratio) in medians.items()}, each[0][2]


def form_costs(
    name: str,
    ops: Profile,
    forms: Mapping[str, frozenset[str]],
    *,
    rounds: int = 15,
    budget_s: float = 1.0,
    passes: int = 1,
    say: Callable[[str], None] = lambda _: None,
    only: Mapping[str, frozenset[str]] | None = None,
) -> dict[str, dict[str, Cost]]:
    """Each form's cost on backend ``name``, per shape class, as emitted for ``ops``.

    ``forms`` holds the forms that ran exactly, by "static" and "dynamic": only those
    are timed (``timed_forms``), and with ``only`` those it names per class. A form
    that fails here (an error timing it) gets no cost. Each case is timed in ``passes``
    passes of fresh runners, the floor's too, the median ratio counting
    (``revseq.bench.median_of_passes``): forms within a few percent of each other trade
    places between single passes.
    """
    backend = backends.get(name)
    rng = np.random.default_rng(0)
    timing = timed_forms(forms)
    if only is not None:
        timing = {cls: ran & only.get(cls, frozenset()) for cls, ran in timing.items()}
    # Per case: (the class its cost counts for, the dims it is emitted with, the forms).
    by_kind = [(kind, kind, timing[kind]) for kind in COST_DIMS]
    jobs = [(case, by_kind) for case in COST_CASES]
    by_matrix = [
        (MATRIX_STATIC, "static", timing[MATRIX_STATIC]),
        (MATRIX, "time+batch", timing[MATRIX]),
    ]
    jobs += [(case, by_matrix) for case in MATRIX_CASES]
    counted = (COST_CASES[1], MATRIX_CASES[1])  # node counts are those of the 2 MiB cases
    matrix = (MATRIX_STATIC, MATRIX)
    cases = {cls: len(MATRIX_CASES if cls in matrix else COST_CASES) for cls in COST_CLASSES}
    ratios: dict[str, dict[str, list[float]]] = {cls: {} for cls in COST_CLASSES}
    nodes: dict[str, dict[str, int]] = {cls: {} for cls in COST_CLASSES}
    for case, timed in jobs:
        feeds = input_arrays(case, rng)
        for cls, kind, ran in timed:
            if not ran:
                continue
            single = cls in matrix
            models = {
                form: _emitted(case, kind, form, ops, single=single) for form in sorted(ran)
            }
            medians, counts = _floor_ratios(
                backend, case, feeds, models, rounds=rounds, budget_s=budget_s, passes=passes
            )
            for form, ratio in medians.items():
                ratios[cls].setdefault(form, []).append(ratio)
            if case in counted:
                nodes[cls].update(counts)
            say(f"cost: {case.label} {kind}: timed {', '.join(sorted(medians))}")
    return {
        cls: {
            form: Cost(round(statistics.geometric_mean(values), 2), nodes[cls][form])
            for form, values in sorted(ratios[cls].items())
            if len(values) == cases[cls] and form in nodes[cls]
        }
        for cls in COST_CLASSES
        if ratios[cls] or cls not in matrix
    }


LAYOUT_CASES: tuple[Case, ...] = (
    Case((1000, 1, 16), 1, 0, "float32"),
    Case((400, 8, 64), 1, 0, "float32"),
    Case((64, 32, 256), 1, 0, "float32"),
    Case((256, 64, 256), 1, 0, "float32"),
)
"""Time-major float32 rows of several elements with a batch of 1, 8, 32 and 64 (up to 16
MiB): the swapped layout is onnxruntime's for short batches (a batch of 1 broadcasts
element by element in place), which the cost cases (batches of 16 to 64) hardly hold;
a layout may also win on 2 MiB and lose on 16 (onnx2torch, five passes: 1.12-1.14x in
place on ``[256, 64, 256]``)."""

LAYOUT_MATRIX_CASES: tuple[Case, ...] = (
    Case((8000, 1), 1, 0, "float32"),
    Case((2000, 16), 1, 0, "float32"),
    Case((8192, 64), 1, 0, "float32"),
    Case((16384, 256), 1, 0, "float32"),
)
"""The same for single-element rows, batches of 1, 16, 64 and 256 (up to 16 MiB)."""


def _class_cases() -> dict[str, tuple[tuple[Case, ...], str]]:
    """Per cost class, the cases its layout is timed on and the dims they are emitted with."""
    matrix = {MATRIX_STATIC: "static", MATRIX: "time+batch"}
    return {
        cls: (LAYOUT_MATRIX_CASES, matrix[cls]) if cls in matrix else (LAYOUT_CASES, cls)
        for cls in COST_CLASSES
    }


def _exact(backend: backends.Backend, model: onnx.ModelProto, case: Case) -> bool:
    """Whether ``model`` reverses the case's data exactly there, lengths 0, 1 and T too."""
    x = np.arange(int(np.prod(case.shape)), dtype=np.float32).reshape(case.shape)
    time_len, batch = case.shape[case.time_axis], case.shape[case.batch_axis]
    lens = np.resize(np.array([time_len, 0, 1, 2, time_len - 1], np.int64), batch)
    try:
        (got,) = backend.run(model, {"x": x, "lens": lens})
    except revseq.RevseqError:  # a layout the backend cannot run is not chosen
        return False
    expected = reverse_sequence(x, lens, batch_axis=case.batch_axis, time_axis=case.time_axis)
    return np.asarray(got).tobytes() == expected.tobytes()


def layout_costs(
    name: str,
    profile: Profile,
    *,
    rounds: int = 15,
    budget_s: float = 1.0,
    passes: int = 1,
    say: Callable[[str], None] = lambda _: None,
    only: frozenset[str] | None = None,
) -> dict[str, Layout]:
    """Per cost class, whether ``profile``'s own output computes its index in place.

    ``profile`` holds the backend's costs: what ``auto`` emits for it (its cheapest
    form) is timed with the index swapped (onnxruntime's layout: transposed, and
    single-element data transposed) and in place, interleaved against the copy floor,
    on the class's layout cases whose output the layout changes (with static dims, a
    short batch); ``Layout.measured`` chooses by their paired median ratios. A class
    whose output it changes in no case gets no entry; ``only`` limits the classes
    timed.
    """
    backend = backends.get(name)
    rng = np.random.default_rng(0)
    layouts: dict[str, Layout] = {}
    for cls, (cases, kind) in _class_cases().items():
        if only is not None and cls not in only:
            continue
        swapped_target = profile.laid_out(cls, in_place=False)
        in_place_target = profile.laid_out(cls, in_place=True)
        ratios: dict[str, list[float]] = {"swapped": [], "in_place": []}
        exact = True
        for case in cases:
            native = native_model(case, dims=kind)
            try:
                models = {
                    "swapped": revseq.inline(native, target=swapped_target),
                    "in_place": revseq.inline(native, target=in_place_target),
                }
            except revseq.RevseqError:
                continue
            if models["swapped"].SerializeToString() == models["in_place"].SerializeToString():
                continue  # the layout does not apply to this case's output
            exact = exact and _exact(backend, models["in_place"], case)
            medians, _ = _floor_ratios(
                backend,
                case,
                input_arrays(case, rng),
                models,
                rounds=rounds,
                budget_s=budget_s,
                passes=passes,
            )
            for label, ratio in medians.items():
                ratios[label].append(ratio)
        timed = len(ratios["swapped"])
        if not timed or len(ratios["in_place"]) != timed:
            continue
        layout = Layout.measured(ratios["swapped"], ratios["in_place"], exact=exact)
        layouts[cls] = layout
        say(
            f"layout: {cls}: swapped {layout.swapped_ratio}x, in place "
            f"{layout.in_place_ratio}x{'' if exact else ' (not exact)'}: "
            f"{'in place' if layout.in_place else 'swapped'}"
        )
    return layouts
