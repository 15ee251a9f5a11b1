"""Each decomposition alone on an engine, against the native op, bit for bit.

For every ReverseSequence of the reference, the candidate's replacement of it (cut out
by :mod:`~revseq.equivalence._counterparts`) runs by itself on the engine (onnxruntime
or a backend's worker process), on the values the node receives in a run of the
reference, with the node's own lengths and with generated ones (0, 1 and T); the native
op runs on the same values in onnxruntime. Nodes inside subgraphs and functions, whose
values a run cannot read out, get generated data of their inferred type and shape.
"""

from __future__ import annotations

__all__ = ["nodes_report"]

import dataclasses
import logging
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from revseq.equivalence._counterparts import Counterpart, counterparts
from revseq.equivalence._runners import (
    Engine,
    Native,
    Runner,
    as_declared,
    capture,
    declared_types,
    with_definition,
)
from revseq.equivalence.inputs import Inputs
from revseq.equivalence.inputs.values import (
    MIN_TELLING_T,
    covering_lengths,
    held,
    random_array,
)
from revseq.equivalence.off_device import harmful_nodes, harmless_size
from revseq.equivalence.reports import NodeReport, Progress, first_difference, stage
from revseq.errors import CheckError, RevseqError, one_line
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import GATHERS, REVSEQ_DOMAIN, default_opset, dtype_name

logger = logging.getLogger(__name__)

# Sizes of a nested node's unknown dims, trial after trial (its data is generated).
_NESTED_SIZES = (3, 4, 2, 5)
# Ranks a nested node of unknown rank is checked at (those its axes allow).
_UNKNOWN_RANKS = (2, 3, 4)


def nodes_report(
    reference: onnx.ModelProto,
    candidate: onnx.ModelProto,
    input_sets: Sequence[Inputs],
    engine: Engine,
    *,
    seed: int,
    progress: Callable[[str], None] | None,
    specials: bool = True,
) -> list[NodeReport]:
    """Each ReverseSequence of ``reference``: its replacement in ``candidate``, alone.

    ``specials``: float data also holds NaNs, infinities and -0.0 (not for a candidate
    exact on finite data only).
    """
    found = counterparts(ir.from_proto(reference), ir.from_proto(candidate))
    if not found:
        return []
    return _check_counterparts(
        reference,
        candidate,
        found,
        input_sets,
        engine,
        seed=seed,
        progress=progress,
        specials=specials,
    )


def _native_opset(proto: onnx.ModelProto, cp: Counterpart) -> int:
    # The revseq definition needs opset 14; the ONNX op exists from 10 (11 inlines).
    return max(default_opset(proto) or 17, 14 if cp.domain == REVSEQ_DOMAIN else 10)


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
    engine: Engine,
    *,
    seed: int,
    progress: Callable[[str], None] | None,
    specials: bool,
) -> list[NodeReport]:
    """Run each counterpart alone against the native op on every input set."""
    run = _Run(reference, candidate, Native(), engine, specials, progress)
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
                else _nested_cases(state.cp, trial, rng, specials=specials)
            )
            for case, note in cases:
                if state.difference is None:
                    state.note = note
                    _run_case(state, case, trial, rng, run)
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
                note=state.note + _storage_note(engine, cp) + _type_caveat(engine.name, cp),
            )
        )
    return reports


def _storage_note(engine: Engine, cp: Counterpart) -> str:
    """Where the engine holds the data's type narrower: what the truth was there."""
    name = dtype_name(cp.data_dtype) if cp.data_dtype is not None else None
    narrow = engine.storage.get(name or "")
    if narrow is None:
        return ""
    return f" (exact to {engine.name}'s {narrow} storage of {name}: the truth reverses that)"


def _type_caveat(backend: str, cp: Counterpart) -> str:
    """What the backend's profile says of an element type none of its gathers moves.

    Such data may still come out right for the values one run holds (int64 held in
    32 bits: small token ids survive), which proves nothing of other values.
    Said only of a decomposition that gathers (slices move the data as it is).
    """
    profile = TARGETS.get(backend)
    dtype = cp.data_dtype
    name = dtype_name(dtype) if dtype is not None else None
    gathers = cp.graph is not None and any(n.op_type in GATHERS for n in cp.graph.node)
    if not gathers:
        return ""
    if profile is None or profile.dtypes is None or name is None or profile.has(name):
        return ""
    seen = next((f for f in profile.failures if f"[{name}]" in f), "")
    saw = seen.split(": ", 1)[-1].split(" (", 1)[0].split(":", 1)[0] if seen else ""
    why = f" (its probe saw {saw})" if saw else ""
    return (
        f"; but {backend}'s profile moves no {name} exactly{why}: exact for these "
        "values only (docs/backends.md)"
    )


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
    cp: Counterpart, trial: int, rng: np.random.Generator, *, specials: bool
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
        data = random_array(rng, elem, concrete, specials=specials)
        lens = np.zeros((data.shape[cp.batch_axis % data.ndim],), lens_type)
        cases.append(({cp.data: data, cp.lengths: lens}, note))
    return cases


@dataclasses.dataclass(frozen=True)
class _Run:
    """What every case of one check runs with: both models, the native op, the engine.

    ``specials``: the data also holds NaN payloads, -0.0 and infinities (not for a
    candidate exact on finite data only).
    """

    reference: onnx.ModelProto
    candidate: onnx.ModelProto
    native: Native
    engine: Engine
    specials: bool
    progress: Progress | None = None


def _run_case(
    state: _NodeState, values: Inputs, trial: int, rng: np.random.Generator, run: _Run
) -> None:
    """The node's own lengths, then generated ones (0, 1 and T among them).

    Float data the model computed rarely holds what a copy must keep (NaN payloads,
    -0.0, infinities: the whole model's inputs hold them only where they reach a
    reversal and its output unchanged), so the node also runs on data of the same
    type and shape that holds them, with the lengths at T (not with ``specials`` off:
    a candidate exact on finite data only).
    """
    cp = state.cp
    data = np.asarray(values[cp.data])
    time_len = data.shape[cp.time_axis % data.ndim]
    opset = _native_opset(run.reference, cp)
    declared = declared_types(run.candidate)
    for case_data, lens in _cases(cp, values, rng, specials=run.specials):
        feeds = {name: np.asarray(values[name]) for name in cp.inputs}
        if cp.lengths in feeds:
            feeds[cp.lengths] = lens
        elif cp.lengths_source in feeds:  # the int32 lengths the node's are cast from
            feeds[cp.lengths_source] = lens.astype(feeds[cp.lengths_source].dtype)
        if cp.data in feeds:
            feeds[cp.data] = case_data
        expected = np.asarray(
            run.native(
                held({"data": case_data}, run.engine.storage)["data"],  # what it holds
                lens,
                domain=cp.domain,
                batch_axis=cp.batch_axis,
                time_axis=cp.time_axis,
                opset=opset,
            )
        )
        # The candidate's own input types: a -finite target's lengths are float32.
        fed = as_declared(feeds, declared)
        runner = _counterpart_runner(state, fed, expected, run)
        if runner is None:  # placed off the device: state.difference says where
            return
        try:
            got = runner(fed)[0]
        except RevseqError as e:
            raise _failed(cp, e, run.engine, fed) from e
        state.runs += 1
        reversed_steps = int(np.clip(lens, 0, time_len).max()) if lens.size else 0
        state.longest = max(state.longest, reversed_steps)
        difference = first_difference(expected, got)
        if difference is not None:
            shown = lens.reshape(-1)[:16].tolist()
            rounding = run.engine.rounding(case_data.dtype.name, case_data.ndim)
            state.difference = (
                f"output {cp.output!r} differs {difference.where}: native "
                f"{difference.expected!r}, candidate {difference.got!r} (trial {trial}, "
                f"T={time_len}, lengths {shown})" + (f"; {rounding}" if rounding else "")
            )
            return


def _cases(
    cp: Counterpart, values: Inputs, rng: np.random.Generator, *, specials: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(data, lengths) the node runs on: its own, then 0, 1, T and one between."""
    data = np.asarray(values[cp.data])
    time_len = data.shape[cp.time_axis % data.ndim]
    own = np.asarray(values[cp.lengths])
    variants = [own] if cp.scope == "main" else []
    if cp.lengths_vary:
        # 0, 1, T and one strictly between in every trial (over as many vectors as a
        # small batch needs), and every batch entry at T.
        variants.extend(covering_lengths(rng, time_len, own.shape, own.dtype))
        variants.append(np.full(own.shape, time_len, own.dtype))
    cases = [(data, lens) for lens in variants]
    # Only where the cut model reads nothing but the data and the lengths: another
    # input may carry the same values (a restored node reads its own copy).
    alone = set(cp.inputs) <= {cp.data, cp.lengths, cp.lengths_source}
    longer = _longer_in_time(cp, data) if alone and cp.lengths_vary else None
    if longer is not None:  # a short T cannot tell some wrong clamps from right ones
        longer_len = longer.shape[cp.time_axis % longer.ndim]
        cases.extend(
            (longer, lens) for lens in covering_lengths(rng, longer_len, own.shape, own.dtype)
        )
    if specials and variants and _is_float(data) and alone:
        special = random_array(
            rng, onnx.helper.np_dtype_to_tensor_dtype(data.dtype), data.shape
        )
        cases.append((special, variants[-1]))
    return cases


def _longer_in_time(cp: Counterpart, data: np.ndarray) -> np.ndarray | None:
    """``data`` repeated along time to ``MIN_TELLING_T`` steps or more, where it is shorter.

    None where it is not, where it is empty, or where the cut model declares its time
    dim static (it runs at that size only).
    """
    time_axis = cp.time_axis % data.ndim
    steps = data.shape[time_axis]
    if steps == 0 or steps >= MIN_TELLING_T:
        return None
    known = dict(zip(cp.inputs, cp.input_dims, strict=True)).get(cp.data)
    if known is not None and len(known) == data.ndim and isinstance(known[time_axis], int):
        return None
    return np.concatenate([data] * -(-MIN_TELLING_T // steps), axis=time_axis)


def _is_float(array: np.ndarray) -> bool:
    """Whether ``array`` holds floats a copy must keep bit for bit (bfloat16 included)."""
    return array.dtype.kind == "f" or array.dtype.name == "bfloat16"


def _declared_dims(
    known: tuple[int | str | None, ...] | None, rank: int
) -> tuple[int | str | None, ...]:
    """The dims a cut model declares for an input: what the candidate knows of them.

    Unknown dims stay symbolic (None), at the rank of the value that feeds them (a
    nested node of unknown rank is fed generated data of several ranks): no backend
    converts a value of unknown rank, and declaring the generated sizes instead would
    show the backend static dims the decomposition was not emitted for (a compiler
    may then fail to broadcast its run-time index to them).
    """
    if known is None or len(known) != rank:
        return (None,) * rank
    return known


def _counterpart_runner(
    state: _NodeState, feeds: Inputs, expected: np.ndarray, run: _Run
) -> Runner | None:
    """The cut model on the engine, prepared once per input signature.

    On an execution-provider backend, a placement that takes the work off the device is
    a failure of the form: it is recorded as the node's difference and None returned.
    """
    cp, candidate, engine = state.cp, run.candidate, run.engine
    types = {n: onnx.helper.np_dtype_to_tensor_dtype(a.dtype) for n, a in feeds.items()}
    output_type = onnx.helper.np_dtype_to_tensor_dtype(expected.dtype)
    dims = tuple(
        _declared_dims(d, feeds[n].ndim) for n, d in zip(cp.inputs, cp.input_dims, strict=True)
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
            # A backend may convert for minutes (a build for a device): said while it does.
            said = run.progress if engine.name != "onnxruntime" else None
            with stage(said, f"preparing the decomposition of {cp.label} on {engine.label}"):
                runner = state.runners[key] = engine.prepare(model)
        except RevseqError as e:
            raise _failed(cp, e, engine, feeds) from e
        placement = getattr(runner, "placement", None)
        if placement is not None:
            limit = harmless_size(expected.shape, cp.time_axis, cp.batch_axis)
            harmful = harmful_nodes(model, placement, feeds, limit=limit)
            if harmful:
                state.difference = f"placed off the device: {'; '.join(harmful)}"
                return None
    return state.runners[key]


def _failed(cp: Counterpart, error: RevseqError, engine: Engine, feeds: Inputs) -> CheckError:
    """The decomposition's failure on ``engine``, and whether the data alone fails too.

    A runtime may take no such data at all (an NPU's build has crashed on any int8 input
    of rank 4, an Identity's too). That is said as seen, not as a verdict: a runtime may
    fail on a lone Identity of a type it moves in other models.
    """
    data = feeds.get(cp.data)
    theirs = "" if data is None else _fails_on_data_alone(engine, np.asarray(data), error)
    return CheckError(f"{cp.label}: {error}{theirs}")


def _fails_on_data_alone(engine: Engine, data: np.ndarray, error: RevseqError) -> str:
    """What to add where ``engine`` fails on an Identity of ``data`` too, else nothing.

    Its failure is said where it is not ``error``'s (the decomposition's) word for word.
    """
    elem = onnx.helper.np_dtype_to_tensor_dtype(data.dtype)
    value = onnx.helper.make_tensor_value_info("data", elem, list(data.shape))
    returned = onnx.helper.make_tensor_value_info("same", elem, list(data.shape))
    identity = onnx.helper.make_node("Identity", ["data"], ["same"])
    graph = onnx.helper.make_graph([identity], "data_alone", [value], [returned])
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=8
    )
    try:
        engine.prepare(model)({"data": data})
    except Exception as e:  # the runtime's own failure, whatever its type
        alike = "" if str(e) == str(error) else f" ({one_line(e, 120, typed=True)})"
        return (
            f"; {engine.label} fails as well on a model that only hands the node's "
            f"{data.dtype.name} {list(data.shape)} data back (one Identity){alike}"
        )
    return ""
