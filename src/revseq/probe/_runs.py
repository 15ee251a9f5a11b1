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
    "run_op_probes",
]

import collections
import dataclasses
import re
from collections.abc import Callable, Collection, Iterable

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
from revseq.probe._traces import (
    INDEX_TYPES,
    OpProbe,
    Slot,
    as_the_form_probes_run,
    in_the_first_layout,
    op_probes,
    probe_feeds,
)

PLACED_OFF = "placed off the device"
"""How a failure that is a placement begins; the nodes it names follow, each as
``OpType 'name'`` (:func:`~revseq.equivalence.off_device.harmful_nodes`)."""


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """The outcome of one probe model: None when exact, else what went wrong.

    ``certifies``: what it vouches for where exact, what fails with it where not (a
    model of the forms certifies its op types and variants where exact, and nothing
    where not: each failure it blames is a result of its own, ``run_op_probes``).
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


def run_op_probes(backend: Backend | IsolatedBackend) -> list[ProbeResult]:
    """Each op type and variant the forms write, decided on the forms themselves.

    The models are the forms as the planner writes them (:mod:`revseq.probe._traces`).
    An op type or variant runs exactly, for a shape kind, where some model that holds
    it ran exactly and none failed in which it was the only slot not seen to run exactly
    (``Slot``: where it moves the data, in that layout). A failure shared by slots each
    seen to run exactly elsewhere (two options that run wrong together, a placement
    that depends on the neighbours) blames none of them: the form probes, run as the
    planner writes each form for the profile, say which forms hold. A failure that
    names its cause is blamed on that alone (``_suspects``), and one beyond the first
    form layout refuses only what never ran there (``_verdicts``).

    Models are chosen as ``_Candidates.next`` says, so that a failure names its cause.
    A slot is left open after ``_TRIES`` more failed models held it. Where something is
    blamed, the forms are traced again as for a target without it (their fallbacks),
    and those models join. What is still undecided then, the other signatures' models
    decide (``_the_rest``). A model two traces share runs once.
    """
    probes = _Candidates(op_probes())
    ran: set[Slot] = set()
    failed: list[tuple[OpProbe, frozenset[Slot], str]] = []
    tries: collections.Counter[Slot] = collections.Counter()
    failed_with: dict[Slot, frozenset[str]] = {}  # what every model it failed in held
    results: list[ProbeResult] = []
    run = _Cached(backend, results)
    retraced: frozenset[str] = frozenset()
    while True:
        blamed = _blamed(failed, ran)
        given_up = {slot for slot, n in tries.items() if n >= _TRIES}
        probe = probes.next(ran, blamed.keys(), given_up, failed_with)
        if probe is None:
            lacking = frozenset(name for name, _, _ in blamed)
            if lacking <= retraced:
                break
            retraced |= lacking
            probes.add(op_probes(retraced))
            continue
        failure = run(probe)
        if failure is None:
            ran |= probe.slots
        else:
            suspects = _suspects(probe, failure, ran, backend.lacking_named(failure))
            # A slot's tries are the failed models that held it after the first, blamed
            # or not: each time tried away from what it failed with (``_Candidates.next``).
            unseen = probe.slots - ran
            tries.update(slot for slot in unseen if slot in failed_with)
            failed.append((probe, frozenset(suspects), failure))
            for slot in unseen:
                failed_with[slot] = failed_with.get(slot, probe.ops) & probe.ops
    blamed = _blamed(failed, ran)
    ran |= _the_rest(run, op_probes(retraced), ran, {(n, k) for n, k, _ in blamed})
    return results + _verdicts(probes.slots, ran, _blamed(failed, ran))


class _Cached:
    """Each probe's model run on the backend once, each run added to ``results``.

    A static trace and a symbolic one's fixed twin may be one model.
    """

    def __init__(self, backend: Backend | IsolatedBackend, results: list[ProbeResult]):
        self._backend, self._results = backend, results
        self._verdicts: dict[tuple[bytes, tuple[tuple[int, int], ...]], str | None] = {}

    def __call__(self, probe: OpProbe) -> str | None:
        layout, model = probe.traced.layout, probe.model()
        key = (model.SerializeToString(), probe.sizes())
        if key not in self._verdicts:
            self._verdicts[key] = run_exact(
                self._backend,
                model,
                probe_feeds(probe),
                probe.truth,
                axes=(layout.time_axis, layout.batch_axis),
            )
        failure = self._verdicts[key]
        certifies = () if failure else tuple(sorted(probe.ops))
        self._results.append(ProbeResult(probe.where, probe.kind, certifies, failure))
        return failure

    def lacking_named(self, failure: str) -> frozenset[str] | None:
        """The op types the backend's failure names as lacking, or None."""
        return self._backend.lacking_named(failure)


def _the_rest(
    run: _Cached, raw: tuple[OpProbe, ...], ran: set[Slot], blamed: set[tuple[str, str]]
) -> set[Slot]:
    """What the other signatures' models show to run, of what nothing decided.

    An op type or variant that no model of the form probes' own signatures decided (each
    failed on something named, or on something else not seen to run) is decided by the
    models of the others (constant lengths, a fixed sequence length, every dim
    symbolic): each that runs exactly certifies all it holds; a failure there blames
    nothing. Each is tried in ``_TRIES`` + 1 failed models at most, those holding the
    least of what failures named as lacking first, then the least not seen to run.
    """
    seen = {(name, kind) for name, kind, _ in ran}
    others = [p for p in raw if not p.traced.canonical]
    undecided = {(n, k) for p in others for n, k, _ in p.slots} - seen - blamed
    # each model: what it holds, as (op, kind) pairs, and as op types
    pending = {
        i: ({(n, k) for n, k, _ in p.slots}, {op.split(":")[0] for op in p.ops})
        for i, p in enumerate(others)
    }
    tried: collections.Counter[tuple[str, str]] = collections.Counter()
    named: set[str] = set()  # the op types failures here named as lacking
    found: set[Slot] = set()
    while True:
        best, best_score, best_wanted = None, None, set()
        open_pairs = {p for p in undecided - seen if tried[p] <= _TRIES}
        for i, (pairs, op_types) in pending.items():
            wanted = pairs & open_pairs
            if not wanted:
                continue
            probe = others[i]
            score = (len(op_types & named), len(pairs - seen), probe.relies, probe.size)
            if best_score is None or score < best_score:
                best, best_score, best_wanted = i, score, wanted
        if best is None:
            return found
        del pending[best]
        failure = run(others[best])
        if failure is None:
            found |= others[best].slots
            seen |= {(name, kind) for name, kind, _ in others[best].slots}
        else:
            named |= run.lacking_named(failure) or set()
            tried.update(best_wanted)


_TRIES = 3
"""The models a slot that failed is tried in again, before it is left open."""


class _Candidates:
    """The op probes not yet run, decided as the form probes run forms."""

    def __init__(self, probes: tuple[OpProbe, ...]):
        self._all: list[OpProbe] = []
        self._seen: set[object] = set()
        self._run: set[int] = set()
        self.add(probes)

    def add(self, probes: tuple[OpProbe, ...]) -> None:
        """More models (the forms traced again), each distinct one once."""
        fresh = [p for p in probes if p.identity not in self._seen]
        self._seen.update(p.identity for p in fresh)
        pending = [p for i, p in enumerate(self._all) if i not in self._run]
        done = [p for i, p in enumerate(self._all) if i in self._run]
        kept = as_the_form_probes_run([*done, *pending, *fresh])
        self._all = kept
        ids = {p.identity for p in done}
        self._run = {i for i, p in enumerate(kept) if p.identity in ids}

    @property
    def slots(self) -> frozenset[Slot]:
        """Every slot some model holds."""
        return frozenset(slot for p in self._all for slot in p.slots)

    def next(
        self,
        ran: set[Slot],
        blamed: Collection[Slot],
        given_up: set[Slot],
        failed_with: dict[Slot, frozenset[str]],
    ) -> OpProbe | None:
        """The model to run next, or None where no model holds an open slot.

        A slot is open where none ran and it was not ``given_up``. A model holding a
        slot given up and ``blamed`` is not run: its failure would be that slot's.
        While nothing failed, the one holding the most open slots. Then the one that
        holds the least of what every model a slot failed in held (``failed_with``:
        a slot is tried away from what it failed with, two options each exact may fail
        together), and of those the one holding the fewest slots not seen to run (a
        failure is blamed on a slot where it was the only one).
        """
        best, best_score = None, None
        closed = given_up & set(blamed)
        for i, probe in enumerate(self._all):
            if i in self._run:
                continue
            suspects = probe.slots - ran
            target = suspects - given_up
            if not target or not closed.isdisjoint(suspects):
                continue
            first = (0, 0)
            if failed_with:
                failed = [failed_with[s] for s in target if s in failed_with]
                first = (-sum(len(probe.ops & f) for f in failed), -len(suspects))
            score = (*first, len(target), -probe.relies, -probe.size)
            if best_score is None or score > best_score:
                best, best_score = i, score
        if best is None:
            return None
        self._run.add(best)
        return self._all[best]


def _suspects(
    probe: OpProbe, failure: str, ran: set[Slot], lacking: frozenset[str] | None
) -> frozenset[Slot]:
    """The slots a failure may be blamed on: those not seen to run exactly.

    Nothing where the model is a symbolic form with its dims fixed: it certifies what ran
    in it for static shapes, but the planner writes it with symbolic dims alone (where a
    runtime fixes them at load, the form probes run it so). Where the backend's refusal
    names the op types it lacks (``lacking``), only theirs.
    Where the model ran but off the device, only those of the nodes it names (and the
    index type they compute in): a runtime places a node by its neighbours and type.
    """
    if probe.fixed:
        return frozenset()
    suspects = probe.slots - ran
    if lacking is not None:
        return frozenset(s for s in suspects if s[0].partition(":")[0] in lacking)
    if not failure.startswith(PLACED_OFF):
        return frozenset(suspects)
    placed = probe.kinds_named(re.findall(r"\w+ '([^']+)'", failure))
    return frozenset(s for s in suspects if s[0] in placed or s[0] in INDEX_TYPES)


def _blamed(
    failed: list[tuple[OpProbe, frozenset[Slot], str]], ran: set[Slot]
) -> dict[Slot, tuple[OpProbe, str]]:
    """The slots some model failed in where each was the only one not seen to run."""
    blamed = {}
    for probe, suspects, failure in failed:
        left = suspects - ran
        if len(left) == 1:
            blamed.setdefault(next(iter(left)), (probe, failure))
    return blamed


def _verdicts(
    slots: frozenset[Slot], ran: set[Slot], blamed: dict[Slot, tuple[OpProbe, str]]
) -> list[ProbeResult]:
    """What failed, per op type or variant and shape kind: blamed, or never seen to run.

    A slot blamed beyond the first form layout (``in_the_first_layout``) refuses its op
    only where it never ran exactly there in the same role (moving the data, or as an
    index type): else the failure is the form's in that layout, which the form probes
    find (they run each form in every layout), and is reported without refusing the op
    everywhere.
    """
    results = []
    # (op, kind, its role: the type of where it stood) of what ran in the first layout
    placed = (s for s in ran if s[2] is not None and in_the_first_layout(s))
    first = {(name, kind, type(where)) for name, kind, where in placed}
    for slot, (probe, failure) in sorted(blamed.items(), key=str):
        name, kind, where = slot
        why = f"the only thing in it not seen to run exactly elsewhere: {failure}"
        refused = in_the_first_layout(slot) or (name, kind, type(where)) not in first
        if not refused:
            why = f"ran exactly in the first form layout; here {why}"
        certifies = (name,) if refused else ()
        results.append(ProbeResult(f"{name} in {probe.where}", kind, certifies, why))
    seen = {(name, kind) for name, kind, _ in ran}
    for name, kind in sorted({(name, kind) for name, kind, _ in slots} - seen):
        why = "no model of the forms that holds it ran exactly"
        results.append(ProbeResult(name, kind, (name,), why))
    return results


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
