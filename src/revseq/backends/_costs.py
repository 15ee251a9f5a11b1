"""What each form costs on a backend, measured there, for its profile (``revseq probe``).

A backend that lacks ReverseSequence has no native kernel to compare with: the floor is
a copy of the data, the slower of numpy's copy and the backend's own Identity of the
same tensor. Each form that ran exactly is timed interleaved with that floor, in this
process, and its cost is the geometric mean over the cases of its paired median ratio
to the floor (a ratio, never an absolute time: machines differ, ratios travel), with
its node count. The planner orders forms by these (``Profile.cheapest``).
"""

from __future__ import annotations

__all__ = ["COST_CASES", "COST_DIMS", "form_costs"]

import statistics
from collections.abc import Callable, Mapping

import numpy as np
import onnx

import revseq
from revseq import backends
from revseq._bench_backend import floor_ratio, floor_runners, time_on_floor
from revseq.bench import Case, input_arrays, native_model
from revseq.ops.profiles import Cost, Profile

COST_CASES: tuple[Case, ...] = (
    Case((200, 16, 8), 1, 0, "float32"),
    Case((64, 32, 256), 1, 0, "float32"),
    Case((256, 64, 256), 1, 0, "float32"),
)
"""Time-major float32 rows of several elements: 0.1, 2 and 16 MiB. (Single-element rows
take the matrix path of any form, whose order is fixed by measurement in the planner.)"""

COST_DIMS: tuple[str, ...] = ("static", "time+batch", "all")
"""The shape classes a cost is measured for (``revseq.bench``'s declared dims)."""


def _emitted(case: Case, kind: str, name: str, ops: Profile) -> onnx.ModelProto | str:
    """Form ``name`` as emitted for ``ops`` on the case's model with ``kind`` dims.

    Or why not. ``form@int32`` is emitted for ``ops`` without int64 index arithmetic.
    """
    form, target = ops.variant(name)
    if target is None:
        return f"{ops.name} has one kind of index arithmetic only"
    try:
        return revseq.inline(native_model(case, dims=kind), strategy=form, target=target)
    except revseq.RevseqError as e:
        return str(e)


def form_costs(
    name: str,
    ops: Profile,
    forms: Mapping[str, frozenset[str]],
    *,
    rounds: int = 15,
    budget_s: float = 1.0,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, dict[str, Cost]]:
    """Each form's cost on backend ``name``, per shape class, as emitted for ``ops``.

    ``forms`` holds the forms that ran exactly, by "static" and "dynamic": only those
    are timed. A form that fails here (an error timing it) gets no cost.
    """
    backend = backends.get(name)
    rng = np.random.default_rng(0)
    ratios: dict[str, dict[str, list[float]]] = {kind: {} for kind in COST_DIMS}
    nodes: dict[str, dict[str, int]] = {kind: {} for kind in COST_DIMS}
    for case in COST_CASES:
        feeds = input_arrays(case, rng)
        identities = floor_runners(backend, case)
        for kind in COST_DIMS:
            ran = forms.get("static" if kind == "static" else "dynamic", frozenset())
            models = {form: _emitted(case, kind, form, ops) for form in sorted(ran)}
            result, _, counts = time_on_floor(
                backend, identities, feeds, models, rounds=rounds, budget_s=budget_s
            )
            for form in ran & result.keys():
                ratios[kind].setdefault(form, []).append(result[form][1] / floor_ratio(result))
            if case is COST_CASES[1]:
                nodes[kind].update(counts)
            say(f"cost: {case.label} {kind}: timed {', '.join(sorted(result))}")
    return {
        kind: {
            form: Cost(round(statistics.geometric_mean(values), 2), nodes[kind][form])
            for form, values in sorted(ratios[kind].items())
            if len(values) == len(COST_CASES) and form in nodes[kind]
        }
        for kind in COST_DIMS
    }
