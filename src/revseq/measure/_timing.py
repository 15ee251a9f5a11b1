"""Timing: interleaved rounds, paired medians, passes of fresh runners, rows of a page.

Every page times its variants the same way: each round runs every variant once, in a
rotating order, in this one process; a variant's time is divided by the first
variant's (the floor) of the same round before the median is taken, so machine noise
cancels instead of being measured. Each variant gets ``PLACEMENTS`` runners (where a
runner's buffers land biases it for its life), and a row is the median of ``passes``
passes of runners made anew.
"""

from __future__ import annotations

__all__ = [
    "PLACEMENTS",
    "Models",
    "RowTimer",
    "Timed",
    "Unusable",
    "distinct_models",
    "median_of_passes",
    "paired_medians",
    "placed_medians",
    "rows_of_passes",
    "time_once",
    "time_variants",
    "with_repeats",
]

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
import onnx

from revseq.backends import MeasuredOutputs
from revseq.measure._cases import Case, input_arrays, node_count

Models = Mapping[str, onnx.ModelProto | str]
Timed = tuple[dict[str, tuple[float, float]], dict[str, str], dict[str, int]]
"""One pass's figures: each label's (median seconds, ratio to the floor), a note for each
label that did not run, each timed model's node count."""


PLACEMENTS = 2
"""Runners (sessions, compiled modules) timed per variant, each in its own slot of the
interleaved rounds, the faster counting (``placed_medians``). Where a runner's buffers
land biases it for its whole life: two onnxruntime sessions of one model, timed side by
side in one process, measured 1.1x and 1.8x the copy of `[64, 32, 256]` float32."""


def placed_medians(
    variants: dict[str, Sequence[Callable[[], object]]], *, rounds: int, budget_s: float
) -> dict[str, tuple[float, float]]:
    """``paired_medians`` over each variant's runners, the faster runner counting.

    Ratios are to the first variant's faster runner.
    """
    slots = {
        f"{label}\t{k}": fn for label, fns in variants.items() for k, fn in enumerate(fns)
    }
    best: dict[str, tuple[float, float]] = {}
    for slot, (seconds, ratio) in paired_medians(
        slots, rounds=rounds, budget_s=budget_s
    ).items():
        label = slot.rsplit("\t", 1)[0]
        known = best.get(label, (seconds, ratio))
        best[label] = (min(known[0], seconds), min(known[1], ratio))
    base = best[next(iter(variants))][1]
    return {label: (seconds, ratio / base) for label, (seconds, ratio) in best.items()}


def distinct_models(
    models: Mapping[str, onnx.ModelProto | str],
) -> tuple[dict[str, onnx.ModelProto | str], dict[str, str]]:
    """The models to time, each distinct model once, and each repeat's first label.

    A target's chosen form is one of the form columns too (but a row Gather of
    single-element rows, which the named ``gather_rows`` emits as GatherElements does
    where that moves the type): timing the same model
    twice measures only where each runner's buffers landed (one onnxruntime model, two
    columns of one page: 1.92x and 1.18x the copy floor), so a repeat is timed once and
    shares its first label's figures (``with_repeats``).
    """
    first: dict[bytes, str] = {}
    distinct: dict[str, onnx.ModelProto | str] = {}
    repeats: dict[str, str] = {}
    for label, model in models.items():
        if isinstance(model, str):
            distinct[label] = model
            continue
        key = model.SerializeToString()
        if key in first:
            repeats[label] = first[key]
        else:
            first[key] = label
            distinct[label] = model
    return distinct, repeats


def with_repeats(
    result: Mapping[str, tuple[float, float]],
    repeats: Mapping[str, str],
    order: Sequence[str],
) -> dict[str, tuple[float, float]]:
    """``result`` with each repeat's figures copied from its first label's.

    Labels come in ``order`` (the models as given: the tables' columns follow it), then
    those of ``result`` it does not name.
    """
    shared = {label: result[first] for label, first in repeats.items() if first in result}
    merged = {**result, **shared}
    return {**{label: merged[label] for label in order if label in merged}, **merged}


def median_of_passes(
    passes: Sequence[Mapping[str, tuple[float, float]]],
) -> dict[str, tuple[float, float]]:
    """Each label's median seconds and median ratio over ``passes`` (``--passes``).

    Each pass times runners made anew (``placed_medians``): the load of this shared
    machine and where a runner's buffers land shift a whole pass, which interleaving
    within the pass does not cancel (one converted model measured 2.15-3.04x the copy
    floor of 16 MiB in five passes, 2.39x their median). A label missing from a pass
    (it failed there) counts over the passes that have it.
    """
    labels = dict.fromkeys(label for result in passes for label in result)
    return {
        label: (
            statistics.median(r[label][0] for r in passes if label in r),
            statistics.median(r[label][1] for r in passes if label in r),
        )
        for label in labels
    }


def paired_medians(
    variants: dict[str, Callable[[], object]], *, rounds: int, budget_s: float
) -> dict[str, tuple[float, float]]:
    """(median seconds, median ratio to the first variant) per variant, interleaved.

    Each round starts one variant further on, so that every variant runs at every place
    in the order as often: where a variant runs in a round biases its time (on this
    machine, onnxruntime's first two variants after its Identity of 2 MiB measured 1.8x
    the copy in a fixed order, the same model later in the round 1.1x).
    """
    for fn in variants.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    deadline = time.perf_counter() + budget_s
    for i in range(rounds):
        turn = i % len(order)
        for name, fn in order[turn:] + order[:turn]:
            times[name].append(time_once(fn))
        if i >= 4 and time.perf_counter() > deadline:
            break
    base = next(iter(variants))
    return {
        name: (
            statistics.median(ts),
            statistics.median(t / b for t, b in zip(ts, times[base], strict=True)),
        )
        for name, ts in times.items()
    }


def time_once(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` took; those it measured where it ran, if it says so.

    A runner in another process returns ``MeasuredOutputs``: its run timed there.
    """
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    return result.seconds if isinstance(result, MeasuredOutputs) else elapsed


class RowTimer(Protocol):
    """What one page times: a row's variants, and one pass over them with fresh runners."""

    def models(self, case: Case, dims: str, lens: np.ndarray) -> Models:
        """Each variant's model for the row, or why it has none."""
        ...

    def time(self, case: Case, feeds: dict[str, np.ndarray], models: Models) -> Timed:
        """One pass: every variant timed against the page's floor."""
        ...


def rows_of_passes(
    timer: RowTimer, cases: Sequence[Case], dims_kinds: Sequence[str], passes: int
) -> list[dict[str, object]]:
    """One row per (case, dims): ``passes`` passes of ``timer``, the median counting.

    Each pass makes its runners anew. A label's note is kept only where no pass timed it.
    """
    rng = np.random.default_rng(0)
    rows = []
    for case in cases:
        feeds = input_arrays(case, rng)
        for dims in dims_kinds:
            models = timer.models(case, dims, feeds["lens"])
            timed = [timer.time(case, feeds, models) for _ in range(passes)]
            result = median_of_passes([pass_result for pass_result, _, _ in timed])
            _, notes, nodes = timed[0]
            notes = {label: note for label, note in notes.items() if label not in result}
            rows.append(
                {"case": case, "dims": dims, "result": result, "notes": notes, "nodes": nodes}
            )
    return rows


def with_repeated_figures(
    result: Mapping[str, tuple[float, float]],
    notes: dict[str, str],
    nodes: dict[str, int],
    repeats: Mapping[str, str],
    order: Sequence[str],
) -> Timed:
    """A pass's figures with each repeated model's copied from its first label's.

    Its times (``with_repeats``, labels in ``order``), and its note where the first did
    not run, else its node count (``distinct_models``).
    """
    for label, first in repeats.items():
        if first in notes:
            notes[label] = notes[first]
        else:
            nodes[label] = nodes[first]
    return with_repeats(result, repeats, order), notes, nodes


class Unusable(Exception):
    """A variant that cannot be timed: its note says why (an error, wrong values)."""


def time_variants(
    variants: dict[str, list[Callable[[], object]]],
    models: Models,
    prepare: Callable[[onnx.ModelProto], list[Callable[[], object]]],
    *,
    rounds: int,
    budget_s: float,
    after: Mapping[str, list[Callable[[], object]]] | None = None,
) -> Timed:
    """One pass: ``variants`` (the floor first), then ``models`` as ``prepare`` runs them.

    ``models`` maps a label to a model or to why it has none; each distinct model is
    prepared once (``distinct_models``), ``prepare`` returning its calls (one per
    placement) or raising :class:`Unusable` with a note. ``after`` variants (numpy's
    copy) are timed too. Returns each label's median time and paired median ratio to
    the floor, a note for each label that did not run, and each timed model's node
    count, in the order of ``variants`` then ``models``.
    """
    order = [*variants, *models]
    distinct, repeats = distinct_models(models)
    timed = dict(variants)
    notes: dict[str, str] = {}
    nodes: dict[str, int] = {}
    for label, model in distinct.items():
        if isinstance(model, str):
            notes[label] = model
            continue
        try:
            timed[label] = prepare(model)
        except Unusable as e:
            notes[label] = str(e)
            continue
        nodes[label] = node_count(model)
    timed.update(after or {})
    result = placed_medians(timed, rounds=rounds, budget_s=budget_s)
    return with_repeated_figures(result, notes, nodes, repeats, order)
