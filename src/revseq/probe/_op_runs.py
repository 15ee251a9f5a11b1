"""The op probes run: each op type and variant the forms write, decided on the forms.

The models are the forms as the planner writes them (:mod:`revseq.probe._traces`), run
as :func:`revseq.probe._runs.run_exact` runs every probe; which of them run, in which
order, and what each failure is blamed on, is decided here.
"""

from __future__ import annotations

__all__ = ["run_op_probes"]

import collections
import re
from collections.abc import Collection

from revseq.backends import Backend, IsolatedBackend
from revseq.probe._runs import PLACED_OFF, ProbeResult, run_exact
from revseq.probe._traces import (
    INDEX_TYPES,
    OpProbe,
    Slot,
    as_the_form_probes_run,
    in_the_first_layout,
    op_probes,
    probe_feeds,
)


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
