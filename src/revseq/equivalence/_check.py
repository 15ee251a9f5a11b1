"""Equivalence checking: is the candidate the reference, bit for bit, where it will run?

Two questions, answered on the same generated inputs:

- **The whole model, in onnxruntime**: both models run in onnxruntime (graph
  optimisations off and on), every output compared bit for bit. This proves the rewrite
  changed nothing else.
- **Each decomposition, node by node, on the backend** (onnxruntime when none is named):
  for every ReverseSequence of the reference, the candidate's replacement of it is cut
  out (:mod:`~revseq.equivalence._counterparts`) and run alone on the backend, on the
  values the node actually receives in a reference run, with the model's own lengths
  and with generated ones spanning 0, 1 and T; its output is compared bit for bit with
  the native op's. Only the reversal is compared across runtimes, so a MatMul that
  rounds differently on the backend, or an RNN the backend lacks, stands in nobody's
  way.

Comparing the whole model across runtimes is available too (``whole_model=True``), with
an explicit tolerance, and is reported as such, with whose a difference is. A check in
which no reversal of two or more steps happened cannot tell a reversal from the
identity: it says so (``exercised``) and never calls that "bit-identical".
"""

from __future__ import annotations

__all__ = ["WHOLE_MODEL_ATOL", "WHOLE_MODEL_RTOL", "check"]

import logging
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from revseq.equivalence._decompositions_alone import nodes_report
from revseq.equivalence._runners import (
    Capturer,
    Engine,
    ModelLike,
    declared_domain,
    refuse_invalid_nodes,
    to_proto,
    with_definition,
)
from revseq.equivalence.across import across_runtimes, at_sizes
from revseq.equivalence.inputs import InputGenerator, Inputs
from revseq.equivalence.inputs.sizes import GivenInputs, fixed_by, given_inputs
from revseq.equivalence.reports import (
    CheckReport,
    NodeReport,
    Whose,
    verdict_message,
)
from revseq.equivalence.whole_models import compare_models
from revseq.errors import CheckError
from revseq.ops.vocabulary import FINITE, FINITE_DOMAIN
from revseq.passes import is_reverse_sequence, walk
from revseq.passes.graph.scopes import run_time_input_infos

logger = logging.getLogger(__name__)

WHOLE_MODEL_RTOL = 1e-5
"""The relative tolerance of a whole-model comparison across runtimes, by default."""

WHOLE_MODEL_ATOL = 1e-6
"""The absolute tolerance of a whole-model comparison across runtimes, by default."""


def _run_inputs(proto: onnx.ModelProto) -> list[str]:
    return [i.name for i in run_time_input_infos(proto)]


def _has_reverse_sequence(proto: onnx.ModelProto) -> bool:
    return any(is_reverse_sequence(s.node) for s in walk(ir.from_proto(proto)))


def _longest_reversal(proto: onnx.ModelProto, input_sets: Sequence[Inputs]) -> int:
    """The longest reversal the main graph's ReverseSequence nodes make on these inputs.

    Each node's data and lengths are read from a run of ``proto`` in onnxruntime:
    min(length, T) at most, whatever computes the lengths (``Shape(x)[1]``, a restored
    decomposition's own, an input). 0 where the model cannot be run that way.
    """
    nodes = [
        s.node
        for s in walk(ir.from_proto(proto))
        if s.scope == "main" and is_reverse_sequence(s.node) and len(s.node.inputs) == 2
    ]
    if not nodes:
        return 0
    capturer = Capturer()
    names = sorted({v.name for n in nodes for v in n.inputs if v is not None and v.name})
    longest = 0
    for feeds in input_sets:
        try:
            values = capturer(proto, feeds, names)
        except CheckError:
            return longest  # a model only the reference evaluator runs: said otherwise
        for node in nodes:
            data, lengths = (np.asarray(values[v.name]) for v in node.inputs if v)
            time_len = data.shape[node.attributes.get_int("time_axis", 0) % data.ndim]
            if lengths.size:
                longest = max(longest, int(np.clip(lengths, 0, time_len).max()))
    return longest


def _exercised(
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    checked: Sequence[NodeReport],
    generator: InputGenerator,
    input_sets: Sequence[Inputs],
) -> bool:
    """Whether some reversal of 2 or more steps happened (True where neither model has one).

    The nodes checked alone say so themselves. Without them (the op in the candidate
    only: a restored model), the reversals either model makes in a run (its main
    graph's nodes, read from the run), lengths of 2 or more in a lengths input (never
    above its nodes' T), or constant lengths of a node that reverse 2 or more steps, say
    so.
    """
    if checked:
        return any(n.longest >= 2 for n in checked)
    if not _has_reverse_sequence(ref) and not _has_reverse_sequence(cand):
        return True  # nothing to reverse: the outputs alone are the verdict
    if any(_longest_reversal(m, input_sets) >= 2 for m in (cand, ref)):
        return True
    return (
        any(
            feeds[name].size and int(np.max(feeds[name])) >= 2
            for feeds in input_sets
            for name in generator.lengths
            if name in feeds
        )
        or generator.constant_steps >= 2
    )


def check(  # noqa: PLR0913 (the public API's keyword options)
    reference: ModelLike,
    candidate: ModelLike,
    *,
    trials: int = 3,
    seed: int = 0,
    inputs: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]] | None = None,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
    optimize: bool | None = None,
    labels: tuple[str, str] = ("reference", "candidate"),
    progress: Callable[[str], None] | None = None,
    backend: str | None = None,
    whole_model: bool = False,
    rtol: float = WHOLE_MODEL_RTOL,
    atol: float = WHOLE_MODEL_ATOL,
) -> CheckReport:
    """Check that ``candidate`` computes what ``reference`` does, where it will run.

    Args:
        reference: The model taken as right (ModelProto, onnx_ir.Model or path).
        candidate: The model to check against it.
        trials: Input sets to generate (with ``inputs`` given for every input, one).
        seed: Seed of the generated inputs.
        inputs: Your own values: a mapping of input name to array, the same in every
            trial (the inputs it leaves out are generated, fitting the sizes it
            gives), or a sequence of such mappings, one per trial.
        dims: Sizes of symbolic dims by name (``{"T": 64, "B": 2}``), for the
            generated inputs.
        input_shapes: Shapes of generated inputs by name (their symbolic dims).
        value_ranges: Inclusive ``(low, high)`` bounds of an input's generated values
            (token ids: ``{"ids": (0, 99)}``).
        optimize: Run onnxruntime with graph optimisations only off (False) or only on
            (True); by default both.
        labels: How errors name the two models (the CLI passes their paths).
        progress: Called with a line as each stage starts and after each trial, and
            every 15 s from a heartbeat thread while a slow stage runs (the CLI prints
            each to stderr): it should only print.
        backend: Run each ReverseSequence's decomposition alone on this backend (a name
            in ``revseq.backends.ADAPTERS``), in a child process, instead of in
            onnxruntime. The whole models are still compared in onnxruntime.
        whole_model: Instead of node by node, run the whole candidate on ``backend`` and
            compare its outputs with the reference's in onnxruntime within ``rtol`` and
            ``atol`` (floats drawn in [0, 1]): a comparison across runtimes, whose
            arithmetic may round differently; never reported as bit-identical. What
            revseq wrote is proven in onnxruntime first (the whole models and each
            decomposition alone, bit for bit); a difference on the runtime is said to
            be revseq's or, where revseq's part is exact there, the runtime's own
            (verdict ``RUNTIME-DIFFERS``: :mod:`~revseq.equivalence.across`).
        rtol: Relative tolerance of ``whole_model`` (by default float32 arithmetic's
            last digits: a MatMul may round them differently across runtimes).
        atol: Absolute tolerance of ``whole_model``.

    Returns:
        A report; a difference is ``ok=False``, not an exception.

    Raises:
        CheckError: The models cannot be compared (different inputs or outputs, a model
            no runtime can run, an invalid ReverseSequence node, no trials, a name in
            ``inputs``, ``dims``, ``input_shapes`` or ``value_ranges`` the model lacks,
            a reference that cannot run on the inputs: the message says where).
        BackendError: The backend is not installed, refuses a decomposition or crashes.
    """
    _check_options(trials, inputs, backend, whole_model=whole_model, rtol=rtol, atol=atol)
    ref, cand = _comparable(reference, candidate, labels)
    levels = _levels(optimize, whole_model=whole_model)
    # Sizes CAND fixed (inlined with input_shapes=) are the sizes it is run at.
    input_shapes = {**fixed_by(cand, ref), **(input_shapes or {})}
    if whole_model and input_shapes:  # a runtime converts at the sizes it is given
        ref, cand = at_sizes(ref, input_shapes), at_sizes(cand, input_shapes)
    given, sets = given_inputs(inputs, dims, input_shapes, value_ranges)
    domain = declared_domain(cand)  # a candidate exact on finite data only is drawn such
    specials = not whole_model and domain is None
    generator = _generator(ref, cand, given, seed, whole_model=whole_model, specials=specials)
    input_sets = generator.trials(sets, trials)
    engine = Engine(backend)  # a backend that is not installed fails here, first
    tolerance = (rtol, atol) if whole_model else None
    if tolerance is not None:
        whole, engines, nodes, whose = across_runtimes(
            ref, cand, engine, input_sets, tolerance,
            seed=seed, specials=domain is None, progress=progress,
        )  # fmt: skip
    else:
        whole, engines = compare_models(
            ref, cand, engine, levels, input_sets, tolerance, progress
        )
        whose = Whose("", runtime=False)
        nodes = nodes_report(
            ref, cand, input_sets, engine, seed=seed, progress=progress, specials=specials
        )
        if nodes:
            engines["decompositions"] = engine.label
        if backend is not None:
            _require_checked(nodes, backend, labels[0])
    checked = [n for n in nodes if n.error is None]
    # Across runtimes too: outputs that agree where nothing reversed 2 steps prove nothing.
    exercised = _exercised(ref, cand, checked, generator, input_sets)
    message = verdict_message(
        whole, checked, trials=len(input_sets), levels=levels, tolerance=tolerance,
        exercised=exercised, engine=engine.label, located=whose.text,
    )  # fmt: skip
    return CheckReport(
        ok=whole.example is None and all(n.difference is None for n in checked),
        trials=len(input_sets),
        outputs_compared=whole.compared,
        engines=engines,
        optimizations=levels,
        counterexample=whole.example,
        message=message,
        nodes=tuple(nodes),
        exercised=exercised,
        tolerance=tolerance,
        inputs=generator.describe(),
        set_aside=whole.set_aside,
        domain=FINITE_DOMAIN if domain == FINITE else domain,
        largest=whole.largest,
        runtime_differs=whose.runtime,
        blame=whose.text,
    )


def _check_options(
    trials: int,
    inputs: object,
    backend: str | None,
    *,
    whole_model: bool,
    rtol: float,
    atol: float,
) -> None:
    """Refuse options that cannot make a check, before any model is read."""
    if inputs is None and trials < 1:
        raise CheckError(f"trials must be at least 1, got {trials}")
    if whole_model and backend is None:
        raise CheckError("a whole-model comparison across runtimes needs a backend")
    if not (0 <= rtol < math.inf and 0 <= atol < math.inf):  # NaN compares False too
        raise CheckError(f"tolerances must be finite and >= 0, got rtol={rtol}, atol={atol}")


def _comparable(
    reference: ModelLike, candidate: ModelLike, labels: tuple[str, str]
) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """Both models as protos, refused where they take other inputs or give other outputs."""
    ref = with_definition(to_proto(reference))
    cand = with_definition(to_proto(candidate))
    ref_inputs, cand_inputs = _run_inputs(ref), _run_inputs(cand)
    if sorted(ref_inputs) != sorted(cand_inputs):
        raise CheckError(
            f"the models take different inputs: {labels[0]} takes {ref_inputs}, "
            f"{labels[1]} takes {cand_inputs}"
        )
    if len(ref.graph.output) != len(cand.graph.output):
        raise CheckError(
            f"the models have different output counts: {labels[0]} has "
            f"{len(ref.graph.output)}, {labels[1]} {len(cand.graph.output)}"
        )
    refuse_invalid_nodes(ref, labels[0])
    refuse_invalid_nodes(cand, labels[1])
    return ref, cand


def _generator(
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    given: GivenInputs,
    seed: int,
    *,
    whole_model: bool,
    specials: bool,
) -> InputGenerator:
    """What generates the inputs, the finite ones where ``specials`` is off.

    With ``specials``, data also holds NaN payloads, -0.0 and infinities; without
    (across runtimes, or for a CAND exact on finite data only), finite values. Across
    runtimes, floats are drawn in [0, 1], as polygraphy draws them: an image model's
    pixels, which a runtime's own ops may not take negative (a log, a square root).
    """
    return InputGenerator(
        [ref, cand],
        seed=seed,
        capture=Capturer(),
        specials=specials,
        finite_because="a comparison across runtimes" if whole_model else "CAND's domain",
        given=given,
        unit_floats=whole_model,  # across runtimes, floats in [0, 1] (polygraphy's)
    )


def _levels(optimize: bool | None, *, whole_model: bool) -> tuple[str, ...]:
    """The optimisation levels onnxruntime runs: both by default, one across runtimes."""
    if optimize is None:
        return ("on",) if whole_model else ("off", "on")
    return ("on",) if optimize else ("off",)


def _require_checked(nodes: Sequence[NodeReport], backend: str, label: str) -> None:
    """On a backend, every node must be checked: the whole model ran in onnxruntime."""
    if not nodes:
        raise CheckError(
            f"{label} holds no ReverseSequence: nothing to check on {backend} node by node "
            "(compare the whole models across runtimes with --whole-model and a tolerance)"
        )
    for node in nodes:
        if node.error is not None:
            raise CheckError(
                f"node {node.name or '(unnamed)'} in {node.scope}: not checked on {backend}: "
                f"{node.error}"
            )
