"""Probe a backend: run small models on it and record what it runs exactly, as a profile.

Three kinds of probe, each a small ONNX model compared bit for bit with the truth
(onnx's ReferenceEvaluator for op probes, revseq's numpy reference for forms):

- op probes: each op (or variant) the forms emit, used the way the forms use it, with
  static shapes and with symbolic dims (run at several sizes);
- element-type probes: each gather (Gather, GatherElements, GatherND) on every type,
  and each type's round trip through its carrier type (``ops/carriers.py``);
- form probes: every form end to end, static and dynamic, time- and batch-major.

``revseq probe NAME`` prints the resulting profile; ``--write`` saves it where the
planner reads it (``ops/profiles/NAME.json``).
"""

from __future__ import annotations

__all__ = ["Probe", "ProbeError", "ProbeResult", "op_probes", "probe_backend"]

import dataclasses
import logging
import re
import warnings
from collections.abc import Callable, Iterable

import numpy as np
import onnx
import onnx.parser

from revseq.backends import onnxruntime as ort_adapter
from revseq.backends._adapter import PLACED, UNTIMED, Backend, BackendError
from revseq.backends._isolated import IsolatedBackend, isolated
from revseq.backends._probe_models import (
    FORM_LAYOUTS,
    OP_PROBES,
    OPSET,
    Probe,
    carrier_input,
    carrier_model,
    form_inputs,
    gather_index,
    gather_model,
    op_probes,
    probe_inputs,
    probe_model,
)
from revseq.ops.carriers import CARRIERS, carrier_variant
from revseq.ops.errors import RevseqError
from revseq.ops.profiles import (
    ELEMENT_TYPES,
    GATHER_KINDS,
    GATHERS,
    Cost,
    Profile,
    variant_names,
)
from revseq.ops.reference import reference_evaluator, reverse_sequence_model

logger = logging.getLogger(__name__)


class ProbeError(RevseqError):
    """A probe that cannot be run as asked."""


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """The outcome of one probe model: None when exact, else what went wrong."""

    name: str
    kind: str
    certifies: tuple[str, ...]
    failure: str | None
    index: str = "int64"


def _same(expected: np.ndarray, got: np.ndarray) -> bool:
    from revseq._compare import first_difference

    return first_difference(expected, got) is None


def _run_exact(
    backend: Backend | IsolatedBackend,
    model: onnx.ModelProto,
    feeds: Iterable[dict[str, np.ndarray]],
    truth: Callable[[dict[str, np.ndarray]], list[np.ndarray]],
    *,
    axes: tuple[int, int] = (0, 1),
) -> str | None:
    """None when every output on every input set is bit-identical, else why not.

    On an execution-provider backend (webgpu) a model placed off the device fails too
    (:func:`revseq._placement.harmful_nodes`; ``axes`` are the time and batch axes of
    the probe's ``x``): a probe certifies what runs there, not on a fallback. A worker
    in which a model failed is not used again (``IsolatedBackend.restart``).
    """
    failure = _first_failure(backend, model, feeds, truth, axes=axes)
    if failure is not None and isinstance(backend, IsolatedBackend):
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
    from revseq._placement import harmful_nodes, harmless_size

    try:
        runner = backend.prepare(model)
        placement = getattr(runner, "placement", None)
        for inputs in feeds:
            if placement is not None:
                limit = harmless_size(inputs["x"].shape, *axes)
                harmful = harmful_nodes(model, placement, inputs, limit=limit)
                if harmful:
                    return f"placed off the device: {'; '.join(harmful)}"
                placement = None  # where nodes run does not change with the inputs
            got = runner(inputs)
            expected = truth(inputs)
            for e, g in zip(expected, got, strict=True):
                if not _same(e, g):
                    shapes = {k: list(v.shape) for k, v in inputs.items()}
                    return f"wrong values (got {g.dtype} {list(np.shape(g))}) at {shapes}"
    except BackendError as e:
        return f"{e.stage} failed: {e.detail}"
    return None


def _reference(model: onnx.ModelProto) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
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
    """Every op probe, static and dynamic, with each of its index types."""
    results = []
    for probe in OP_PROBES:
        for itype in probe.index_types:
            name = probe.name if itype == "int64" else f"{probe.name} [{itype} index]"
            for dynamic in (False, True):
                model = probe_model(probe, dynamic, itype, float_output=float_output)
                failure = _run_exact(
                    backend, model, probe_inputs(probe, dynamic), _reference(model)
                )
                kind = "dynamic" if dynamic else "static"
                results.append(ProbeResult(name, kind, probe.certifies, failure, itype))
    return results


def run_dtype_probes(backend: Backend | IsolatedBackend) -> list[ProbeResult]:
    """Every gather on every element type, static, by a constant index and by a computed one.

    The gathers are ``GATHER_KINDS`` (GatherElements on a 1-D view too). A gather moves
    a type where both ran exactly (``moved``); the second runs only where the first did.
    Float data holds the NaNs a copy must keep in two of every three places: a kernel
    may quiet a signalling NaN in some places only.
    """
    from revseq._inputs import NAN_PAYLOADS, random_array

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
            expected = np.flip(x, axis=0).copy()
            for run_time in (False, True):
                model = gather_model(gather, elem, run_time_index=run_time)
                feeds = {"x": x}
                if run_time:
                    feeds["steps"] = gather_index(gather, run_time=True)
                failure = _run_exact(backend, model, [feeds], lambda _, e=expected: [e])
                label = f"{gather}[{name}]" + (" (run-time index)" if run_time else "")
                results.append(ProbeResult(label, "static", (gather, name), failure))
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
    """Each element type's round trip through its carrier (``ops/carriers.py``).

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
        expected = np.flip(x, axis=0).copy()
        failure: str | None = f"no gather moves {carrier}"
        for gather in GATHERS:
            if (gather, carrier) not in moving:
                continue
            model = carrier_model(gather, elem, ELEMENT_TYPES[carrier])
            failure = _run_exact(backend, model, [{"x": x}], lambda _, e=expected: [e])
            if failure is None:
                break
        for kind in ("static", "dynamic"):
            results.append(ProbeResult(variant, kind, (variant,), failure))
    return results


def run_form_probes(
    backend: Backend | IsolatedBackend, ops: Profile, *, invalid: bool = False
) -> list[ProbeResult]:
    """Every form end to end, float32: valid lengths, or with ``invalid`` also -1, T+2.

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
    import revseq
    from revseq.ops.forms import FORMS
    from revseq.ops.reference import reverse_sequence

    results = []
    for name in variant_names(FORMS):
        form, emitted_for = ops.variant(name)
        if emitted_for is None:
            continue
        for dynamic in (False, True) if name == form else (True,):
            failure = None
            for layout in FORM_LAYOUTS:
                dims, batch_axis, time_axis = layout
                static = tuple(5 if d == "T" else 4 if d == "B" else d for d in dims)
                model = reverse_sequence_model(
                    dims if dynamic else static,
                    onnx.TensorProto.FLOAT,
                    batch_axis=batch_axis,
                    time_axis=time_axis,
                    domain="" if {batch_axis, time_axis} == {0, 1} else "revseq",
                    opset=OPSET,
                    ir_version=9,
                    name="probe",
                )
                try:
                    inlined = revseq.inline(model, strategy=form, target=emitted_for)
                except revseq.RevseqError as e:
                    if layout == FORM_LAYOUTS[0]:
                        failure = f"not emitted: {e}"
                        break
                    continue

                def truth(feeds, b=batch_axis, t=time_axis):
                    return [
                        reverse_sequence(feeds["x"], feeds["lens"], batch_axis=b, time_axis=t)
                    ]

                feeds = form_inputs(layout, dynamic, invalid=invalid)
                failure = _run_exact(
                    backend, inlined, feeds, truth, axes=(time_axis, batch_axis)
                )
                if failure is not None:
                    failure = f"rank {len(dims)}: {failure}"
                    break
            kind = "dynamic" if dynamic else "static"
            label = f"{name} (invalid lengths)" if invalid else name
            results.append(ProbeResult(label, kind, (name,), failure))
    return results


def run_native_probe(backend: Backend | IsolatedBackend) -> ProbeResult:
    """Whether the backend runs ReverseSequence itself (valid lengths, float32)."""
    from revseq.ops.reference import reverse_sequence

    model = reverse_sequence_model(
        (5, 4, 3), onnx.TensorProto.FLOAT, opset=OPSET, ir_version=9, name="probe"
    )
    rng = np.random.default_rng(3)
    feeds = [
        {
            "x": rng.standard_normal((5, 4, 3)).astype(np.float32),
            "lens": np.array([5, 1, 3, 2]),
        }
    ]

    def truth(inputs):
        return [reverse_sequence(inputs["x"], inputs["lens"])]

    return ProbeResult(
        "ReverseSequence", "static", (), _run_exact(backend, model, feeds, truth)
    )


def probe_backend(
    name: str,
    *,
    progress: Callable[[str], None] | None = None,
    costs: bool = True,
    passes: int = 1,
    keep: Profile | None = None,
) -> tuple[Profile, list[ProbeResult]]:
    """Run every probe on the installed backend ``name``; return its profile and results.

    The backend runs in a worker process: a probe model that crashes it (a panic, an
    abort) is recorded as that probe's failure, and the next probe gets a fresh worker.
    With ``costs``, each form that ran exactly is then timed in this process against
    the backend's copy floor (:mod:`revseq.backends._costs`), but on a backend whose
    run times say nothing of its speed (``UNTIMED``), each case in ``passes`` passes.
    With ``keep`` (the saved profile of the same backend version), its costs are kept
    instead of timed again, for the forms that still ran exactly: what runs is probed
    anew, while the timings, the slow and noisy part, stay as measured; only what they
    lack (a form or cost class added since) is timed, with ``costs``.

    Raises:
        ProbeError: ``keep`` was probed with another version of the backend.
    """
    backend = isolated(name)
    if keep is not None and keep.backend_version != backend.label:
        raise ProbeError(
            f"the saved profile of {name!r} was probed with {keep.backend_version}, "
            f"this is {backend.label}: its costs must be timed again (drop --keep-costs)"
        )
    say = progress or (lambda _: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        say(f"probe: {backend.label}: op probes")
        ops = run_op_probes(backend, float_output=name not in PLACED)
        say(f"probe: {backend.label}: element-type probes")
        types = run_dtype_probes(backend)
        say(f"probe: {backend.label}: carrier probes")
        ops = [*ops, *run_carrier_probes(backend, types)]
        ops_profile = _profile(name, backend, ops, types, native=None, forms=None, results=[])
        say(f"probe: {backend.label}: form probes")
        form_results = run_form_probes(backend, ops_profile)
        clamping = run_form_probes(backend, ops_profile, invalid=True)
        native = run_native_probe(backend)
    results = [*ops, *types, *form_results, *clamping, native]
    forms = {
        kind: frozenset(r.name for r in form_results if r.kind == kind and r.failure is None)
        for kind in ("static", "dynamic")
    }
    measured = None
    if keep is not None:
        measured = _kept_costs(keep, forms)
    if (keep is None or measured is not None) and costs and name not in UNTIMED:
        from revseq.backends._costs import form_costs, timed_forms

        # With kept costs, only what they lack (a form or class added since) is timed.
        only = None if measured is None else _untimed(timed_forms(forms), measured)
        if only is None or any(only.values()):
            say(f"probe: {backend.label}: timing the forms")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                timed = form_costs(name, ops_profile, forms, passes=passes, say=say, only=only)
            measured = _merged(measured or {}, timed)
    profile = _profile(
        name, backend, ops, types, native=native.failure is None, forms=forms, results=results
    )
    profile = dataclasses.replace(profile, costs=measured)
    if measured is not None and costs and name not in UNTIMED:
        profile = _with_layouts(
            profile, keep if keep is not None and keep.costs else None, passes=passes, say=say
        )
    return profile, results


def _with_layouts(
    profile: Profile, keep: Profile | None, *, passes: int, say: Callable[[str], None]
) -> Profile:
    """``profile`` with the index layouts its own output ran cheapest in, per class.

    Kept from ``keep`` (its costs were kept, and the layouts were timed on the output
    they choose) where it has them; the other classes are timed
    (:func:`revseq.backends._costs.layout_costs`).
    """
    from revseq.backends._costs import COST_CLASSES, layout_costs

    kept = dict(keep.layouts or {}) if keep is not None else {}
    missing = frozenset(COST_CLASSES) - kept.keys()
    timed = {}
    if missing:
        say(f"probe: {profile.backend_version}: timing the index layouts")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            timed = layout_costs(profile.name, profile, passes=passes, say=say, only=missing)
    layouts = {**kept, **timed}
    return dataclasses.replace(profile, layouts=layouts or None)


def _untimed(
    timing: dict[str, frozenset[str]], kept: dict[str, dict[str, Cost]]
) -> dict[str, frozenset[str]]:
    """Per class, the forms ``timing`` would time that ``kept`` has no cost for."""
    return {cls: ran - kept.get(cls, {}).keys() for cls, ran in timing.items()}


def _merged(
    kept: dict[str, dict[str, Cost]], timed: dict[str, dict[str, Cost]]
) -> dict[str, dict[str, Cost]]:
    """``kept``'s costs with ``timed``'s added, per class."""
    classes = [*kept, *(cls for cls in timed if cls not in kept)]
    return {cls: {**kept.get(cls, {}), **timed.get(cls, {})} for cls in classes}


def _kept_costs(
    saved: Profile, forms: dict[str, frozenset[str]]
) -> dict[str, dict[str, Cost]] | None:
    """The saved costs of the forms that ran exactly now (static or dynamic)."""
    if saved.costs is None:
        return None
    ran = forms.get("static", frozenset()) | forms.get("dynamic", frozenset())
    return {
        kind: {form: cost for form, cost in costs.items() if form in ran}
        for kind, costs in saved.costs.items()
    }


# What differs between two runs of the same failure: a temporary folder (IREE compiles
# in one), the port of WebGPU's page server. A profile written again keeps its lines.
_RUN_SPECIFIC = (
    (re.compile(r"/tmp/tmp\w+"), "<tmp>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "localhost"),
)


def _stable(line: str) -> str:
    """A failure line without the names of one run (``_RUN_SPECIFIC``)."""
    for pattern, replacement in _RUN_SPECIFIC:
        line = pattern.sub(replacement, line)
    return line


def _profile(
    name: str,
    backend: Backend | IsolatedBackend,
    ops: list[ProbeResult],
    types: list[ProbeResult],
    *,
    native: bool | None,
    forms: dict[str, frozenset[str]] | None,
    results: list[ProbeResult],
) -> Profile:
    from revseq.backends._adapter import ADAPTERS, adapter_module

    def certified(kind: str) -> frozenset[str]:
        # A feature passes when, for some index type, all its probes of that type did.
        passed: dict[tuple[str, str], bool] = {}
        for r in ops:
            if r.kind == kind:
                for feature in r.certifies:
                    key = (feature, r.index)
                    passed[key] = passed.get(key, True) and r.failure is None
        return frozenset(f for (f, _), ok in passed.items() if ok)

    moving = moved(types)
    dtypes = {
        gather: frozenset(name for g, name in moving if g == gather) for gather in GATHER_KINDS
    }
    failures = tuple(
        _stable(f"{r.name} ({r.kind}): {r.failure}") for r in results if r.failure
    )
    return Profile(
        name=name,
        source="probe",
        description=ADAPTERS[name],
        backend_version=backend.label,
        native=native,
        static_ops=certified("static"),
        dynamic_ops=certified("dynamic"),
        dtypes=dtypes,
        forms=forms,
        failures=failures,
        falls_back=name in PLACED,
        device=getattr(adapter_module(name), "DEVICE", None),
    )
