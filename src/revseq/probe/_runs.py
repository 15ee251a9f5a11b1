"""Running the probes: each probe model on the backend, compared bit for bit with the truth.

The truth is onnx's ReferenceEvaluator for op probes and revseq's numpy reference for
forms. On an execution-provider backend a model placed off the device fails
too: a probe certifies what runs there, not on a fallback.
"""

from __future__ import annotations

__all__ = [
    "ProbeResult",
    "moved",
    "reference",
    "run_carrier_probes",
    "run_dtype_probes",
    "run_exact",
    "run_finite_probe",
    "run_form_probes",
    "run_native_probe",
    "run_op_probes",
]

import dataclasses
from collections.abc import Callable, Collection, Iterable

import numpy as np
import onnx

import revseq
from revseq.backends import Backend, BackendError, IsolatedBackend
from revseq.backends import onnxruntime as ort_adapter
from revseq.equivalence import as_declared, declared_types
from revseq.equivalence.inputs.values import NAN_PAYLOADS, held, random_array
from revseq.equivalence.off_device import harmful_nodes, harmless_size
from revseq.equivalence.reports import first_difference
from revseq.ops.forms import FORMS
from revseq.ops.reference import reference_evaluator, reverse_sequence, reverse_sequence_model
from revseq.ops.targets.carriers import CARRIERS, carrier_variant
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import (
    DYNAMIC,
    ELEMENT_TYPES,
    FINITE,
    GATHER_KINDS,
    GATHERS,
    ONE_HOT,
    SHAPE_KINDS,
    STATIC,
    variant_names,
)
from revseq.probe._models import (
    FORM_LAYOUTS,
    OPSET,
    FormLayout,
    carrier_input,
    carrier_model,
    form_inputs,
    gather_index,
    gather_model,
    probe_floats,
)
from revseq.probe._traces import OpProbe, Slot, op_candidates, probe_feeds


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """The outcome of one probe model: None when exact, else what went wrong."""

    name: str
    kind: str
    certifies: tuple[str, ...]
    failure: str | None
    index: str = "int64"


def _same(expected: np.ndarray, got: np.ndarray) -> bool:
    return first_difference(expected, got) is None


def run_exact(
    backend: Backend | IsolatedBackend,
    model: onnx.ModelProto,
    feeds: Iterable[dict[str, np.ndarray]],
    truth: Callable[[dict[str, np.ndarray]], list[np.ndarray]],
    *,
    axes: tuple[int, int] = (0, 1),
    judged: Collection[str] | None = None,
) -> str | None:
    """None when every output on every input set is bit-identical, else why not.

    On an execution-provider backend a model placed off the device fails too
    (:func:`~revseq.equivalence.off_device.harmful_nodes`; ``axes`` are the time and
    batch axes of the probe's ``x``; ``judged``, the nodes whose placement counts, where
    not all): a probe certifies what runs there, not on a fallback. A worker in which a
    model failed is not used again (``IsolatedBackend.restart``), but on a backend whose
    failures are Python errors that leave it as it was (``survives_failures``).
    """
    failure = _first_failure(backend, model, feeds, truth, axes=axes, judged=judged)
    isolated = isinstance(backend, IsolatedBackend)
    if failure is not None and isolated and not backend.survives_failures:
        backend.restart()
    return failure


def _first_failure(
    backend: Backend | IsolatedBackend,
    model: onnx.ModelProto,
    feeds: Iterable[dict[str, np.ndarray]],
    truth: Callable[[dict[str, np.ndarray]], list[np.ndarray]],
    *,
    axes: tuple[int, int],
    judged: Collection[str] | None = None,
) -> str | None:
    try:
        runner = backend.prepare(model)
        placement = getattr(runner, "placement", None)
        for inputs in feeds:
            if placement is not None:
                limit = harmless_size(inputs["x"].shape, *axes)
                harmful = harmful_nodes(model, placement, inputs, limit=limit, only=judged)
                if harmful:
                    return f"placed off the device: {'; '.join(harmful)}"
                placement = None  # where nodes run does not change with the inputs
            got = runner(inputs)
            expected = truth(held(inputs, backend.storage))  # what the backend holds
            for e, g in zip(expected, got, strict=True):
                if not _same(e, g):
                    shapes = {k: list(v.shape) for k, v in inputs.items()}
                    return f"wrong values (got {g.dtype} {list(np.shape(g))}) at {shapes}"
    except BackendError as e:
        return f"{e.stage} failed: {e.detail}"
    return None


def reference(model: onnx.ModelProto) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """The truth for a probe model: onnx's reference evaluator.

    It cannot Flatten an empty tensor (numpy's reshape of size 0 with -1): for empty
    inputs onnxruntime, the control, gives the truth (one session, made when needed).
    """
    evaluator = reference_evaluator(model)
    control: list[Callable[[dict[str, np.ndarray]], list[np.ndarray]]] = []

    def truth(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if all(array.size for array in feeds.values()):
            return evaluator.run(None, feeds)
        if not control:
            control.append(ort_adapter.prepare(model))
        return control[0](feeds)

    return truth


def run_op_probes(
    backend: Backend | IsolatedBackend, *, float_output: bool = True
) -> list[ProbeResult]:
    """Each slot's probe (:func:`~revseq.probe._traces.op_candidates`), round by round.

    A slot runs the first of its candidates whose other op types and variants have all
    ran exactly for the same shapes and index type (skipping those that hold one that
    failed, waiting while one is undecided): its failure is then its own. Slots that
    wait on each other each run their first candidate free of what failed. Where every
    candidate of a slot holds something that failed, the forms are traced again as for
    a target without it (their fallbacks); a slot still left is not certified: no
    model of the forms observes it there. A model two slots share runs once.
    """
    candidates = dict(op_candidates())
    passed: dict[Slot, bool] = {}
    verdicts: dict[tuple[bytes, tuple[tuple[int, int], ...]], str | None] = {}
    results = []
    relaxed, retraced = False, frozenset()
    while True:
        state = _certified(passed, candidates)
        chosen = {}
        for slot, probes in candidates.items():
            if slot not in passed:
                choice = _first_observable(probes, state, slot, waiting=not relaxed)
                if choice is not None:
                    chosen[slot] = choice
        if not chosen and not relaxed:  # slots that wait on each other: each runs its
            relaxed = True  # first candidate free of what failed
            continue
        failed = frozenset(name for slot, ok in passed.items() if not ok for name in slot[:1])
        if not chosen and failed != retraced and any(s not in passed for s in candidates):
            # The forms as written for a target without what failed: their fallbacks.
            retraced = failed
            fewer = op_candidates(failed)
            candidates.update((s, p) for s, p in fewer.items() if s not in passed)
            relaxed = False
            continue
        if not chosen:
            break
        relaxed = False
        for slot, probe in chosen.items():
            model = probe.model(float_output=float_output)
            key = (model.SerializeToString(), probe.sizes())
            if key not in verdicts:
                layout = probe.traced.layout
                verdicts[key] = run_exact(
                    backend,
                    model,
                    probe_feeds(probe),
                    reference(model),
                    axes=(layout.time_axis, layout.batch_axis),
                    judged=_judged(probe),
                )
            passed[slot] = verdicts[key] is None
            results.append(
                ProbeResult(
                    probe.where, probe.kind, probe.certifies, verdicts[key], probe.index
                )
            )
    state = _certified(passed, candidates)
    for slot, probes in candidates.items():
        if slot not in passed:
            table = state[slot[1:3]]
            blocking = sorted(n for n in probes[0].others if table.get(n) is not True)
            why = f"every probe of it reads what did not run exactly ({', '.join(blocking)})"
            first = probes[0]
            results.append(
                ProbeResult(first.where, first.kind, first.certifies, why, first.index)
            )
    return results


def _judged(probe: OpProbe) -> frozenset[str] | None:
    """Where the backend reports placement, the nodes whose placement counts.

    None (all) for a capability's probe: a whole form, as the planner writes it. None
    of an op's: a runtime places a small node by its neighbours, and a cone's end is a
    graph output where the form's feeds a gather (an index left on the host there,
    moved to the device in the form); what runs where is the whole forms' to say.
    """
    return None if probe.whole else frozenset()


def _certified(
    passed: dict[Slot, bool], candidates: dict[Slot, tuple[OpProbe, ...]]
) -> dict[tuple[str, str], dict[str, bool | None]]:
    """Per (shape kind, index type), each op type or variant's verdict so far.

    False where one of its slots failed, True where some passed and none failed, None
    while none is decided (a table look-up is a Gather as the data's gather is: each
    reads the other, so neither waits for all the other's slots).
    """
    state: dict[tuple[str, str], dict[str, bool | None]] = {}
    for slot in candidates:
        name, kind, index = slot[:3]
        table = state.setdefault((kind, index), {})
        now, before = passed.get(slot), table.get(name)
        if before is False or now is None:
            table.setdefault(name, None)
        else:
            table[name] = now
    return state


def _first_observable(
    probes: tuple[OpProbe, ...],
    state: dict[tuple[str, str], dict[str, bool | None]],
    slot: Slot,
    *,
    waiting: bool = True,
) -> OpProbe | None:
    """The first candidate whose other op types and variants all ran exactly, or None.

    None while an earlier candidate waits on one undecided, or where none can run. Not
    ``waiting``: the first that holds none that failed.
    """
    table = state[slot[1:3]]
    for probe in probes:
        verdicts = [table.get(name, True) for name in probe.others]
        if False in verdicts:
            continue
        if None not in verdicts or not waiting:
            return probe
        return None
    return None


def _flipped(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The truth of a gather probe: ``x`` reversed along its first axis."""
    return [np.flip(feeds["x"], axis=0).copy()]


def run_dtype_probes(backend: Backend | IsolatedBackend) -> list[ProbeResult]:
    """Every gather on every element type, static, by a constant index and by a computed one.

    The gathers are ``GATHER_KINDS`` (GatherElements on a 1-D view too). A gather moves
    a type where both ran exactly (``moved``); the second runs only where the first did.
    Float data holds the NaNs a copy must keep in two of every three places: a kernel
    may quiet a signalling NaN in some places only.
    """
    results = []
    for gather in GATHER_KINDS:
        for name in ELEMENT_TYPES:
            elem = ELEMENT_TYPES[name]
            x = random_array(np.random.default_rng(1), elem, (4, 3, 2))
            payloads = NAN_PAYLOADS.get(x.dtype, ())
            if payloads:
                bits = x.reshape(-1).view(np.dtype(f"u{x.itemsize}"))
                for i, payload in enumerate(payloads):
                    bits[i :: len(payloads) + 1] = payload
            for run_time in (False, True):
                model = gather_model(gather, elem, run_time_index=run_time)
                feeds = {"x": x}
                if run_time:
                    feeds["steps"] = gather_index(gather, run_time=True)
                failure = run_exact(backend, model, [feeds], _flipped)
                label = f"{gather}[{name}]" + (" (run-time index)" if run_time else "")
                results.append(ProbeResult(label, STATIC, (gather, name), failure))
                if failure is not None:
                    break
    return results


def moved(types: list[ProbeResult]) -> set[tuple[str, str]]:
    """The (gather, element type) pairs whose every dtype probe ran exactly."""
    failed = {r.certifies for r in types if r.failure is not None}
    return {r.certifies for r in types} - failed


def run_carrier_probes(
    backend: Backend | IsolatedBackend, types: list[ProbeResult]
) -> list[ProbeResult]:
    """Each element type's round trip through its carrier (``ops/targets/carriers.py``).

    The data cast to the carrier, reversed by a gather that moved the carrier exactly
    (``types``), and cast back, on values that include the type's extremes; the variant
    ``Cast:<type>><carrier>`` passes where some such gather gave every byte back. A Cast
    has no symbolic-dim arithmetic: the verdict stands for static and dynamic shapes.
    """
    moving = moved(types)
    results = []
    for dtype, carrier in CARRIERS.items():
        variant = carrier_variant(dtype)
        elem = ELEMENT_TYPES[dtype]
        x = carrier_input(elem, np.random.default_rng(4))
        failure: str | None = f"no gather moves {carrier}"
        for gather in GATHERS:
            if (gather, carrier) not in moving:
                continue
            model = carrier_model(gather, elem, ELEMENT_TYPES[carrier])
            failure = run_exact(backend, model, [{"x": x}], _flipped)
            if failure is None:
                break
        for kind in SHAPE_KINDS:
            results.append(ProbeResult(variant, kind, (variant,), failure))
    return results


# The data types a form probe runs in: the first that some gather moves on the backend.
_FORM_PROBE_TYPES = ("float32", "int32", "int64")


def form_probe_types(ops: Profile) -> list[str]:
    """The types a form may be probed in, in order: float32, int32, int64.

    Those some gather moves exactly on the backend (an NPU that stores float32 as
    float16 moves it only with some gathers); each form is probed in the first its own
    gather moves (``_emitted_in_a_moved_type``). A form's data movement is certified
    per type by the element-type probes; the form probes certify its index and its
    ops, in a type the backend moves.
    """
    return [t for t in _FORM_PROBE_TYPES if ops.has(t)] or [_FORM_PROBE_TYPES[0]]


def _emitted_in_a_moved_type(
    layout: FormLayout, dynamic: bool, ops: Profile, form: str, target: Profile
) -> tuple[onnx.ModelProto | None, int, str]:
    """The form for the first layout, in the first type it is emitted in.

    (the inlined model or None, the type, why none was emitted): a form is emitted
    only in a type its gather moves.
    """
    why = ""
    for name in form_probe_types(ops):
        elem = ELEMENT_TYPES[name]
        try:
            inlined = revseq.inline(layout.model(dynamic, elem), strategy=form, target=target)
            return inlined, elem, ""
        except revseq.RevseqError as e:
            why = why or str(e)
    return None, ELEMENT_TYPES[_FORM_PROBE_TYPES[0]], why


def run_form_probes(
    backend: Backend | IsolatedBackend, ops: Profile, *, invalid: bool = False
) -> list[ProbeResult]:
    """Every form end to end: valid lengths, or with ``invalid`` also -1, T+2.

    In float32, or where the form's gather moves no float32, in int32 or int64
    (:func:`form_probe_types`).
    Each form is emitted as the planner emits it for ``ops`` (the backend's probed op
    types and variants): GatherND without ``batch_dims`` where the backend lacks it.
    Where the backend runs index arithmetic in int32 and int64, each form also runs
    with symbolic dims as ``form@int32``: its index computed in int32, as the default
    computes it and as the planner may choose where it is faster
    (``Profile.narrowed``). Where it has the lean index's variants, each form also runs
    with symbolic dims as ``form@lean`` (and ``form@lean@int32``), the name alone
    standing for the form without them (``Profile.variant``).
    ONNX requires lengths in [0, T]; revseq's forms also clamp invalid ones. A form
    certified for a profile must be exact on valid lengths; the clamping run is
    reported, not required. A layout the planner does not emit the form for on this
    backend (an op the form needs there, such as the row form's Reshape back to rank 4,
    is missing) is skipped: the planner never emits it there either. The first layout
    (time-major, rows of several elements: what the costs are timed on) must be emitted.
    """
    results = []
    for name in variant_names(FORMS):
        form, emitted_for = ops.variant(name)
        if emitted_for is None:
            continue
        for dynamic in (False, True) if name == form else (True,):
            inlined, elem, why = _emitted_in_a_moved_type(
                FORM_LAYOUTS[0], dynamic, ops, form, emitted_for
            )
            failure = None if inlined is not None else f"not emitted: {why}"
            for layout in FORM_LAYOUTS if inlined is not None else ():
                batch_axis, time_axis = layout.batch_axis, layout.time_axis
                if layout != FORM_LAYOUTS[0]:
                    try:
                        inlined = revseq.inline(
                            layout.model(dynamic, elem), strategy=form, target=emitted_for
                        )
                    except revseq.RevseqError:
                        continue

                def truth(feeds, b=batch_axis, t=time_axis):
                    return [
                        reverse_sequence(feeds["x"], feeds["lens"], batch_axis=b, time_axis=t)
                    ]

                feeds = form_inputs(layout, dynamic, invalid=invalid, elem=elem)
                failure = run_exact(
                    backend, inlined, feeds, truth, axes=(time_axis, batch_axis)
                )
                if failure is not None:
                    failure = f"rank {len(layout.dims)}: {failure}"
                    break
            kind = DYNAMIC if dynamic else STATIC
            label = f"{name} (invalid lengths)" if invalid else name
            results.append(ProbeResult(label, kind, (name,), failure))
    return results


_FINITE_RANKS = 4
"""The finite form is probed on the layouts of rank 4 at most: the runtimes it is for
hold no more (a Mat of channels, rows and columns)."""


def run_finite_probe(backend: Backend | IsolatedBackend, ops: Profile) -> ProbeResult:
    """``ONE_HOT`` end to end on finite float32 data, static dims, lengths 0, 1 and T.

    Emitted as for the backend's ``-finite`` target (its lengths inputs made float32,
    fed as such), on the form layouts of rank 4 at most.
    """
    forms = {STATIC: frozenset(), DYNAMIC: frozenset(), FINITE: frozenset({ONE_HOT})}
    target = dataclasses.replace(ops, forms=forms).finite()
    assert target is not None, "a profile with finite forms has a finite target"
    failure = None
    for layout in (lay for lay in FORM_LAYOUTS if len(lay.dims) <= _FINITE_RANKS):
        batch_axis, time_axis = layout.batch_axis, layout.time_axis
        try:
            inlined = revseq.inline(layout.model(False), target=target)
        except revseq.RevseqError as e:
            failure = f"not emitted: {e}"
            break
        declared = declared_types(inlined)

        def truth(feeds, b=batch_axis, t=time_axis):
            lens = feeds["lens"].astype(np.int64)
            return [reverse_sequence(feeds["x"], lens, batch_axis=b, time_axis=t)]

        inputs = form_inputs(layout, False, invalid=False)
        feeds = [as_declared(given, declared) for given in inputs]
        failure = run_exact(backend, inlined, feeds, truth, axes=(time_axis, batch_axis))
        if failure is not None:
            failure = f"rank {len(layout.dims)}: {failure}"
            break
    return ProbeResult(ONE_HOT, FINITE, (ONE_HOT,), failure)


def run_native_probe(backend: Backend | IsolatedBackend) -> ProbeResult:
    """Whether the backend runs ReverseSequence itself (valid lengths, 0 among them)."""
    model = reverse_sequence_model(
        (5, 4, 3), onnx.TensorProto.FLOAT, opset=OPSET, ir_version=9, name="probe"
    )
    rng = np.random.default_rng(3)
    feeds = [
        {
            "x": probe_floats(rng, (5, 4, 3)),
            "lens": np.array([5, 0, 3, 1]),
        }
    ]

    def truth(inputs):
        return [reverse_sequence(inputs["x"], inputs["lens"])]

    return ProbeResult("ReverseSequence", STATIC, (), run_exact(backend, model, feeds, truth))
