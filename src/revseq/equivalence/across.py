"""Whose a whole-model difference across runtimes is: revseq's, or the runtime's own.

A user who checks an inlined model on their runtime asks whether revseq changed
anything. The runtime's own kernels (a MatMul, an LSTM) round differently from
onnxruntime's, or compute some op wrong whatever revseq wrote; neither is revseq's. So
three questions are asked in turn:

1. Does the candidate compute the reference's outputs bit for bit in onnxruntime
   (before the runtime is asked anything)? If not, what revseq
   wrote is wrong on every runtime: the first tensor that differs there is named.
2. Where the whole candidate on the runtime differs beyond the tolerance: does each
   decomposition revseq wrote, run alone on the runtime, give the native op's output
   bit for bit? If not, that node is named.
3. Where does the difference start on the runtime? At one of the model's own ops
   (then revseq's part is exact, and the runtime's own computation differs), or at a
   decomposition in its context.
"""

from __future__ import annotations

__all__ = ["across_runtimes", "at_sizes", "whose_difference"]

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import onnx
import onnx_ir as ir

from revseq.equivalence._decompositions_alone import nodes_report
from revseq.equivalence._runners import Engine
from revseq.equivalence.blame import OWN, REVSEQ, first_differing_tensor
from revseq.equivalence.inputs import Inputs
from revseq.equivalence.reports import NodeReport, Progress, WholeComparison, Whose, stage
from revseq.equivalence.whole_models import compare_models, storage_hint
from revseq.errors import CheckError, RevseqError
from revseq.passes.graph import FixInputShapesPass


def whose_difference(  # noqa: PLR0913 (the check's own options, passed on)
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    example_inputs: Inputs,
    input_sets: Sequence[Inputs],
    engine: Engine,
    tolerance: tuple[float, float],
    *,
    seed: int,
    specials: bool,
    progress: Progress | None,
) -> Whose:
    """Whose the difference found on ``example_inputs`` is (questions 2 and 3).

    Its ``alone_on`` is the runtime's label where every decomposition ran alone there.
    """
    failed = ""
    with stage(progress, f"running each decomposition alone on {engine.label}"):
        try:
            nodes = nodes_report(
                ref, cand, input_sets, engine, seed=seed, progress=None, specials=specials
            )
        except RevseqError as e:  # a decomposition alone fails there: not proven exact
            nodes, failed = [], f" (revseq's decompositions alone fail on {engine.name}: {e})"
    whose = _whose(ref, cand, example_inputs, engine, tolerance, nodes, failed, progress)
    ran = nodes and all(n.error is None for n in nodes)
    return dataclasses.replace(whose, alone_on=engine.label if ran else "")


def _whose(
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    example_inputs: Inputs,
    engine: Engine,
    tolerance: tuple[float, float],
    nodes: Sequence[NodeReport],
    failed: str,
    progress: Progress | None,
) -> Whose:
    """Whose the difference is, given each decomposition's run alone on the runtime."""
    wrong = next((n for n in nodes if n.difference is not None), None)
    if wrong is not None:
        return Whose(
            f"revseq's decomposition of node {wrong.name or '(unnamed)'} in {wrong.scope} "
            f"differs alone on {engine.label}: {wrong.difference}",
            runtime=False,
        )
    with stage(progress, f"finding the first tensor that differs on {engine.label}"):
        located = first_differing_tensor(ref, cand, example_inputs, engine, tolerance)
    unchecked = [n for n in nodes if n.error is not None]
    if failed:
        return Whose(f"{located}{failed}", runtime=False)
    if (
        located.writer == REVSEQ
        and nodes
        and not unchecked
        and located.dtype in engine.storage  # what it holds narrower differs
    ):
        # Each moves exactly what the runtime holds: what it holds (float32 as float16)
        # differs from onnxruntime's values, the first tensor compared being its output.
        narrower = ", ".join(f"{wide} as {narrow}" for wide, narrow in engine.storage.items())
        return Whose(
            f"revseq's part is exact: each of its {len(nodes)} decomposition(s) moves "
            f"exactly what {engine.name} holds, alone on it; {engine.name} holds "
            f"{narrower}, and what it holds differs: {located}",
            runtime=True,
        )
    if located.writer != OWN or unchecked:
        alone = f" ({len(unchecked)} decomposition(s) not checked alone)" if unchecked else ""
        return Whose(f"{located}{alone}", runtime=False)
    alone = (
        f", and its {len(nodes)} decomposition(s) run alone on {engine.label} bit for bit"
        if nodes
        else ""
    )
    return Whose(
        "revseq's part is exact: the candidate computes the reference's outputs bit for "
        f"bit in onnxruntime{alone}; {engine.name}'s own computation of the model's ops "
        f"differs: {located} (on the inputs listed below: --val-range NAME:[LO,HI] states "
        "an input's real range)",
        runtime=True,
    )


def _in_onnxruntime(
    ref: onnx.ModelProto, cand: onnx.ModelProto, input_sets: Sequence[Inputs]
) -> WholeComparison:
    """Both models in onnxruntime, optimisations off, bit for bit (question 1)."""
    try:
        return compare_models(ref, cand, Engine(None), ("off",), input_sets, None, None)[0]
    except CheckError as e:  # the reference ran on these inputs when they were drawn
        raise CheckError(
            f"the candidate fails in onnxruntime, where the reference runs: {e}"
        ) from e


def _wrong_in_onnxruntime(
    ref: onnx.ModelProto, cand: onnx.ModelProto, whole: WholeComparison, engine: Engine
) -> Whose:
    """What :func:`_in_onnxruntime` found, said whole: revseq's output is wrong."""
    assert whole.example is not None
    located = first_differing_tensor(ref, cand, whole.example.inputs, Engine(None), None)
    return Whose(
        f"the candidate differs from the reference in onnxruntime, bit for bit, so on "
        f"{engine.name} too: {located}",
        runtime=False,
    )


def across_runtimes(
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    engine: Engine,
    input_sets: Sequence[Inputs],
    tolerance: tuple[float, float],
    **how: Any,
) -> tuple[WholeComparison, dict[str, str], list[NodeReport], Whose]:
    """The whole candidate on the runtime, once what revseq wrote is exact at home.

    First in onnxruntime, bit for bit: the whole models, and each decomposition alone
    (lengths 0, 1 and T among them: a whole model's own may never reverse 2 steps).
    What differs there is wrong on every runtime, and the runtime is not asked. Then
    the whole candidate on the runtime within ``tolerance``, and whose a difference
    is (``how``: the check's seed, specials and progress).
    """
    at_home = {"reference": "onnxruntime", "candidate": "onnxruntime"}
    wrong = _in_onnxruntime(ref, cand, input_sets)
    if wrong.example is not None:
        return wrong, at_home, [], _wrong_in_onnxruntime(ref, cand, wrong, engine)
    with stage(how["progress"], "running each decomposition alone in onnxruntime"):
        nodes = nodes_report(
            ref, cand, input_sets, Engine(None), seed=how["seed"], progress=None,
            specials=how["specials"],
        )  # fmt: skip
    if any(node.difference is not None for node in nodes):
        return wrong, {**at_home, "decompositions": "onnxruntime"}, nodes, Whose("", False)
    whole, engines = compare_models(
        ref, cand, engine, ("on",), input_sets, tolerance, how["progress"]
    )
    whose = _located(ref, cand, whole, input_sets, engine, tolerance, **how)
    if nodes:
        engines["decompositions"] = "onnxruntime" + (
            f" (against the native op), {whose.alone_on} (each alone)"
            if whose.alone_on
            else ""
        )
    return whole, engines, nodes, whose


def _located(
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    whole: WholeComparison,
    input_sets: Sequence[Inputs],
    engine: Engine,
    tolerance: tuple[float, float],
    **how: Any,
) -> Whose:
    """Whose a whole-model difference across runtimes is, and what the backend stores.

    ``how``: the check's seed, specials and progress.
    """
    if whole.example is None:
        return Whose("", runtime=False)
    whose = whose_difference(
        ref, cand, whole.example.inputs, input_sets, engine, tolerance, **how
    )
    return dataclasses.replace(whose, text=f"{whose.text}{storage_hint(engine)}")


def at_sizes(proto: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    """``proto`` with the given inputs' sizes fixed, and every symbol they bind.

    A runtime that converts for fixed shapes then converts at the sizes
    the user gave, as it will in their deployment, not at symbolic dims.
    """
    model = ir.from_proto(proto)
    try:
        FixInputShapesPass(shapes)(model)
    except RevseqError as e:  # a name the model lacks, another rank: said as the check's
        raise CheckError(str(e)) from e
    return ir.to_proto(model)
