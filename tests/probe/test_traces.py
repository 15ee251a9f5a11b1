"""The op probes: the forms themselves, traced for many targets, and how runs decide."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import onnx
import pytest

from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import TARGETS
from revseq.ops.targets.carriers import CARRIER_VARIANTS
from revseq.ops.vocabulary import (
    DYNAMIC,
    INT32_INDEX,
    LEAN_VARIANTS,
    REVERSE_ALL,
    STATIC,
    WHERE_BROADCAST_ELSE,
)
from revseq.probe._models import FORM_LAYOUTS
from revseq.probe._op_runs import _suspects, _the_rest, _verdicts, run_op_probes
from revseq.probe._traces import SIGNATURES, as_the_form_probes_run, op_probes, probe_feeds

# The forms are traced once per process (about 20 s): the tests that read them share one.
pytestmark = pytest.mark.xdist_group("op_probes")

# What shipped profiles list that no form emits any more: no probe certifies them.
_RETIRED = {WHERE_BROADCAST_ELSE, "ReduceProd"}


@pytest.fixture(scope="module")
def probes():
    return as_the_form_probes_run(op_probes())


def _slots(probes, name, kind=None):
    return {s for p in probes for s in p.slots if s[0] == name and kind in (None, s[1])}


def test_every_op_and_variant_a_profile_lists_is_held_by_some_model_of_either_kind(probes):
    """What the probed profiles list (carrier round trips aside: their own probes), some
    model of the forms holds, for static shapes and for symbolic dims."""
    listed = set()
    for profile in (p for p in TARGETS.values() if p.source == "probed"):
        listed |= set(profile.static_ops or ()) | set(profile.dynamic_ops or ())
    listed -= CARRIER_VARIANTS | _RETIRED
    for kind in (STATIC, DYNAMIC):
        held = {name for p in probes for name, k, _ in p.slots if k == kind}
        assert listed <= held, (kind, sorted(listed - held))
    assert not _RETIRED & {name for p in probes for name in p.ops}


def test_each_model_is_a_whole_form_that_reverses_the_data(probes):
    """From ``x`` and ``lens`` to ``y`` of the data's type and shape: on onnxruntime, each
    form's model reverses the data by the lengths bit for bit (the whole reversals, by
    all of it where every length reaches T), as the truth the runs use says."""
    from revseq.backends import onnxruntime as ort

    checked = set()
    for probe in probes:
        if (probe.form, probe.traced, probe.kind) in checked:
            continue
        checked.add((probe.form, probe.traced, probe.kind))
        model = probe.model()
        onnx.checker.check_model(model, full_check=True)
        assert [i.name for i in model.graph.input] == ["x", "lens"]
        (output,) = model.graph.output
        assert output.name == "y" and output.type == model.graph.input[0].type
        layout = probe.traced.layout
        run = ort.prepare(model)
        for feeds in probe_feeds(probe):
            got = run(feeds)[0]
            assert got.tobytes() == probe.truth(feeds)[0].tobytes(), probe.where
            lens = feeds["lens"]
            if probe.form in ("Slice", "Slice (batch first)", REVERSE_ALL):  # no lengths read
                lens = np.full_like(lens, got.shape[layout.time_axis])
            expected = reverse_sequence(
                feeds["x"], lens, batch_axis=layout.batch_axis, time_axis=layout.time_axis
            )
            assert got.tobytes() == expected.tobytes(), probe.where
    assert len(checked) > 200


def test_a_symbolic_trace_also_runs_at_fixed_dims_for_static_shapes(probes):
    """A runtime may fix a model's dims at load (onnxruntime's free-dimension overrides):
    each symbolic trace has a twin declared at the fixed size, for static shapes."""
    twins = [p for p in probes if p.fixed]
    assert twins and all(p.kind == STATIC and p.traced.dynamic for p in twins)
    for probe in twins[:50]:
        dims = probe.model().graph.input[0].type.tensor_type.shape.dim
        assert all(d.HasField("dim_value") for d in dims), probe.where
        assert len(probe_feeds(probe)) == 1


def test_what_moves_the_data_is_a_slot_per_layout_the_index_arithmetic_one(probes):
    """A runtime may move data of one shape right and of another wrong (rank 4 with a
    dim of 1): what moves the data is decided per layout, the index arithmetic once."""
    low = {s[2] for s in _slots(probes, "Slice:reverse")}
    high = {s[2] for s in _slots(probes, "Slice:reverse:high_rank")}
    assert (low | high) - {None} == set(range(len(FORM_LAYOUTS)))  # None: of an index
    assert all(len(FORM_LAYOUTS[i].dims) >= 4 for i in high - {None})
    assert {s[2] for s in _slots(probes, "Less")} == {None}
    assert {s[2] for s in _slots(probes, "GatherElements")} == set(range(len(FORM_LAYOUTS)))


def test_capabilities_no_node_is_are_slots_of_the_forms_that_rely_on_them(probes):
    """int32 index arithmetic, the lean index's steps: slots of the forms that write
    something else without them; int32 index arithmetic over int64 lengths casts them."""
    for name in (INT32_INDEX, *LEAN_VARIANTS):
        assert _slots(probes, name, DYNAMIC), name
    narrow = [
        p
        for p in probes
        if INT32_INDEX in p.ops
        and p.kind == DYNAMIC
        and p.traced.lens_type == onnx.TensorProto.INT64
        and not p.traced.constant
    ]
    assert narrow
    for probe in narrow:
        casts = [n for n in probe.template.nodes if n.op_type == "Cast"]
        assert any(n.attributes.get_int("to") == onnx.TensorProto.INT32 for n in casts)


def test_empty_data_is_probed_where_runtimes_mishandled_it(probes):
    """Forms holding a Flatten or the lean index also run an empty sequence and batch."""
    flattening = [
        p
        for p in probes
        if "Flatten" in p.ops and p.kind == DYNAMIC and p.traced.symbolic >= {"T", "B"}
    ]
    assert flattening
    for probe in flattening[:5]:
        empty = [f for f in probe_feeds(probe) if f["x"].size == 0]
        assert len(empty) == 2, probe.where
        assert all(probe.truth(f)[0].size == 0 for f in empty)


def test_the_traced_signatures_cover_the_layouts_and_the_exporters_declarations():
    kinds = {(s.dynamic, s.own_dim, s.constant is not None) for s in SIGNATURES}
    assert kinds >= {
        (False, False, False),
        (True, False, False),
        (True, True, False),
        (False, False, True),
        (True, False, True),
    }
    assert {s.layout for s in SIGNATURES} == set(FORM_LAYOUTS)


def test_a_slot_is_decided_where_the_form_probes_run_the_forms_if_it_can_be(probes):
    """Static, or time and batch symbolic, as the form probes run the forms: the other
    signatures (a fixed sequence length, every dim symbolic, constant lengths) hold only
    what they alone write (a Slice of the data by constant lengths)."""
    canonical = {s for p in probes if p.traced.canonical for s in p.slots}
    exotic = {s for p in probes if not p.traced.canonical for s in p.slots}
    assert exotic and not canonical & exotic
    assert "Less" not in {name for name, _, _ in exotic}
    assert "Slice:data" in {name for name, _, _ in exotic}


class _Refusing:
    """A backend like onnxruntime that refuses or miscomputes some models.

    ``op_types``: it converts no model holding one. ``wrong``: (op type, rank) it
    computes wrong, a rank-4 Slice of step -1 say. ``together``: op types it runs
    each exactly, but not in one model.
    """

    storage: ClassVar[dict[str, str]] = {}

    def __init__(self, *op_types: str, wrong=(), together=()) -> None:
        self.op_types, self.wrong, self.together = set(op_types), set(wrong), set(together)
        self.models: list[onnx.ModelProto] = []

    def prepare(self, model: onnx.ModelProto):
        from revseq.backends import BackendError
        from revseq.backends import onnxruntime as ort

        self.models.append(model)
        ops = {n.op_type for n in model.graph.node}
        lacked = self.op_types & ops
        if lacked or (self.together and self.together <= ops):
            raise BackendError("refusing", "convert", f"no {', '.join(sorted(lacked))}")
        rank = len(model.graph.input[0].type.tensor_type.shape.dim)
        run = ort.prepare(model)
        if any((op, rank) in self.wrong for op in ops):
            return lambda feeds: [-o for o in run(feeds)]
        return run

    @staticmethod
    def lacking_named(failure: str) -> frozenset[str] | None:
        """What its refusals name (``Backend.lacking_named``): the op types after "no"."""
        _, refused, named = failure.partition("convert failed: no ")
        return frozenset(named.split(", ")) - {""} if refused else None


def _profile(results):
    from revseq.probe.backend import _profile

    class _Label:
        label = "refusing 1"

    return _profile("onnxruntime", _Label(), results, [], native=None, forms=None, results=[])


@pytest.fixture(scope="module")
def without_range():
    """A backend with no run-time steps: no Range, and no CumSum to count them by."""
    backend = _Refusing("Range", "CumSum")
    return backend, run_op_probes(backend)


def test_what_fails_alone_is_refused_and_the_rest_certified(without_range):
    """Range and CumSum are refused; with static shapes the forms read constant steps,
    and what they hold is certified. With symbolic time and batch every form counts its
    steps by one of them and no gathering form runs; those for a fixed sequence length or
    constant lengths read constant steps, and decide what those could not."""
    _, results = without_range
    profile = _profile(results)
    for name in ("Range", "CumSum"):
        assert name not in profile.dynamic_ops
        blamed = [r for r in results if r.certifies == (name,) and r.failure]
        assert blamed, name
    assert {"Less", "Where", "GatherElements", "GatherND", "Gather"} <= profile.static_ops
    ran = [r.name for r in results if r.kind == DYNAMIC and not r.failure]
    both = [w for w in ran if w.startswith("gather") and ("[T, B" in w or "[B, T" in w)]
    assert ran and not both
    assert "Less" in profile.dynamic_ops


def test_a_model_is_run_once_and_a_failure_names_its_model(without_range):
    backend, results = without_range
    bytes_run = [m.SerializeToString() for m in backend.models]
    assert len(bytes_run) == len(set(bytes_run))
    runs = [r for r in results if " at [" in r.name and not r.certifies]
    assert runs and all(r.failure for r in runs)


@pytest.fixture(scope="module")
def two_faults():
    """A backend that reverses rank 4 wrong (step -1 Slices there, as one freed an
    invalid pointer on [5, 4, 2, 3]) and refuses GatherND and Clip in one model (a
    runtime's lean index and GatherND, each exact, were once wrong together)."""
    backend = _Refusing(wrong={("Slice", 4)}, together={"GatherND", "Clip"})
    return backend, run_op_probes(backend)


def test_an_op_wrong_in_one_layout_alone_is_refused(two_faults):
    """Ranks 2, 3 and 5 run right: the high-rank Slice fails, blamed where it was the
    only thing not seen to run; the low ranks' does not."""
    _, results = two_faults
    profile = _profile(results)
    assert "Slice:reverse:high_rank" not in profile.static_ops
    assert "Slice:reverse" in profile.static_ops


def test_two_ops_wrong_only_together_are_each_certified(two_faults):
    """The forms' models run each of two op types exactly, but one holding both fails:
    where each is also written without the other, neither is blamed. The form probes,
    run as the planner writes each form for the profile, say which forms hold."""
    backend, results = two_faults
    both = [m for m in backend.models if {"GatherND", "Clip"} <= op_types(m)]
    assert both and any(r.failure for r in results)
    profile = _profile(results)
    assert {"GatherND", "Clip"} <= profile.static_ops & profile.dynamic_ops


def op_types(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


def test_a_refusal_that_names_what_the_backend_lacks_is_blamed_on_those_alone(probes):
    """A converter that lists the layers it left unconverted (pnnx for ncnn) names the
    cause: a slot not seen to run is a suspect only where its op type is named, and a
    failure naming only what ran elsewhere blames nothing (the op ran there; the form
    probes say which forms hold)."""
    probe = next(p for p in probes if len({s[0] for s in p.slots}) > 2)
    names = sorted({s[0] for s in probe.slots})
    named = frozenset({names[0].partition(":")[0]})
    suspects = _suspects(probe, f"convert failed: no {names[0]}", set(), named)
    assert suspects and {s[0].partition(":")[0] for s in suspects} == named
    assert _suspects(probe, "convert failed: no Gather", probe.slots, named) == frozenset()
    every = _suspects(probe, "wrong values", set(), None)
    assert every == probe.slots


def test_a_slot_blamed_beyond_the_first_layout_refuses_only_what_never_ran_there(probes):
    """The form probes run every form in every layout and require the first: an index
    type wrong in one form's layout 5 but exact in layout 0 is that form's failure
    there, reported and not refused; blamed in layout 0 it is refused, and so is a
    step that moves the data only beyond it (a rank-5 Slice) where it is blamed, though
    it ran on an index in the first."""
    probe = probes[0]
    wide, high = "Index:int64", "Slice:reverse:high_rank"
    ran = {(wide, DYNAMIC, ("gather_nd", 0)), (high, STATIC, None)}  # not moving data
    cases = {
        (wide, DYNAMIC, ("gather_rows", 5)): (),
        (wide, DYNAMIC, ("gather_rows", 0)): (wide,),
        (high, STATIC, 6): (high,),
    }
    for slot, refused in cases.items():
        verdict = _verdicts(frozenset({slot}), ran, {slot: (probe, "wrong values")})[0]
        assert verdict.failure and verdict.certifies == refused, slot


def test_a_symbolic_form_with_its_dims_fixed_certifies_but_blames_nothing(probes):
    """The planner writes a symbolic form with symbolic dims alone: its failure at fixed
    dims (a compiler that could not lower its shape arithmetic there) is no static
    op's, and the form probes run it so where a runtime fixes dims at load."""
    twin = next(p for p in probes if p.fixed)
    assert twin.kind == STATIC and twin.slots
    assert _suspects(twin, "convert failed: could not lower", set(), None) == frozenset()


def test_what_the_form_probes_signatures_left_undecided_the_others_decide():
    """A backend on which no form with lengths given at run time runs (ncnn lacks the
    run-time gathers, pnnx folds the constant ones): the constant lengths' models
    decide what the form probes' own signatures could not, each that ran certifying
    all it holds; the others are not run again."""
    raw = op_probes()
    asked = []

    def run(probe):
        asked.append(probe)
        return None if probe.traced.constant is not None else "wrong values"

    run.lacking_named = lambda failure: None
    found = _the_rest(run, raw, set(), set())
    assert asked and not any(p.traced.canonical for p in asked)
    constant = {s for p in asked if p.traced.constant is not None for s in p.slots}
    assert found and found <= constant
    assert len(asked) < len([p for p in raw if not p.traced.canonical])
