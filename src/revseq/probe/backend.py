"""Probe a backend: run small models on it and record what it runs exactly, as a profile.

Three kinds of probe, each a small ONNX model compared bit for bit with the truth
(:mod:`revseq.probe._runs`):

- op probes: each op (or variant) the forms emit, used the way the forms use it, with
  static shapes and with symbolic dims (run at several sizes);
- element-type probes: each gather on every type, and each type's round trip through
  its carrier type (``ops/targets/carriers.py``);
- form probes: every form end to end, static and dynamic, in several layouts.

Then each form that ran exactly is timed against the backend's copy floor
(:mod:`revseq.measure.costs`), its own output in both index layouts
(:mod:`revseq.measure.layouts`), and one node of index arithmetic
(:mod:`revseq.measure.node_cost`). ``revseq probe NAME`` prints the resulting profile;
``--write`` saves it where the planner reads it (the user's profiles, or a folder given:
revseq's own in the runtime's room, ``src/revseq/backends/ROOM/NAME.json``).
"""

from __future__ import annotations

__all__ = ["ProbeError", "ProbeResult", "probe_backend"]

import dataclasses
import warnings
from collections.abc import Callable

from revseq.backends import (
    ADAPTERS,
    Backend,
    IsolatedBackend,
    adapter,
    isolated,
    quirks_of,
)
from revseq.errors import RevseqError, stable_line
from revseq.measure.costs import form_costs, timed_forms
from revseq.measure.layouts import layout_costs
from revseq.measure.node_cost import node_cost
from revseq.ops.targets.cost import Cost
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import (
    COST_CLASSES,
    DYNAMIC,
    FINITE,
    GATHER_KINDS,
    ONE_HOT,
    SHAPE_KINDS,
    STATIC,
)
from revseq.probe._op_runs import run_op_probes
from revseq.probe._runs import (
    ProbeResult,
    moved,
    run_carrier_probes,
    run_dtype_probes,
    run_finite_probe,
    run_form_probes,
    run_native_probe,
)


class ProbeError(RevseqError):
    """A probe that cannot be run as asked."""


FOLDED_AT_BUILD = frozenset(
    {
        "Shape",
        "Slice",
        "Squeeze",
        "Range",
        "ConstantOfShape",
        "CumSum",
        "ReduceSum",
        "ReduceProd",
    }
)
"""What the forms compute from shapes alone. A backend that builds a model for the sizes
it is run at (``Adapter.builds_for_shapes``) sees static dims where the model declares
symbolic ones, folds these at build and runs nothing of them: it drops an output
computed from them alone, so its op probes cannot observe them. With symbolic dims it
is taken to have them and whatever it runs with static dims; the form probes, run end
to end at fixed sizes, say which forms hold."""


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
    the backend's copy floor (:mod:`revseq.measure.costs`), but on a backend whose
    run times say nothing of its speed (``Adapter.untimed``), each case in ``passes`` passes.
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
        probed = _Probed.run(name, backend, say)
    forms = probed.forms()
    measured = None
    if keep is not None:
        measured = _kept_costs(keep, forms)
    timed_here = costs and adapter(name).untimed is None
    if (keep is None or measured is not None) and timed_here:
        # With kept costs, only what they lack (a form or class added since) is timed.
        only = None if measured is None else _untimed(timed_forms(forms), measured)
        if only is None or any(only.values()):
            say(f"probe: {backend.label}: timing the forms")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                timed = form_costs(
                    name, probed.ops_profile, forms, passes=passes, say=say, only=only
                )
            measured = _merged(measured or {}, timed)
    profile = _profile(
        name, backend, probed.ops, probed.types,
        native=probed.native.failure is None, forms=forms, results=probed.results,
    )  # fmt: skip
    profile = dataclasses.replace(profile, costs=measured)
    if measured is not None and timed_here:
        profile = dataclasses.replace(profile, node_cost=_node_cost(name, keep, passes, say))
        profile = _with_layouts(
            profile, keep if keep is not None and keep.costs else None, passes=passes, say=say
        )
    return profile, probed.results


@dataclasses.dataclass(frozen=True)
class _Probed:
    """What the probes found on a backend: ops, types, forms, the native op."""

    ops: list[ProbeResult]
    types: list[ProbeResult]
    ops_profile: Profile
    form_results: list[ProbeResult]
    clamping: list[ProbeResult]
    finite: list[ProbeResult]
    native: ProbeResult

    @classmethod
    def run(cls, name: str, backend: IsolatedBackend, say: Callable[[str], None]) -> _Probed:
        """Every probe, in order: ops, element types, carriers, forms, the native op."""
        say(f"probe: {backend.label}: op probes")
        ops = run_op_probes(backend)
        say(f"probe: {backend.label}: element-type probes")
        types = run_dtype_probes(backend)
        say(f"probe: {backend.label}: carrier probes")
        ops = [*ops, *run_carrier_probes(backend, types)]
        ops_profile = _profile(name, backend, ops, types, native=None, forms=None, results=[])
        say(f"probe: {backend.label}: form probes")
        form_results = run_form_probes(backend, ops_profile)
        clamping = run_form_probes(backend, ops_profile, invalid=True)
        exact = [r for r in form_results if r.kind == STATIC and r.failure is None]
        # Where no exact form runs, a form exact on finite data is offered by name.
        finite = [] if exact else [run_finite_probe(backend, ops_profile)]
        native = run_native_probe(backend)
        return cls(ops, types, ops_profile, form_results, clamping, finite, native)

    @property
    def results(self) -> list[ProbeResult]:
        """Every probe's result, as the profile's failures are read from them."""
        return [
            *self.ops, *self.types, *self.form_results, *self.clamping, *self.finite,
            self.native,
        ]  # fmt: skip

    def forms(self) -> dict[str, frozenset[str]]:
        """The forms that ran exactly, by shape kind (and ``finite`` where only it ran)."""
        forms = {
            kind: frozenset(
                r.name for r in self.form_results if r.kind == kind and r.failure is None
            )
            for kind in SHAPE_KINDS
        }
        if any(r.failure is None for r in self.finite):
            forms[FINITE] = frozenset({ONE_HOT})
        return forms


def _node_cost(
    name: str, keep: Profile | None, passes: int, say: Callable[[str], None]
) -> float | None:
    """The saved profile's node cost where it has one (``--keep-costs``), else timed.

    In 3 passes at least: it is quick to time, and a single pass moves about 10%.
    """
    if keep is not None and keep.node_cost is not None:
        return keep.node_cost
    say(f"probe: {name}: timing a node")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return node_cost(name, passes=max(3, passes))


def _with_layouts(
    profile: Profile, keep: Profile | None, *, passes: int, say: Callable[[str], None]
) -> Profile:
    """``profile`` with the index layouts its own output ran cheapest in, per class.

    Kept from ``keep`` (its costs were kept, and the layouts were timed on the output
    they choose) where it has them; the other classes are timed
    (:func:`revseq.measure.layouts.layout_costs`).
    """
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
    ran = forms.get(STATIC, frozenset()) | forms.get(DYNAMIC, frozenset())
    return {
        kind: {form: cost for form, cost in costs.items() if form in ran}
        for kind, costs in saved.costs.items()
    }


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
    def certified(kind: str) -> frozenset[str]:
        # What some probe certified and none failed on (run_op_probes names each).
        found = [r for r in ops if r.kind == kind]
        passed = {f for r in found if r.failure is None for f in r.certifies}
        return frozenset(passed - {f for r in found if r.failure for f in r.certifies})

    dynamic_ops = certified(DYNAMIC)
    stated = quirks_of(name)
    if adapter(name).builds_for_shapes:
        dynamic_ops = certified(STATIC) | FOLDED_AT_BUILD
    moving = moved(types)
    dtypes = {
        gather: frozenset(name for g, name in moving if g == gather) for gather in GATHER_KINDS
    }
    failures = tuple(
        stable_line(f"{r.name} ({r.kind}): {r.failure}") for r in results if r.failure
    )
    return Profile(
        name=name,
        source="probed",
        description=ADAPTERS[name],
        backend_version=backend.label,
        native=native,
        static_ops=certified(STATIC),
        dynamic_ops=dynamic_ops,
        dtypes=dtypes,
        forms=forms,
        failures=failures,
        # Declared, not measured: kept from the profile its room ships (or yours).
        falls_back=stated.falls_back,
        yields=stated.yields,
        batch_leads=stated.batch_leads,
        rounding=stated.rounding,
        device=stated.device,
        opset_limit=stated.opset_limit,
    )
