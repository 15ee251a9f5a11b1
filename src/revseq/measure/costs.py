"""What each form costs on a backend, measured there, for its profile (``revseq probe``).

A backend that lacks ReverseSequence has no native kernel to compare with: the floor is
a copy of the data, the slower of numpy's copy and the backend's own Identity of the
same tensor. Each form that ran exactly is timed interleaved with that floor, in this
process: its cost is its paired median ratio to the floor in each case (a ratio, never
an absolute time: machines differ, ratios travel), each case's with its size and their
geometric mean, with its node count. The planner ranks forms by these
(``revseq.passes.inline.ranking``).
"""

from __future__ import annotations

__all__ = [
    "COST_CASES",
    "MATRIX_CASES",
    "MATRIX_FORMS",
    "floor_ratios",
    "form_costs",
    "timed_forms",
]

import dataclasses
import statistics
from collections.abc import Callable, Mapping

import numpy as np
import onnx

import revseq
from revseq import backends
from revseq.measure._cases import Case, input_arrays, native_model
from revseq.measure._timing import median_of_passes
from revseq.measure.floor import floor_ratio, time_pass
from revseq.ops.targets.cost import Cost
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import (
    COST_CLASSES,
    DYNAMIC,
    FORM_NAMES,
    GATHER_ELEMENTS_KINDS,
    GATHER_ROWS,
    INT32_INDEX_SUFFIX,
    MATRIX,
    MATRIX_STATIC,
    SHAPE_CLASSES,
    STATIC,
    TIME_BATCH,
)

COST_CASES: tuple[Case, ...] = (
    Case((200, 16, 8), 1, 0, "float32"),
    Case((64, 32, 256), 1, 0, "float32"),
    Case((256, 64, 256), 1, 0, "float32"),
)
"""Time-major float32 rows of several elements: 0.1, 2 and 16 MiB."""

MATRIX_CASES: tuple[Case, ...] = (
    Case((2000, 16), 1, 0, "float32"),
    Case((8192, 64), 1, 0, "float32"),
    Case((16384, 256), 1, 0, "float32"),
)
"""Time-major float32 single-element rows, 0.1, 2 and 16 MiB, timed (``MATRIX_FORMS``)
with time and batch symbolic for the ``matrix`` class and static for ``matrix:static``."""

MATRIX_FORMS = frozenset(
    form + suffix for form in FORM_NAMES for suffix in ("", INT32_INDEX_SUFFIX)
)
"""The forms timed on ``MATRIX_CASES``, each with either index type: GatherElements on
the data as a matrix, GatherND with one index tuple per element, and the row form's
Gather of single elements (``gather_rows``, emitted as for a type GatherElements does
not move: where it moves one, the row form named gathers as GatherElements does, and
``auto`` emits it so, as timed). Which is cheapest differs by backend: per element,
onnxruntime's GatherND costs several times its GatherElements, and another runtime's
less; a row Gather can cost less than half a GatherElements with static dims."""


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
    if single and name.startswith(GATHER_ROWS):
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
    static, dynamic = forms.get(STATIC, frozenset()), forms.get(DYNAMIC, frozenset())
    timing = {kind: static if kind == STATIC else dynamic for kind in SHAPE_CLASSES}
    timing[MATRIX_STATIC] = static & MATRIX_FORMS
    timing[MATRIX] = dynamic & MATRIX_FORMS
    return timing


def floor_ratios(
    backend: backends.Backend,
    case: Case,
    feeds: dict[str, np.ndarray],
    models: Mapping[str, onnx.ModelProto | str],
    *,
    rounds: int,
    budget_s: float,
    passes: int,
    reversals: bool = True,
) -> tuple[dict[str, float], dict[str, int]]:
    """Each model's ratio to the copy floor, and the node counts of the first pass.

    The median of ``passes`` passes of fresh runners, the floor's too; a model that did
    not time (an error) has no ratio. ``reversals``: as ``time_pass`` takes it.
    """
    each = [
        time_pass(
            backend, case, feeds, models, rounds=rounds, budget_s=budget_s, reversals=reversals
        )
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

    ``forms`` holds the forms that ran exactly, by shape kind: only those
    are timed (``timed_forms``), and with ``only`` those it names per class. A form
    that fails here (an error timing it) gets no cost. Each case is timed in ``passes``
    passes of fresh runners, the floor's too, the median ratio counting
    (``revseq.measure._timing.median_of_passes``): forms within a few percent trade
    places between single passes.
    """
    backend = backends.get(name)
    rng = np.random.default_rng(0)
    timing = timed_forms(forms)
    if only is not None:
        timing = {cls: ran & only.get(cls, frozenset()) for cls, ran in timing.items()}
    # Per case: (the class its cost counts for, the dims it is emitted with, the forms).
    by_kind = [(kind, kind, timing[kind]) for kind in SHAPE_CLASSES]
    jobs = [(case, by_kind) for case in COST_CASES]
    by_matrix = [
        (MATRIX_STATIC, STATIC, timing[MATRIX_STATIC]),
        (MATRIX, TIME_BATCH, timing[MATRIX]),
    ]
    jobs += [(case, by_matrix) for case in MATRIX_CASES]
    counted = (COST_CASES[1], MATRIX_CASES[1])  # node counts are those of the 2 MiB cases
    matrix = (MATRIX_STATIC, MATRIX)
    cases = {cls: len(MATRIX_CASES if cls in matrix else COST_CASES) for cls in COST_CLASSES}
    ratios: dict[str, dict[str, list[tuple[int, float]]]] = {cls: {} for cls in COST_CLASSES}
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
            medians, counts = floor_ratios(
                backend, case, feeds, models, rounds=rounds, budget_s=budget_s, passes=passes
            )
            for form, ratio in medians.items():
                ratios[cls].setdefault(form, []).append((case.nbytes, ratio))
            if case in counted:
                nodes[cls].update(counts)
            say(f"cost: {case.label} {kind}: timed {', '.join(sorted(medians))}")
    return {
        cls: {
            form: _cost(sizes, nodes[cls][form])
            for form, sizes in sorted(ratios[cls].items())
            if len(sizes) == cases[cls] and form in nodes[cls]
        }
        for cls in COST_CLASSES
        if ratios[cls] or cls not in matrix
    }


def _cost(sizes: list[tuple[int, float]], nodes: int) -> Cost:
    """The cost of ratios timed at sizes (bytes, ratio): their geomean, and each one."""
    mean = statistics.geometric_mean(ratio for _, ratio in sizes)
    by_bytes = tuple(sorted((nbytes, round(ratio, 2)) for nbytes, ratio in sizes))
    return Cost(round(mean, 2), nodes, by_bytes)
