"""Equivalence checking: is the candidate the reference, bit for bit, where it will run?

Two questions, answered on the same generated inputs:

- **The whole model, in onnxruntime**: both models run in onnxruntime (graph
  optimisations off and on), every output compared bit for bit. This proves the rewrite
  changed nothing else.
- **Each decomposition, node by node, on the backend** (onnxruntime when none is named):
  for every ReverseSequence of the reference, the candidate's replacement of it is cut
  out (:mod:`revseq._counterparts`) and run alone on the backend, on the values the node
  actually receives in a reference run, with the model's own lengths and with generated
  ones spanning 0, 1 and T; its output is compared bit for bit with the native op's.
  Only the reversal is compared across runtimes, so a MatMul that rounds differently on
  the backend, or an RNN the backend lacks, stands in nobody's way.

Comparing the whole model across runtimes is available too (``whole_model=True``), with
an explicit tolerance, and is reported as such. A check in which no reversal of two or
more steps happened cannot tell a reversal from the identity: it says so (``exercised``)
and never calls that "bit-identical".
"""

from __future__ import annotations

__all__ = ["CheckReport", "Counterexample", "NodeReport", "check", "check_nodes"]

import dataclasses
import logging
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from revseq._compare import first_difference, first_difference_beyond
from revseq._counterparts import Counterpart, counterparts
from revseq._inputs import InputGenerator, Inputs, lengths_pattern, random_array
from revseq._runners import (
    ModelLike,
    Runner,
    capture,
    main_opset,
    runners,
    to_proto,
    with_definition,
)
from revseq.ops.errors import CheckError, RevseqError
from revseq.passes import InlineReverseSequencePass
from revseq.passes._node import REVSEQ_DOMAIN, is_reverse_sequence
from revseq.passes._scopes import walk

logger = logging.getLogger(__name__)

# Sizes of a nested node's unknown dims, trial after trial (its data is generated).
_NESTED_SIZES = (3, 4, 2, 5)
# Ranks a nested node of unknown rank is checked at (those its axes allow).
_UNKNOWN_RANKS = (2, 3, 4)


@dataclasses.dataclass(frozen=True)
class Counterexample:
    """The first difference found in the whole models' outputs."""

    trial: int
    inputs: Inputs
    output_name: str
    index: tuple[int, ...] | None
    reference_value: object
    candidate_value: object


@dataclasses.dataclass(frozen=True)
class NodeReport:
    """The outcome of running one node's decomposition alone against the native op.

    Attributes:
        name: The reference node's name ("" when unnamed).
        scope: Where it sits.
        engine: What ran the decomposition ("onnxruntime", "tract 0.23.9", ...).
        runs: Runs compared (trials x lengths sets).
        longest: The longest reversal that happened (the largest min(length, T)).
        difference: The first difference: the element, both values, the trial and the
            lengths; None when every run was bit-identical.
        error: Why the node could not be checked alone.
        note: What the check assumed (a nested node's generated data).
    """

    name: str
    scope: str
    engine: str
    runs: int = 0
    longest: int = 0
    difference: str | None = None
    error: str | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        """Whether every run was bit-identical to the native op."""
        return self.error is None and self.difference is None

    def __str__(self) -> str:
        label = f"{self.name or '(unnamed)'} in {self.scope}"
        if self.error is not None:
            return f"NOT CHECKED {label}: {self.error}"
        if self.difference is not None:
            return f"DIFFERENT {label} on {self.engine}: {self.difference}"
        verdict = "bit-identical" if self.longest >= 2 else "INCONCLUSIVE (no reversal >= 2)"
        return (
            f"OK {label} on {self.engine}: {self.runs} run(s) against the native op, "
            f"{verdict}, longest reversal {self.longest}{self.note}"
        )


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """The outcome of :func:`check`.

    Attributes:
        ok: No difference: every whole-model output and every node's decomposition
            matched (bit for bit, or within ``tolerance`` where one was given).
        trials: Input sets run.
        outputs_compared: Whole-model output tensors compared (trials x levels x outputs).
        engines: What ran each model: "onnxruntime", "onnx.reference (why)", a backend.
        optimizations: The onnxruntime optimisation levels run ("off", "on").
        counterexample: The first whole-model difference, when there is one.
        message: One line saying what happened.
        nodes: Each ReverseSequence's decomposition, run alone against the native op.
        exercised: Some reversal of two or more steps happened (else the check cannot
            tell a reversal from the identity). True for models without the op.
        tolerance: (rtol, atol) where the whole models were compared across runtimes.
    """

    ok: bool
    trials: int
    outputs_compared: int
    engines: dict[str, str]
    optimizations: tuple[str, ...]
    counterexample: Counterexample | None
    message: str
    nodes: tuple[NodeReport, ...] = ()
    exercised: bool = True
    tolerance: tuple[float, float] | None = None

    @property
    def verdict(self) -> str:
        """OK, DIFFERENT or INCONCLUSIVE (no difference, but no real reversal either)."""
        if not self.ok:
            return "DIFFERENT"
        return "OK" if self.exercised else "INCONCLUSIVE"

    def __str__(self) -> str:
        engines = ", ".join(f"{k}: {v}" for k, v in self.engines.items())
        lines = [
            f"{self.verdict}: {self.message}",
            f"  trials: {self.trials}, optimisation levels: {', '.join(self.optimizations)}, "
            f"outputs compared: {self.outputs_compared}",
            f"  engines: {engines}",
        ]
        lines.extend(f"  node {node}" for node in self.nodes)
        c = self.counterexample
        if c is not None:
            lines.append(f"  first difference: trial {c.trial}, output {c.output_name!r}")
            if c.index is not None:
                lines.append(f"  at index {list(c.index)}:")
            lines.append(f"    reference: {c.reference_value!r}")
            lines.append(f"    candidate: {c.candidate_value!r}")
            for name, value in c.inputs.items():
                lines.append(f"  input {name}: {value.dtype} {list(value.shape)}")
        return "\n".join(lines)


def _guard(proto: onnx.ModelProto, label: str) -> None:
    """Refuse invalid ReverseSequence nodes before a runtime sees them.

    onnxruntime aborts the whole process (SIGABRT) on a rank-1 ReverseSequence and
    misreads negative axes; revseq's validation rejects both with a clear message.
    """
    try:
        InlineReverseSequencePass().requires(ir.from_proto(proto))
    except RevseqError as e:
        raise CheckError(f"{label}: {e}") from e


def _run_inputs(proto: onnx.ModelProto) -> list[str]:
    initializers = {t.name for t in proto.graph.initializer}
    return [i.name for i in proto.graph.input if i.name not in initializers]


def _has_reverse_sequence(proto: onnx.ModelProto) -> bool:
    return any(is_reverse_sequence(s.node) for s in walk(ir.from_proto(proto)))


class _Engine:
    """What runs the candidate's decompositions: onnxruntime or a backend's worker."""

    def __init__(self, backend: str | None) -> None:
        self._backend = None
        self.label = "onnxruntime"
        if backend is not None:
            from revseq.backends._isolated import isolated

            self._backend = isolated(backend)
            self.label = self._backend.label

    def prepare(self, model: onnx.ModelProto) -> Runner:
        if self._backend is not None:
            return self._backend.prepare(model)
        by_level, _ = runners(model, ("on",))
        return by_level["on"]


class _Native:
    """The native op alone, run by onnxruntime (onnx.reference for complex types)."""

    def __init__(self) -> None:
        self._runners: dict[tuple, Runner] = {}

    def __call__(self, cp: Counterpart, opset: int, data: np.ndarray, lens: np.ndarray):
        elem = onnx.helper.np_dtype_to_tensor_dtype(data.dtype)
        lens_elem = onnx.helper.np_dtype_to_tensor_dtype(lens.dtype)
        key = (cp.domain, cp.batch_axis, cp.time_axis, elem, lens_elem, data.ndim, opset)
        if key not in self._runners:
            node = onnx.helper.make_node(
                "ReverseSequence",
                ["input", "sequence_lens"],
                ["output"],
                domain=cp.domain,
                batch_axis=cp.batch_axis,
                time_axis=cp.time_axis,
            )
            dims = [f"d{i}" for i in range(data.ndim)]
            graph = onnx.helper.make_graph(
                [node],
                "native",
                [
                    onnx.helper.make_tensor_value_info("input", elem, dims),
                    onnx.helper.make_tensor_value_info(
                        "sequence_lens", lens_elem, [dims[cp.batch_axis % data.ndim]]
                    ),
                ],
                [onnx.helper.make_tensor_value_info("output", elem, dims)],
            )
            imports = [onnx.helper.make_opsetid("", opset)]
            if cp.domain == REVSEQ_DOMAIN:
                imports.append(onnx.helper.make_opsetid(REVSEQ_DOMAIN, 1))
            model = onnx.helper.make_model(graph, opset_imports=imports, ir_version=10)
            self._runners[key] = runners(with_definition(model), ("on",))[0]["on"]
        return self._runners[key]({"input": data, "sequence_lens": lens})[0]


def _native_opset(proto: onnx.ModelProto, cp: Counterpart) -> int:
    # The revseq definition needs opset 14; the ONNX op exists from 10 (11 inlines).
    return max(main_opset(proto) or 17, 14 if cp.domain == REVSEQ_DOMAIN else 10)


@dataclasses.dataclass
class _NodeState:
    cp: Counterpart
    runners: dict[tuple, Runner] = dataclasses.field(default_factory=dict)
    runs: int = 0
    longest: int = 0
    difference: str | None = None
    note: str = ""


def _check_counterparts(
    reference: onnx.ModelProto,
    candidate: onnx.ModelProto,
    found: Sequence[Counterpart],
    input_sets: Sequence[Inputs],
    engine: _Engine,
    *,
    seed: int,
    progress: Callable[[str], None] | None,
) -> list[NodeReport]:
    """Run each counterpart alone against the native op on every input set."""
    native = _Native()
    found = [_alone(cp) for cp in found]
    states = {id(cp): _NodeState(cp) for cp in found if cp.error is None}
    main = [s for s in states.values() if s.cp.scope == "main"]
    wanted = sorted({n for s in main for n in (*s.cp.inputs, s.cp.data, s.cp.lengths)})
    for trial, feeds in enumerate(input_sets):
        values = capture(reference, feeds, wanted) if main else {}
        rng = np.random.default_rng([seed, trial, 1])
        for state in states.values():
            cases = (
                [(values, "")]
                if state.cp.scope == "main"
                else _nested_cases(state.cp, trial, rng)
            )
            for case, note in cases:
                if state.difference is None:
                    state.note = note
                    _run_case(
                        state,
                        case,
                        trial,
                        rng=rng,
                        reference=reference,
                        candidate=candidate,
                        native=native,
                        engine=engine,
                    )
        if progress is not None:
            progress(f"check: trial {trial + 1}/{len(input_sets)} of the decompositions done")
    reports = []
    for cp in found:
        state = states.get(id(cp))
        if state is None:
            reports.append(NodeReport(cp.name, cp.scope, engine.label, error=cp.error))
            continue
        reports.append(
            NodeReport(
                cp.name,
                cp.scope,
                engine.label,
                runs=state.runs,
                longest=state.longest,
                difference=state.difference,
                note=state.note,
            )
        )
    return reports


def _alone(cp: Counterpart) -> Counterpart:
    """``cp``, or why it cannot run alone: a nested node's other inputs are not known."""
    extra = [n for n in cp.inputs if n not in (cp.data, cp.lengths)]
    if cp.error is None and cp.scope != "main" and extra:
        return dataclasses.replace(
            cp,
            error=f"its replacement reads {extra[0]!r} from outside the node, inside a "
            "subgraph or function: checked in the whole model only",
        )
    return cp


def _nested_cases(
    cp: Counterpart, trial: int, rng: np.random.Generator
) -> list[tuple[Inputs, str]]:
    """Generated inputs for a node whose actual inputs a reference run cannot read out.

    The data has the node's inferred type and dims (unknown dims get sizes that vary by
    trial; an unknown rank is tried at each rank the axes allow); the lengths are zeros,
    which :func:`_run_case` replaces by generated ones. Each case comes with a note.
    """
    elem = int(cp.data_dtype or ir.DataType.FLOAT)
    lens_type = onnx.helper.tensor_dtype_to_np_dtype(
        int(cp.lengths_dtype or ir.DataType.INT64)
    )
    if cp.data_dims is not None:
        shapes = [cp.data_dims]
        note = " (data generated: the node runs inside a subgraph or function)"
    else:
        low = max(cp.batch_axis, cp.time_axis, -cp.batch_axis - 1, -cp.time_axis - 1) + 1
        shapes = [(None,) * rank for rank in _UNKNOWN_RANKS if rank >= low]
        note = (
            f" (data generated, rank unknown: checked at ranks "
            f"{', '.join(str(len(s)) for s in shapes)})"
        )
    cases = []
    for i, dims in enumerate(shapes):
        concrete = tuple(
            d if isinstance(d, int) else _NESTED_SIZES[(trial + i + axis) % len(_NESTED_SIZES)]
            for axis, d in enumerate(dims)
        )
        data = random_array(rng, elem, concrete)
        lens = np.zeros((data.shape[cp.batch_axis % data.ndim],), lens_type)
        cases.append(({cp.data: data, cp.lengths: lens}, note))
    return cases


def _run_case(
    state: _NodeState,
    values: Inputs,
    trial: int,
    *,
    rng: np.random.Generator,
    reference: onnx.ModelProto,
    candidate: onnx.ModelProto,
    native: _Native,
    engine: _Engine,
) -> None:
    """The node's own lengths, then generated ones (0, 1 and T among them)."""
    cp = state.cp
    data = np.asarray(values[cp.data])
    time_len = data.shape[cp.time_axis % data.ndim]
    own = np.asarray(values[cp.lengths])
    variants = [own] if cp.scope == "main" else []
    if cp.lengths_vary:
        # 0, 1 and T across trials, and every batch entry at T (a batch of 1 sees T too).
        variants.append(lengths_pattern(rng, time_len, own.shape, trial).astype(own.dtype))
        variants.append(np.full(own.shape, time_len, own.dtype))
    opset = _native_opset(reference, cp)
    for lens in variants:
        feeds = {name: np.asarray(values[name]) for name in cp.inputs}
        if cp.lengths in feeds:
            feeds[cp.lengths] = lens
        expected = np.asarray(native(cp, opset, data, lens))
        runner = _counterpart_runner(state, feeds, expected, candidate, engine)
        try:
            got = runner(feeds)[0]
        except RevseqError as e:
            raise CheckError(f"{cp.label}: {e}") from e
        state.runs += 1
        reversed_steps = int(np.clip(lens, 0, time_len).max()) if lens.size else 0
        state.longest = max(state.longest, reversed_steps)
        difference = first_difference(expected, got)
        if difference is not None:
            shown = lens.reshape(-1)[:16].tolist()
            state.difference = (
                f"output {cp.output!r} differs {difference.where}: native "
                f"{difference.expected!r}, candidate {difference.got!r} (trial {trial}, "
                f"T={time_len}, lengths {shown})"
            )
            return


def _declared_dims(
    known: tuple[int | str | None, ...] | None, shape: tuple[int, ...], *, nested: bool
) -> tuple[int | str | None, ...]:
    """The dims a cut model declares for an input: what the candidate knows of them.

    Unknown dims stay symbolic (None) for a main-graph node, whose values come from a
    run of the model; a nested node's data is generated, and its unknown dims are
    declared as the generated sizes.
    """
    if known is None or len(known) != len(shape):
        known = (None,) * len(shape)
    if nested:
        return tuple(
            d if d is not None else size for d, size in zip(known, shape, strict=True)
        )
    return known


def _counterpart_runner(
    state: _NodeState,
    feeds: Inputs,
    expected: np.ndarray,
    candidate: onnx.ModelProto,
    engine: _Engine,
) -> Runner:
    cp = state.cp
    types = {n: onnx.helper.np_dtype_to_tensor_dtype(a.dtype) for n, a in feeds.items()}
    output_type = onnx.helper.np_dtype_to_tensor_dtype(expected.dtype)
    dims = tuple(
        _declared_dims(d, feeds[n].shape, nested=cp.scope != "main")
        for n, d in zip(cp.inputs, cp.input_dims, strict=True)
    )
    key = (tuple(sorted(types.items())), output_type, dims)
    if key not in state.runners:
        cut = dataclasses.replace(cp, input_dims=dims)
        model = with_definition(
            cut.model(
                types,
                output_type,
                functions=list(candidate.functions),
                ir_version=candidate.ir_version,
            )
        )
        try:
            state.runners[key] = engine.prepare(model)
        except RevseqError as e:
            raise CheckError(f"{cp.label}: {e}") from e
    return state.runners[key]


def _compare_whole(
    ref_runners: dict[str, Runner],
    cand_runners: dict[str, Runner],
    input_sets: Sequence[Inputs],
    output_names: Sequence[str],
    levels: Sequence[str],
    *,
    tolerance: tuple[float, float] | None,
    progress: Callable[[str], None] | None,
) -> tuple[int, Counterexample | None, str]:
    """Whole-model outputs: (compared, first counterexample, where it was)."""
    compared = 0
    for trial, feeds in enumerate(input_sets):
        for level in levels:
            try:
                expected = ref_runners[level](feeds)
                got = cand_runners[level](feeds)
            except RevseqError:
                raise
            except Exception as e:
                raise CheckError(
                    f"running trial {trial} failed: {' '.join(str(e).split())[:200]}"
                ) from e
            for name, a, b in zip(output_names, expected, got, strict=True):
                compared += 1
                if tolerance is None:
                    difference = first_difference(a, b)
                else:
                    rtol, atol = tolerance
                    difference = first_difference_beyond(a, b, rtol=rtol, atol=atol)
                if difference is None:
                    continue
                example = Counterexample(
                    trial, feeds, name, difference.index, difference.expected, difference.got
                )
                return (
                    compared,
                    example,
                    (
                        f"output {name!r} differs {difference.where} in trial {trial} "
                        f"(optimisations {level})"
                    ),
                )
        if progress is not None:
            progress(f"check: trial {trial + 1}/{len(input_sets)} of the whole models done")
    return compared, None, ""


def _exercised(
    nodes: Sequence[NodeReport], generator: InputGenerator, input_sets: Sequence[Inputs]
) -> bool:
    """Whether some reversal of 2 or more steps happened.

    Nodes run alone say so themselves; without them (the op only in the candidate),
    lengths of 2 or more in a lengths input (never above its nodes' T) say so.
    """
    if nodes:
        return any(n.longest >= 2 for n in nodes)
    return any(
        feeds[name].size and int(np.max(feeds[name])) >= 2
        for feeds in input_sets
        for name in generator.lengths
        if name in feeds
    )


def check(
    reference: ModelLike,
    candidate: ModelLike,
    *,
    trials: int = 3,
    seed: int = 0,
    inputs: Sequence[Inputs] | None = None,
    optimize: bool | None = None,
    labels: tuple[str, str] = ("reference", "candidate"),
    progress: Callable[[str], None] | None = None,
    backend: str | None = None,
    whole_model: bool = False,
    rtol: float = 0.0,
    atol: float = 0.0,
) -> CheckReport:
    """Check that ``candidate`` computes what ``reference`` does, where it will run.

    Args:
        reference: The model taken as right (ModelProto, onnx_ir.Model or path).
        candidate: The model to check against it.
        trials: Input sets to generate (ignored when ``inputs`` is given).
        seed: Seed of the generated inputs.
        inputs: Your own input sets, instead of generated ones.
        optimize: Run onnxruntime with graph optimisations only off (False) or only on
            (True); by default both.
        labels: How errors name the two models (the CLI passes their paths).
        progress: Called with a line after each trial (the CLI prints it to stderr).
        backend: Run each ReverseSequence's decomposition alone on this backend (a name
            in ``revseq.backends.ADAPTERS``), in a child process, instead of in
            onnxruntime. The whole models are still compared in onnxruntime.
        whole_model: Instead of node by node, run the whole candidate on ``backend`` and
            compare its outputs with the reference's in onnxruntime within ``rtol`` and
            ``atol`` (on finite generated inputs): a comparison across runtimes, whose
            arithmetic may round differently; never reported as bit-identical.
        rtol: Relative tolerance of ``whole_model``.
        atol: Absolute tolerance of ``whole_model``.

    Returns:
        A report; a difference is ``ok=False``, not an exception.

    Raises:
        CheckError: The models cannot be compared (different inputs or outputs, a model
            no runtime can run, an invalid ReverseSequence node, no trials).
        BackendError: The backend is not installed, refuses a decomposition or crashes.
    """
    if inputs is None and trials < 1:
        raise CheckError(f"trials must be at least 1, got {trials}")
    if whole_model and backend is None:
        raise CheckError("a whole-model comparison across runtimes needs a backend")
    if rtol < 0 or atol < 0:
        raise CheckError(f"tolerances must be >= 0, got rtol={rtol}, atol={atol}")
    ref = with_definition(to_proto(reference))
    cand = with_definition(to_proto(candidate))
    ref_inputs, cand_inputs = _run_inputs(ref), _run_inputs(cand)
    if sorted(ref_inputs) != sorted(cand_inputs):
        raise CheckError(f"the models take different inputs: {ref_inputs} vs {cand_inputs}")
    if len(ref.graph.output) != len(cand.graph.output):
        raise CheckError(
            f"the models have different output counts: {len(ref.graph.output)} vs "
            f"{len(cand.graph.output)}"
        )
    _guard(ref, labels[0])
    _guard(cand, labels[1])
    if optimize is None:
        levels: tuple[str, ...] = ("on",) if whole_model else ("off", "on")
    else:
        levels = ("on",) if optimize else ("off",)
    generator = InputGenerator(
        [ref, cand], seed=seed, capture=capture, specials=not whole_model
    )
    input_sets = (
        list(inputs) if inputs is not None else [generator.trial(t) for t in range(trials)]
    )
    engine = _Engine(backend)  # a backend that is not installed fails here, first
    ref_runners, ref_engine = runners(ref, levels)
    output_names = [o.name for o in ref.graph.output]
    if whole_model:
        runner = engine.prepare(cand)
        cand_runners = dict.fromkeys(levels, runner)
        cand_engine = engine.label
        tolerance: tuple[float, float] | None = (rtol, atol)
    else:
        cand_runners, cand_engine = runners(cand, levels)
        tolerance = None
    compared, example, where = _compare_whole(
        ref_runners, cand_runners, input_sets, output_names, levels,
        tolerance=tolerance, progress=progress,
    )  # fmt: skip
    nodes: list[NodeReport] = []
    if not whole_model:
        nodes = _nodes_report(ref, cand, input_sets, engine, seed=seed, progress=progress)
    engines = {"reference": ref_engine, "candidate": cand_engine}
    if nodes:
        engines["decompositions"] = engine.label
    if backend is not None and not whole_model:
        _require_checked(nodes, backend, labels[0])
    checked = [n for n in nodes if n.error is None]
    different = [n for n in checked if n.difference is not None]
    ok = example is None and not different
    exercised = True
    if nodes or _has_reverse_sequence(ref) or _has_reverse_sequence(cand):
        exercised = _exercised(checked, generator, input_sets)
    if different:
        first = different[0]
        message = f"node {first.name or '(unnamed)'} in {first.scope}: {first.difference}"
        if example is not None:
            message += f"; whole model: {where}"
    elif example is not None:
        message = where
    elif tolerance is not None:
        message = (
            f"{len(input_sets)} trial(s), {compared} whole-model outputs compared across "
            f"runtimes, within rtol={rtol:g}, atol={atol:g}"
        )
    else:
        message = (
            f"{len(input_sets)} trial(s) x {len(levels)} optimisation level(s), "
            f"{compared} outputs compared"
        )
        if checked:
            message += f"; {len(checked)} decomposition(s) run alone on {engine.label}"
        message += (
            ", bit-identical"
            if exercised
            else ", identical, but no ReverseSequence reversed 2 or more steps: this "
            "cannot tell a reversal from the identity"
        )
    return CheckReport(
        ok=ok,
        trials=len(input_sets),
        outputs_compared=compared,
        engines=engines,
        optimizations=levels,
        counterexample=example,
        message=message,
        nodes=tuple(nodes),
        exercised=exercised,
        tolerance=tolerance,
    )


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


def _nodes_report(
    reference: onnx.ModelProto,
    candidate: onnx.ModelProto,
    input_sets: Sequence[Inputs],
    engine: _Engine,
    *,
    seed: int,
    progress: Callable[[str], None] | None,
) -> list[NodeReport]:
    found = counterparts(ir.from_proto(reference), ir.from_proto(candidate))
    if not found:
        return []
    return _check_counterparts(
        reference, candidate, found, input_sets, engine, seed=seed, progress=progress
    )


def check_nodes(
    model: ModelLike,
    *,
    strategy: str = "auto",
    trials: int = 3,
    seed: int = 0,
    backend: str | None = None,
) -> list[NodeReport]:
    """Check every ReverseSequence node of ``model`` against its decomposition, alone.

    The model is inlined (``revseq.inline(..., strategy=strategy)``); each node's
    replacement is then run alone (on ``backend``, or in onnxruntime) on the values the
    node receives in a run of the model, with its own and generated lengths, and compared
    bit for bit with the native op. A user learns which node, if any, breaks.

    Raises:
        CheckError: No trials, or the model cannot be run.
        RevseqError: A node is invalid or cannot be inlined.
    """
    from revseq._api import inline

    if trials < 1:
        raise CheckError(f"trials must be at least 1, got {trials}")
    reference = with_definition(to_proto(model))
    _guard(reference, "model")
    candidate = with_definition(inline(reference, strategy=strategy))
    generator = InputGenerator([reference], seed=seed, capture=capture)
    input_sets = [generator.trial(t) for t in range(trials)]
    engine = _Engine(backend)
    return _nodes_report(reference, candidate, input_sets, engine, seed=seed, progress=None)


def generate_inputs(
    proto: onnx.ModelProto, trial: int, seed: int, *, also: onnx.ModelProto | None = None
) -> Inputs:
    """The inputs :func:`check` generates for trial ``trial`` of ``proto``.

    Symbolic dims get sizes that vary by trial (1 among them); an input that feeds a
    ``sequence_lens`` gets lengths in [0, T] that include 0, 1 and T across trials, T
    being what its nodes actually see; everything else gets random values of its type.
    """
    models = [proto] if also is None else [proto, also]
    return InputGenerator(models, seed=seed, capture=capture).trial(trial)
