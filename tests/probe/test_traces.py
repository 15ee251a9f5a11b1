"""The op probes' models, cut from the forms' own traces, and the order they run in."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import onnx
import pytest

from revseq.ops.targets import TARGETS
from revseq.ops.targets.carriers import CARRIER_VARIANTS
from revseq.ops.vocabulary import DYNAMIC, STATIC, WHERE_BROADCAST_ELSE
from revseq.passes.inline.templates import node_kinds
from revseq.probe._runs import reference, run_op_probes
from revseq.probe._traces import SIGNATURES, op_candidates, probe_feeds

# What shipped profiles list that no form emits any more: no probe certifies them.
_RETIRED = {WHERE_BROADCAST_ELSE, "ReduceProd"}


@pytest.fixture(scope="module")
def candidates():
    return op_candidates()


@pytest.fixture(scope="module")
def probes(candidates):
    """Each slot's first candidate: what a backend that runs everything runs."""
    return [found[0] for found in candidates.values()]


def test_every_op_and_variant_a_profile_lists_is_probed_for_both_shape_kinds(probes):
    """What the probed profiles list (carrier round trips aside: their own probes), the
    generated probes certify, for static shapes and for symbolic dims."""
    listed = set()
    for profile in (p for p in TARGETS.values() if p.source == "probed"):
        listed |= set(profile.static_ops or ()) | set(profile.dynamic_ops or ())
    listed -= CARRIER_VARIANTS | _RETIRED
    for kind in (STATIC, DYNAMIC):
        probed = {name for p in probes if p.kind == kind for name in p.certifies}
        assert listed <= probed, (kind, sorted(listed - probed))
    assert not _RETIRED & {name for p in probes for name in p.certifies}


def test_each_probe_is_a_cone_of_its_form_ending_at_a_node_of_what_it_certifies(probes):
    """An op type or variant's probe ends at a node of that kind, every node of it read
    on the way to that one; a capability's probe is a whole form."""
    for probe in probes:
        kinds = dict((id(n), k) for n, k in node_kinds(probe.template, probe.traced.signature))
        last = probe.nodes[-1]
        whole = list(probe.nodes) == list(probe.template.nodes)
        assert probe.certifies[0] in kinds[id(last)] or whole, probe.name
        made = {id(o) for n in probe.nodes for o in n.outputs}
        placeholders = {id(probe.template.data), id(probe.template.lengths)}
        for node in probe.nodes:
            assert all(v is None or id(v) in made | placeholders for v in node.inputs)


def test_a_slots_candidates_are_tried_smallest_first_and_none_is_never_tried(candidates):
    """A candidate that holds all an earlier one holds is dropped: whatever blocks the
    earlier one blocks it too."""
    for slot, found in candidates.items():
        assert all(p.slot == slot for p in found)
        for i, later in enumerate(found):
            assert not any(earlier.others <= later.others for earlier in found[:i]), slot
    (shape,) = candidates[("Shape", DYNAMIC, "int64", False, None)]
    assert [n.op_type for n in shape.nodes] == ["Shape"]


def test_a_symbolic_trace_also_runs_at_fixed_dims_for_static_shapes(probes):
    """A runtime may fix a model's dims at load (onnxruntime's free-dimension overrides):
    each symbolic probe has a twin declared at the fixed size, for static shapes."""
    dynamic = {(p.certifies, p.index) for p in probes if p.kind == DYNAMIC}
    fixed = {(p.certifies, p.index) for p in probes if p.fixed}
    assert dynamic and dynamic <= fixed
    assert all(p.kind == STATIC for p in probes if p.fixed)
    for probe in (p for p in probes if p.fixed):
        dims = probe.model().graph.input[0].type.tensor_type.shape.dim
        assert all(d.HasField("dim_value") for d in dims), probe.name


def test_static_gathers_have_a_probe_as_the_static_forms_gather(candidates):
    """With time and batch leading, a row of a constant table gathered by the lengths:
    no comparison, select or slice of a Shape on the way (a converter's Shape ignored
    start and end and its Where did not broadcast: a gather's probe holding them would
    not be run there)."""
    from revseq.probe._models import FORM_LAYOUTS

    def leading(layout):  # time and batch the leading axes (general axes compute more)
        return layout is not None and {
            FORM_LAYOUTS[layout].batch_axis,
            FORM_LAYOUTS[layout].time_axis,
        } == {0, 1}

    gathers = {
        slot: found
        for slot, found in candidates.items()
        if slot[1] == STATIC
        and not slot[3]
        and slot[0].startswith("Gather")
        and leading(slot[4])
    }
    assert len(gathers) >= 6
    for slot, found in gathers.items():
        plain = [
            p
            for p in found
            if not {n.op_type for n in p.nodes} & {"Less", "Where", "Range", "Shape"}
        ]
        assert plain, slot


def test_capabilities_no_node_is_are_probed_by_the_forms_that_use_them(probes):
    """int32 index arithmetic, a stride read from a shape, the lean index's steps: each
    by a whole form that writes something else without it."""
    by_name = {(p.name, p.kind): p for p in probes}
    int32 = by_name[("Index:int32", DYNAMIC)]
    casts = [n for n in int32.nodes if n.op_type == "Cast"]
    assert any(n.attributes.get_int("to") == onnx.TensorProto.INT32 for n in casts)
    stride = by_name[("Mul:dim", DYNAMIC)]

    def from_a_shape(value, steps=3):  # read from a shape, maybe cast and reshaped
        node = None if value is None else value.producer()
        if node is None or steps == 0:
            return False
        return node.op_type == "Shape" or any(from_a_shape(v, steps - 1) for v in node.inputs)

    assert any(
        n.op_type == "Mul" and any(from_a_shape(v, 2) for v in n.inputs) for n in stride.nodes
    )
    for name in ("Shape:arithmetic", "Range:data_dim", "ReduceSum:scalar"):
        assert (name, DYNAMIC) in by_name


@pytest.mark.parametrize("kind", [STATIC, DYNAMIC])
def test_every_probe_model_runs_exactly_on_onnxruntime_against_the_reference(probes, kind):
    """The probes' truth is onnx's reference evaluator; onnxruntime, which runs every
    form, agrees with it on each probe (so a probe fails only for the backend)."""
    from revseq.backends import onnxruntime as ort

    for probe in (p for p in probes if p.kind == kind):
        model = probe.model()
        onnx.checker.check_model(model, full_check=True)
        run = ort.prepare(model)
        truth = reference(model)
        for feeds in probe_feeds(probe):
            got, expected = run(feeds)[0], truth(feeds)[0]
            assert got.dtype == np.float32
            assert got.tobytes() == expected.tobytes(), probe.name


def test_empty_data_is_probed_where_runtimes_mishandled_it(probes):
    """The Flatten and the lean index also run an empty sequence and an empty batch."""
    flatten = [p for p in probes if p.certifies == ("Flatten",) and p.kind == DYNAMIC]
    both = [p for p in flatten if p.traced.symbolic >= {"T", "B"}]  # time and batch
    assert both
    for probe in both:
        empty = [f for f in probe_feeds(probe) if f["x"].size == 0]
        assert len(empty) == 2, probe.name
        truth = reference(probe.model())
        assert all(truth(f)[0].size == 0 for f in empty)  # onnxruntime answers there


def test_the_traced_signatures_cover_the_layouts_and_the_exporters_declarations():
    kinds = {(s.dynamic, s.own_dim, s.constant is not None) for s in SIGNATURES}
    assert kinds >= {
        (False, False, False),
        (True, False, False),
        (True, True, False),
        (False, False, True),
        (True, False, True),
    }
    assert {s.layout.dims for s in SIGNATURES} >= {("T", "B"), ("T", "B", 2, 1, 3)}


def test_the_data_is_moved_in_every_layout_the_index_is_computed_once(candidates):
    """A runtime may move data of one shape right and another wrong (rank 4 with a dim
    of 1): what moves the data is probed per layout, the index arithmetic once."""
    from revseq.probe._models import FORM_LAYOUTS

    def layouts(name):
        return {slot[4] for slot in candidates if slot[0] == name} - {None}  # None: twins

    low, high = layouts("Slice:reverse"), layouts("Slice:reverse:high_rank")
    assert low | high == set(range(len(FORM_LAYOUTS)))
    assert all(len(FORM_LAYOUTS[i].dims) >= 4 for i in high)  # each probed as itself
    assert {slot[4] for slot in candidates if slot[0] == "Less"} == {None}


class _Lacking:
    """A backend that runs every model exactly but those holding one of ``op_types``."""

    storage: ClassVar[dict[str, str]] = {}

    def __init__(self, *op_types: str) -> None:
        self.op_types = set(op_types)
        self.models: list[onnx.ModelProto] = []

    def prepare(self, model: onnx.ModelProto):
        from revseq.backends import BackendError
        from revseq.backends import onnxruntime as ort

        self.models.append(model)
        lacked = self.op_types & {n.op_type for n in model.graph.node}
        if lacked:
            raise BackendError("lacking", "convert", f"no {', '.join(sorted(lacked))}")
        return ort.prepare(model)


@pytest.fixture(scope="module")
def without_range():
    """A backend with no run-time steps: no Range, and no CumSum to count them by."""
    backend = _Lacking("Range", "CumSum")
    return backend, run_op_probes(backend)


def test_a_probe_runs_only_where_what_else_it_holds_ran_exactly(without_range, candidates):
    """On a backend without Range, Range fails its own probe; every other model run
    holds no Range but the ones that probe Range itself (and CumSum alike)."""
    backend, results = without_range
    failed = {(r.certifies[0], r.index) for r in results if r.failure}
    assert {("Range", "int64"), ("Range", "int32")} <= failed
    ranged = [m for m in backend.models if any(n.op_type == "Range" for n in m.graph.node)]
    range_probes = {
        p.model().SerializeToString()
        for slot, found in candidates.items()
        if slot[0] == "Range"
        for p in found[:1]
    }
    assert {m.SerializeToString() for m in ranged} <= range_probes


def test_an_op_seen_only_with_a_failing_one_is_not_certified_and_says_why(without_range):
    """A capability every form writes with run-time steps (the lean index's batch count
    read from the data) cannot be observed there: it fails, naming what blocked it; an
    op with a probe free of them (Less, over a dim read from a shape) is certified."""
    _, results = without_range

    def verdicts(name):
        return [r.failure for r in results if r.certifies == (name,) and r.kind == DYNAMIC]

    assert verdicts("Less") and not any(verdicts("Less"))
    blocked = verdicts("Range:data_dim")
    assert blocked and all("Range" in f and "did not run exactly" in f for f in blocked)


def test_the_profile_certifies_for_some_index_type(without_range):
    from revseq.probe.backend import _profile

    class _Label:
        label = "lacking 1"

    _, results = without_range
    profile = _profile(
        "onnxruntime", _Label(), results, [], native=None, forms=None, results=[]
    )
    assert "Range" not in profile.dynamic_ops and "Less" in profile.dynamic_ops
    assert "Shape" in profile.static_ops


def test_where_every_model_holds_what_failed_the_forms_fallbacks_are_traced():
    """Without Flatten, the rows' gather is probed on the view the forms write instead
    (a Reshape): the forms are traced again as for a target without what failed."""
    backend = _Lacking("Flatten")
    results = run_op_probes(backend)
    gathers = [r for r in results if r.certifies == ("Gather",) and r.kind == DYNAMIC]
    assert gathers and not any(r.failure for r in gathers)
    assert any(r.failure for r in results if r.certifies == ("Flatten",))
    flattening = [
        m for m in backend.models if any(n.op_type == "Flatten" for n in m.graph.node)
    ]
    assert len(flattening) <= sum(r.certifies == ("Flatten",) for r in results)  # its own


def test_a_verdict_comes_from_the_signatures_the_forms_are_probed_in_where_it_can(
    candidates,
):
    """Static, or time and batch symbolic, as the form probes run the forms: other
    signatures (a fixed sequence length, every dim symbolic, constant lengths) give the
    candidates of what only they write (a Clip of the lengths to a static time)."""
    for slot, found in candidates.items():
        assert len({p.traced.canonical for p in found}) == 1, slot
    exotic = {slot[0] for slot, found in candidates.items() if not found[0].traced.canonical}
    assert "Less" not in exotic and {"Slice:data", "Reshape:view"} <= exotic
