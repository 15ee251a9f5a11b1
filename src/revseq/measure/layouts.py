"""The index layout each backend's own output runs cheaper in, measured there.

onnxruntime runs a time-major index fastest computed as ``[B, T]`` and transposed where
the batch is short (``ops/forms/_layout.py``); other backends may run it cheaper in place. The
probe times the backend's own output both ways per cost class, on batches of 1 to 256,
and records a :class:`~revseq.ops.targets.profile.Layout`; the planner computes the index in
place (``Index:in_place``) where that ran exactly and no batch took it beyond the tie.
"""

from __future__ import annotations

__all__ = [
    "LAYOUT_CASES",
    "LAYOUT_MATRIX_CASES",
    "laid_out",
    "layout_costs",
    "measured_layout",
]

import dataclasses
import statistics
from collections.abc import Callable, Sequence

import numpy as np
import onnx

import revseq
from revseq import backends
from revseq.equivalence.inputs.values import held
from revseq.measure._cases import Case, input_arrays, native_model
from revseq.measure.costs import floor_ratios
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets.cost import COST_TIE
from revseq.ops.targets.profile import Layout, Profile
from revseq.ops.vocabulary import (
    COST_CLASSES,
    MATRIX,
    MATRIX_STATIC,
    STATIC,
    TIME_BATCH,
)


def measured_layout(
    swapped: Sequence[float], in_place: Sequence[float], *, exact: bool
) -> Layout:
    """The layout timed so, case by case, and the geomean of each.

    In place where it ran exactly and no case took it beyond the tie of swapped (it
    has fewer nodes, as tied forms go; a layout loses on some batch sizes by up to
    3x: onnxruntime's batch of 1).
    """
    chosen = exact and all(i <= s * COST_TIE for s, i in zip(swapped, in_place, strict=True))
    return Layout(
        chosen,
        round(statistics.geometric_mean(swapped), 2),
        round(statistics.geometric_mean(in_place), 2),
    )


def laid_out(profile: Profile, cost_class: str, *, in_place: bool) -> Profile:
    """``profile`` computing ``cost_class``'s index as told, untimed: what is timed.

    Each way forced, whatever layouts the profile already holds (a kept probe's). Not
    for a combined profile, whose own layouts the planner does not read.
    """
    assert not profile.members, "a layout is forced on one backend's profile"
    forced = Layout(in_place=in_place, swapped_ratio=0.0, in_place_ratio=0.0)
    layouts = {**(profile.layouts or {}), cost_class: forced}
    return dataclasses.replace(profile, layouts=layouts)


LAYOUT_CASES: tuple[Case, ...] = (
    Case((1000, 1, 16), 1, 0, "float32"),
    Case((400, 8, 64), 1, 0, "float32"),
    Case((64, 32, 256), 1, 0, "float32"),
    Case((256, 64, 256), 1, 0, "float32"),
)
"""Time-major float32 rows of several elements with a batch of 1, 8, 32 and 64 (up to 16
MiB): the swapped layout is onnxruntime's for short batches (a batch of 1 broadcasts
element by element in place), which the cost cases (batches of 16 to 64) hardly hold;
a layout may also win on 2 MiB and lose on 16 (a converter's module, five passes:
1.12-1.14x in place on ``[256, 64, 256]``)."""

LAYOUT_MATRIX_CASES: tuple[Case, ...] = (
    Case((8000, 1), 1, 0, "float32"),
    Case((2000, 16), 1, 0, "float32"),
    Case((8192, 64), 1, 0, "float32"),
    Case((16384, 256), 1, 0, "float32"),
)
"""The same for single-element rows, batches of 1, 16, 64 and 256 (up to 16 MiB)."""


def _class_cases() -> dict[str, tuple[tuple[Case, ...], str]]:
    """Per cost class, the cases its layout is timed on and the dims they are emitted with."""
    matrix = {MATRIX_STATIC: STATIC, MATRIX: TIME_BATCH}
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
    kept = held({"x": x}, backend.storage)["x"]  # as the backend holds it
    b, t = case.batch_axis, case.time_axis
    expected = reverse_sequence(kept, lens, batch_axis=b, time_axis=t)
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
    short batch); ``measured_layout`` chooses by their paired median ratios. A class
    whose output it changes in no case gets no entry; ``only`` limits the classes
    timed.
    """
    backend = backends.get(name)
    rng = np.random.default_rng(0)
    layouts: dict[str, Layout] = {}
    for cls, (cases, kind) in _class_cases().items():
        if only is not None and cls not in only:
            continue
        swapped_target = laid_out(profile, cls, in_place=False)
        in_place_target = laid_out(profile, cls, in_place=True)
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
            medians, _ = floor_ratios(
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
        layout = measured_layout(ratios["swapped"], ratios["in_place"], exact=exact)
        layouts[cls] = layout
        say(
            f"layout: {cls}: swapped {layout.swapped_ratio}x, in place "
            f"{layout.in_place_ratio}x{'' if exact else ' (not exact)'}: "
            f"{'in place' if layout.in_place else 'swapped'}"
        )
    return layouts
