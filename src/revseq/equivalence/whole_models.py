"""The whole models compared in onnxruntime, output by output, level by level.

A difference is reported as the first counterexample, but one found with optimisations
on is set aside where the optimiser changes the reference's own outputs: the candidate
matched the reference with them off on the same inputs, and two differently optimised
programs differing says nothing of the rewrite.
"""

from __future__ import annotations

__all__ = ["compare_models", "compare_whole", "prepared_whole", "storage_hint"]

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

from revseq.equivalence._runners import Engine, Runner, fed_as_declared, runners
from revseq.equivalence.blame import AMBIGUOUS, fails_alike, refused_op
from revseq.equivalence.inputs import Inputs
from revseq.equivalence.reports import (
    Counterexample,
    Largest,
    Progress,
    WholeComparison,
    first_difference,
    first_difference_beyond,
    largest,
    stage,
)
from revseq.errors import CheckError, RevseqError, one_line


def compare_whole(
    ref_runners: dict[str, Runner],
    cand_runners: dict[str, Runner],
    input_sets: Sequence[Inputs],
    output_names: Sequence[str],
    levels: Sequence[str],
    *,
    tolerance: tuple[float, float] | None,
    progress: Progress | None,
    engine: str = "onnxruntime",
) -> WholeComparison:
    """The whole models' outputs compared, trial by trial and level by level.

    A difference at a level with optimisations on is set aside, not reported, where
    the optimiser changes the reference's own outputs on the same inputs (they differ
    from its run with optimisations off, which the candidate matched): the optimiser
    then computes two different programs, and the difference says nothing of the
    rewrite. Each reversal alone is still compared with optimisations on.

    Bit for bit, the first difference ends the comparison. Within a ``tolerance``
    (across runtimes, the candidate on ``engine``), every trial is compared, and each
    output's largest errors are measured over all of them.
    """
    compared = 0
    set_aside: list[str] = []
    found: tuple[Counterexample, str] | None = None
    errors: dict[str, Largest] = {}
    for trial, feeds in enumerate(input_sets):
        plain: list[np.ndarray] | None = None  # the reference, optimisations off
        for level in levels:
            expected, got = _run_both(
                ref_runners[level],
                cand_runners[level],
                feeds,
                trial,
                progress if tolerance is not None else None,
                engine,
            )
            if level == "off":
                plain = expected
            for name, a, b in zip(output_names, expected, got, strict=True):
                if tolerance is None:
                    difference = first_difference(a, b)
                else:
                    _measure(errors, name, a, b)
                    rtol, atol = tolerance
                    difference = first_difference_beyond(a, b, rtol=rtol, atol=atol)
                if difference is None or found is not None:
                    continue
                moved = _moved_by_optimiser(plain, expected, output_names)
                if tolerance is None and level != "off" and moved is not None:
                    set_aside.append(
                        f"trial {trial}, optimisations {level}: {name!r} differs, and "
                        f"onnxruntime's optimiser changes the reference's own {moved!r} "
                        "(it differs from its run with optimisations off)"
                    )
                    break
                example = Counterexample(
                    trial, feeds, name, difference.index, difference.expected, difference.got
                )
                where = f"output {name!r} differs {difference.where} in trial {trial}"
                found = (example, f"{where} (optimisations {level})")
                if tolerance is None:
                    return WholeComparison(compared + 1, example, found[1], ())
            else:
                compared += len(output_names)
        if progress is not None:
            progress(f"check: trial {trial + 1}/{len(input_sets)} of the whole models done")
    example, where = found if found is not None else (None, "")
    return WholeComparison(
        compared, example, where, () if found else tuple(set_aside), tuple(errors.values())
    )


def _run_both(
    ref: Runner,
    cand: Runner,
    feeds: Inputs,
    trial: int,
    progress: Progress | None,
    engine: str,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Both models' outputs on ``feeds``; a failure to run is one line."""
    try:
        expected = ref(feeds)
        with stage(progress, f"trial {trial + 1}: running the candidate on {engine}"):
            got = cand(feeds)
    except RevseqError:
        raise
    except Exception as e:
        raise CheckError(f"running trial {trial} failed: {one_line(e)}") from e
    return expected, got


def _measure(errors: dict[str, Largest], name: str, a: np.ndarray, b: np.ndarray) -> None:
    """Merge one output's largest errors into those measured so far."""
    measured = largest(name, a, b)
    if measured is not None:
        errors[name] = errors[name].merged(measured) if name in errors else measured


def _moved_by_optimiser(
    plain: Sequence[np.ndarray] | None, optimised: Sequence[np.ndarray], names: Sequence[str]
) -> str | None:
    """The first output the optimiser changed in the reference, if it changed one."""
    if plain is None:
        return None
    for name, a, b in zip(names, plain, optimised, strict=True):
        if first_difference(a, b) is not None:
            return name
    return None


def storage_hint(engine: Engine) -> str:
    """Where the engine holds floats narrower, what a whole-model tolerance must allow."""
    narrower = ", ".join(f"{wide} as {narrow}" for wide, narrow in engine.storage.items())
    if not narrower:
        return ""
    return (
        f" ({engine.name} holds {narrower}: its arithmetic is that precise, so compare "
        "whole models within --rtol 1e-2 --atol 1e-3)"
    )


def prepared_whole(
    engine: Engine,
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    progress: Progress | None = None,
) -> Runner:
    """CAND whole on the engine; a refusal says which op the runtime named, and whose.

    A backend may convert at the first run: its runs are watched too.
    """

    def watched(call: Callable, arg: object, feeds: Inputs | None) -> Any:
        try:
            return call(arg)
        except RevseqError as e:
            named = refused_op(str(e), ref, cand)
            # Unless it names only what revseq wrote: what the model's own ops do alone
            # (a message may name an op of the model's that is not where it failed).
            if named is None or AMBIGUOUS in named or "the model's own" in named:
                named = "; ".join(filter(None, [named, fails_alike(ref, engine, feeds)]))
            raise CheckError(f"{one_line(e, 300)}; {named}") from e

    with stage(progress, f"preparing the candidate whole on {engine.label}"):
        prepared = watched(engine.prepare, cand, None)
    return lambda feeds: watched(prepared, feeds, feeds)


def compare_models(
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    engine: Engine,
    levels: tuple[str, ...],
    input_sets: Sequence[Inputs],
    tolerance: tuple[float, float] | None,
    progress: Progress | None,
) -> tuple[WholeComparison, dict[str, str]]:
    """The whole models' outputs compared, and what ran each.

    Both in onnxruntime at each level, bit for bit; with a ``tolerance``, the candidate
    whole on ``engine`` (a comparison across runtimes).
    """
    ref_runners, ref_engine = runners(ref, levels)
    if tolerance is not None:
        runner = fed_as_declared(cand, prepared_whole(engine, ref, cand, progress))
        cand_runners, cand_engine = dict.fromkeys(levels, runner), engine.label
    else:
        cand_runners, cand_engine = runners(cand, levels)
        cand_runners = {k: fed_as_declared(cand, r) for k, r in cand_runners.items()}
    whole = compare_whole(
        ref_runners, cand_runners, input_sets, [o.name for o in ref.graph.output], levels,
        tolerance=tolerance, progress=progress, engine=cand_engine,
    )  # fmt: skip
    return whole, {"reference": ref_engine, "candidate": cand_engine}
