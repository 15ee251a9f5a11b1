"""Running the probes: each probe model on the backend, compared bit for bit with the truth.

The truth of a model that reverses (the op probes' forms, the form probes) is revseq's
numpy reference. On an execution-provider backend a model placed off the device fails
too: a probe certifies what runs there, not on a fallback.
"""

from __future__ import annotations

__all__ = [
    "ProbeResult",
    "moved",
    "run_carrier_probes",
    "run_dtype_probes",
    "run_exact",
    "run_finite_probe",
    "run_form_probes",
    "run_native_probe",
]

import dataclasses
from collections.abc import Callable, Iterable

import numpy as np
import onnx

import revseq
from revseq.backends import Backend, BackendError, IsolatedBackend
from revseq.equivalence import as_declared, declared_types
from revseq.equivalence.inputs.values import NAN_PAYLOADS, held, random_array
from revseq.equivalence.off_device import harmful_nodes, harmless_size
from revseq.equivalence.reports import first_difference
from revseq.ops.forms import FORMS
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
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

PLACED_OFF = "placed off the device"
"""How a failure that is a placement begins; the nodes it names follow, each as
``OpType 'name'`` (:func:`~revseq.equivalence.off_device.harmful_nodes`)."""


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """The outcome of one probe model: None when exact, else what went wrong.

    ``certifies``: what it vouches for where exact, what fails with it where not (a
    model of the forms certifies its op types and variants where exact, and nothing
    where not: each failure it blames is a result of its own: ``_op_runs.run_op_probes``).
    """

    name: str
    kind: str
    certifies: tuple[str, ...]
    failure: str | None


def _same(expected: np.ndarray, got: np.ndarray) -> bool:
    return first_difference(expected, got) is None


def run_exact(
    backend: Backend | IsolatedBackend,
    model: onnx.ModelProto,
    feeds: Iterable[dict[str, np.ndarray]],
    truth: Callable[[dict[str, np.ndarray]], list[np.ndarray]],
    *,
    axes: tuple[int, int] = (0, 1),
) -> str | None:
    """None when every output on every input set is bit-identical, else why not.

    On an execution-provider backend a model placed off the device fails too
    (:func:`~revseq.equivalence.off_device.harmful_nodes`; ``axes`` are the time and
    batch axes of the probe's ``x``): a probe certifies what runs there, not on a
    fallback. A worker in which a model failed is not used again
    (``IsolatedBackend.restart``), but on a backend whose failures are Python errors
    that leave it as it was (``survives_failures``).
    """
    failure = _first_failure(backend, model, feeds, truth, axes=axes)
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
) -> str | None:
    try:
        runner = backend.prepare(model)
        placement = getattr(runner, "placement", None)
        for inputs in feeds:
            if placement is not None:
                limit = harmless_size(inputs["x"].shape, *axes)
                harmful = harmful_nodes(model, placement, inputs, limit=limit)
                if harmful:
                    return f"{PLACED_OFF}: {'; '.join(harmful)}"
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
