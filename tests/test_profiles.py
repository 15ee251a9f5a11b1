"""Profiles as data: the planner steers around what the probes found, without a backend.

Every profile file was written by ``revseq probe NAME --write`` on the backend itself;
these tests read only the files, so they run everywhere.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from helpers import all_op_types, constants_of, run_ort
from onnx import TensorProto, helper

import revseq
from revseq.cli import main
from revseq.measure.layouts import laid_out, measured_layout
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import PORTABLE, TARGETS, combine, load_profiles
from revseq.ops.targets.profile import Cost, Layout, Profile

PROBED = (
    "iree",
    "mnn",
    "onnx2torch",
    "onnxruntime",
    "opencv",
    "openvino",
    "tinygrad",
    "tract",
    "tvm",
    "webgpu",
)
DOCUMENTED = ("coreml", "nnapi", "qnn", "webnn")


def one_node(dims, elem=TensorProto.FLOAT, batch_axis=1, time_axis=0):
    node = helper.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis
    )
    graph = helper.make_graph(
        [node],
        "rs",
        [
            helper.make_tensor_value_info("x", elem, dims),
            helper.make_tensor_value_info("lens", TensorProto.INT64, [dims[batch_axis]]),
        ],
        [helper.make_tensor_value_info("y", elem, dims)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def gathers(model):
    return [n for n in model.graph.node if n.op_type.startswith("Gather")]


def test_every_backend_has_a_probed_profile_and_documents_stay_marked():
    for name in PROBED:
        profile = TARGETS[name]
        assert profile.verified and profile.backend_version.startswith(name)
        assert profile.forms is not None and profile.dtypes is not None
    for name in DOCUMENTED:
        assert TARGETS[name].source == "documented" and not TARGETS[name].verified


def test_profiles_round_trip_through_json():
    for profile in load_profiles().values():
        if profile.name == PORTABLE:
            continue
        again = Profile.from_json(json.loads(json.dumps(profile.to_json())))
        assert again.to_json() == profile.to_json()


def test_portable_is_what_every_probed_profile_runs():
    """Every probed host profile but those kept out of the default (``yields``)."""
    probed = [TARGETS[n] for n in PROBED if not TARGETS[n].yields]
    computed = combine(probed)
    for profile in probed:
        assert computed.static_ops <= profile.static_ops
        assert computed.dynamic_ops <= profile.dynamic_ops
    assert TARGETS[PORTABLE].static_ops == computed.static_ops


def test_onnx2torch_gets_gather_nd_without_batch_dims():
    """Probed: onnx2torch 1.5.15 raises on GatherND with batch_dims != 0."""
    model = one_node([4, 5, 2, 3], batch_axis=0, time_axis=1)
    steered = revseq.inline(model, strategy="gather_nd", target="onnx2torch")
    assert all(
        a.i == 0 for n in gathers(steered) for a in n.attribute if a.name == "batch_dims"
    )
    free = revseq.inline(model, strategy="gather_nd", target="onnxruntime")
    assert any(a.i for n in gathers(free) for a in n.attribute if a.name == "batch_dims")


def test_onnx2torch_unsigned_types_avoid_gather_elements():
    """Probed: torch's gather has no kernel for uint16/32/64; single-element rows of
    them go by the row form's Gather, which onnx2torch's costs on such rows put before
    GatherND's tuple per element."""
    model = one_node([5, 4, 1], elem=TensorProto.UINT16)
    inlined = revseq.inline(model, target="onnx2torch")
    assert "GatherElements" not in {n.op_type for n in gathers(inlined)}
    assert _gather_of(inlined) == "Gather"
    costs = TARGETS["onnx2torch"].costs["matrix:static"]
    assert costs["gather_rows"].ratio < costs["gather_nd"].ratio


def _flat_gathers(model):
    """The GatherElements of ``model`` that read a 1-D view (a Reshape to one dim)."""
    made_by = {out: n for n in model.graph.node for out in n.output}
    consts = constants_of(model)
    views = {
        out
        for out, node in made_by.items()
        if node.op_type == "Reshape"
        and list(getattr(consts.get(node.input[1]), "dims", ())) == [1]
    }
    return [n for n in gathers(model) if n.op_type == "GatherElements" and n.input[0] in views]


@pytest.mark.parametrize("elem", [TensorProto.FLOAT16, TensorProto.BFLOAT16])
def test_half_floats_keep_a_signalling_nan_where_gather_elements_quiets_it(elem):
    """Probed: torch's gather sets a signalling float16 or bfloat16 NaN's quiet bit on
    data of two dims or more and keeps it on 1-D data, so the default gathers static
    single-element rows of them with GatherElements on a 1-D view
    (``GatherElements:flat``), and with symbolic dims (a view that would need
    ``allowzero``, which onnx2torch lacks) with the row form's Gather, whose worst
    cost on such rows over the probed backends is below GatherND's; OpenVINO quiets one
    in every gather and tinygrad in every gather by a computed index, so neither has
    float16 at all and each refuses it by name."""
    for target in (None, "onnx2torch"):
        for dims in ([5, 4], [5, 4, 1]):
            static = revseq.inline(one_node(dims, elem=elem), target=target)
            assert _gather_of(static) == "GatherElements"
            assert len(_flat_gathers(static)) == 1
        symbolic = revseq.inline(one_node(["T", "B"], elem=elem), target=target)
        assert [n.op_type for n in gathers(symbolic)] == ["Gather"]
    assert not TARGETS["openvino"].has("float16") and not TARGETS["tinygrad"].has("float16")
    with pytest.raises(revseq.StrategyError, match="moves no float16"):
        revseq.inline(one_node([5, 4, 3], elem=TensorProto.FLOAT16), target="tinygrad")


def test_a_1d_gather_elements_moves_only_what_its_own_probe_moved():
    """A profile whose GatherElements moves float16 on 1-D data only gathers static
    single-element rows as the 1-D view, exactly (signalling NaNs included), and never
    the matrix; without the flat variant's float16 it takes another gather."""
    from revseq.equivalence.inputs.values import random_array
    from revseq.ops.reference import reverse_sequence_model

    flat_only = dataclasses.replace(
        _probed("alpha", dynamic_ops=_EVERY_OP, gather_elements=frozenset({"float32"})),
        dtypes={
            "Gather": frozenset({"float16"}),
            "GatherElements": frozenset({"float32"}),
            "GatherElements:flat": frozenset({"float32", "float16"}),
            "GatherND": frozenset({"float16"}),
        },
    )
    cases = [([5, 4], 1, 0), ([4, 5], 0, 1), ([5, 4, 1, 1], 1, 0), ([5, 3, 4], 2, 0)]
    for dims, batch_axis, time_axis in cases:
        model = reverse_sequence_model(
            dims, TensorProto.FLOAT16, batch_axis=batch_axis, time_axis=time_axis,
            domain="revseq",
        )  # fmt: skip
        inlined = revseq.inline(model, target=flat_only)
        assert _gather_of(inlined) == "GatherElements", dims
        assert len(_flat_gathers(inlined)) == 1, dims
        x = random_array(np.random.default_rng(0), TensorProto.FLOAT16, tuple(dims))
        lens = np.array([0, 1, dims[time_axis], 2][: dims[batch_axis]], dtype=np.int64)
        expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
        for optimize in (False, True):
            (got,) = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)
            assert got.tobytes() == expected.tobytes(), (dims, optimize)
    symbolic = revseq.inline(one_node(["T", "B"], TensorProto.FLOAT16), target=flat_only)
    assert not _flat_gathers(symbolic)
    without = dataclasses.replace(
        flat_only, dtypes={**flat_only.dtypes, "GatherElements:flat": frozenset({"float32"})}
    )
    inlined = revseq.inline(one_node([5, 4], TensorProto.FLOAT16), target=without)
    assert _gather_of(inlined) != "GatherElements"


def test_tinygrad_bool_avoids_gather_nd():
    """Probed: tinygrad 0.14's GatherND returns int32 for bool data."""
    model = one_node([5, 4, 3], elem=TensorProto.BOOL)
    used = {n.op_type for n in gathers(revseq.inline(model, target="tinygrad"))}
    assert "GatherND" not in used


@pytest.mark.parametrize(
    ("target", "forbidden"),
    [
        # TVM's Relax frontend: CumSum, ReduceProd and ConstantOfShape fail on symbolic
        # dims (GatherND converts where its index columns share one shape: gather_nd).
        ("tvm", {"CumSum", "ReduceProd", "ConstantOfShape", "Flatten"}),
        # tract cannot infer Flatten's output from symbolic dims (the row form views
        # [-1, 3] instead); its int32 index needs no ReduceSum for the stride (its lean
        # index sums one dim read from the shape for Range's scalar: ReduceSum:scalar).
        ("tract", {"Flatten", "ReduceProd"}),
        (PORTABLE, {"CumSum", "ReduceProd", "ConstantOfShape", "Flatten", "ReduceSum"}),
    ],
)
def test_dynamic_shapes_use_what_the_frontends_convert(target, forbidden):
    model = revseq.inline(one_node(["T", "B", 3]), target=target)
    used = set(all_op_types(model))
    assert used & set(GATHER_OPS)
    assert not used & forbidden
    # A ReduceSum only ever sums one dim read from the shape (a scalar, not a stride).
    made_by = {out: n for n in model.graph.node for out in n.output}
    for node in model.graph.node:
        if node.op_type == "ReduceSum":
            source = made_by[node.input[0]]
            while source.op_type == "Cast":
                source = made_by[source.input[0]]
            span = {a.name: a.i for a in source.attribute}
            assert source.op_type == "Shape" and span["end"] - span["start"] == 1


def test_the_default_refuses_no_type():
    """uint16/32/64 take the row form's Gather (onnx2torch's GatherElements moves none of
    them), static or with symbolic time and batch, from opset 10 (upgraded to 11);
    GatherND with every dim symbolic (tract cannot Flatten symbolic dims)."""
    for elem in (TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64):
        for opset in (10, 11, 18):
            for dims in (["T", "B", 3], [5, 4, 3], ["T", "B", "F"]):
                model = one_node(dims, elem=elem)
                model.opset_import[0].version = opset
                used = {n.op_type for n in gathers(revseq.inline(model))}
                assert used == ({"GatherND"} if "F" in dims else {"Gather"}), (opset, dims)


def test_constant_lengths_avoid_a_constant_gather_index_where_a_backend_lacks_it():
    """Probed: tinygrad 0.14 reads a constant Gather index of two dims as a flat list."""
    lens = helper.make_tensor("lens", TensorProto.INT64, [4], [0, 1, 5, 2])
    model = one_node([5, 4, 3])
    model.graph.input.pop()
    model.graph.initializer.append(lens)
    for target in ("tinygrad", None):
        assert "Gather" not in {
            n.op_type for n in gathers(revseq.inline(model, target=target))
        }
    assert {n.op_type for n in gathers(revseq.inline(model, target="onnxruntime"))} == {
        "Gather"
    }


def _lens_readers(model):
    return [n.op_type for n in model.graph.node if "lens" in n.input]


def test_a_static_t_clamps_with_one_clip_where_it_is_exact_once_cast():
    """onnx2torch's integer Clip comes out float32 (its converter clamps with float
    bounds): exact once cast back (``Clip:cast``, probed on every backend), so the
    default and its own target clamp to a static T with a Clip and a Cast, not two
    selects; a target with an exact Clip needs no Cast, one with neither selects."""
    model = one_node([5, 4, 3])
    for target in (None, "onnx2torch"):
        inlined = revseq.inline(model, target=target)
        assert _lens_readers(inlined) == ["Clip"], target
        clip = next(n for n in inlined.graph.node if n.op_type == "Clip")
        readers = [n.op_type for n in inlined.graph.node if clip.output[0] in n.input]
        assert readers == ["Cast"], target
        rng = np.random.default_rng(0)
        x = rng.standard_normal((5, 4, 3)).astype(np.float32)
        extremes = [2**62, -(2**62), 2**24 + 1, 4]
        for values in ([0, 1, 5, 3], [-4, 6, 2**40, -(2**40)], extremes):
            lens = np.array(values, np.int64)
            expected = reverse_sequence(x, np.clip(lens, 0, 5), batch_axis=1, time_axis=0)
            for optimized in (False, True):
                got = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimized)[0]
                assert got.tobytes() == expected.tobytes()
    exact = revseq.inline(model, target="onnxruntime")
    clip = next(n for n in exact.graph.node if n.op_type == "Clip")
    assert [n.op_type for n in exact.graph.node if clip.output[0] in n.input] == ["Gather"]
    neither = _probed("alpha", dynamic_ops=_EVERY_OP, gather_elements=frozenset({"float32"}))
    assert "Clip" not in all_op_types(revseq.inline(model, target=neither))
    # An op-type target that names Clip has Clip:cast too (an exact Clip stays exact).
    named = revseq.inline(model, target=sorted(neither.static_ops | {"Clip"}))
    assert _lens_readers(named) == ["Clip"]
    # Past 2**24 float32 no longer holds every length: selects, even where Clip:cast.
    long = revseq.inline(one_node([2**24 + 1, 4, 3]))
    assert "Clip" not in all_op_types(long)


def _probed(name, *, dynamic_ops, gather_elements, costs=None, falls_back=False):
    ops = frozenset({"Shape", "Slice", "Cast", "Squeeze", "Range", "Less", "Where", "Add",
                     "Sub", "Unsqueeze", "Concat", "Expand", "GatherElements", "GatherND",
                     "Gather", "Min", "Max", "Mul", "Reshape", "Transpose",
                     "Index:int64"})  # fmt: skip
    types = frozenset({"float32", "uint16"})
    return Profile(
        name=name,
        source="probed",
        description=name,
        backend_version=f"{name} 1.0",
        native=False,
        static_ops=ops,
        dynamic_ops=ops & dynamic_ops,
        dtypes={"Gather": types, "GatherElements": gather_elements, "GatherND": types},
        forms={
            "static": frozenset({"gather_elements", "gather_nd", "gather_rows"}),
            "dynamic": frozenset({"gather_elements", "gather_nd"}),
        },
        costs=costs,
        falls_back=falls_back,
    )


GATHER_OPS = ("Gather", "GatherElements", "GatherND")
_EVERY_OP = frozenset(TARGETS[PORTABLE].static_ops) | {"Index:int64"}


def _costed(name, **costs):
    """A synthetic probed profile whose forms cost ``costs``: {class: {form: (x, nodes)}}."""
    return _probed(
        name,
        dynamic_ops=_EVERY_OP,
        gather_elements=frozenset({"float32", "uint16"}),
        costs={k: {f: Cost(*c) for f, c in forms.items()} for k, forms in costs.items()},
    )


def _gather_of(model):
    """The gather that moves the data: the last one (a table lookup comes before)."""
    return gathers(model)[-1].op_type


def test_auto_picks_the_cheapest_form_measured_on_the_target():
    """Synthetic costs, not the fixed order: the row form is first without them."""
    static = one_node([5, 4, 3])
    cheap_nd = _costed("alpha", static={"gather_rows": (3.0, 6), "gather_nd": (1.5, 7),
                                         "gather_elements": (5.0, 7)})  # fmt: skip
    assert _gather_of(revseq.inline(static, target=cheap_nd)) == "GatherND"
    uncosted = dataclasses.replace(cheap_nd, costs=None)
    assert _gather_of(revseq.inline(static, target=uncosted)) == "Gather"
    # Symbolic time and batch: measured apart from static dims.
    symbolic = one_node(["T", "B", 3])
    elements = _costed("alpha", static={"gather_nd": (1.5, 7)},
                       **{"time+batch": {"gather_nd": (4.0, 22),
                                         "gather_elements": (2.0, 16)}})  # fmt: skip
    assert _gather_of(revseq.inline(symbolic, target=elements)) == "GatherElements"
    assert _gather_of(revseq.inline(static, target=elements)) == "GatherND"


def test_the_default_picks_the_best_worst_case_and_ties_go_to_fewer_nodes():
    """Two backends: GatherND is the cheapest on one and the dearest on the other; the
    row form's worst case is the lowest. Within 10% of each other, fewer nodes win."""
    static = one_node([5, 4, 3])
    alpha = _costed("alpha", static={"gather_nd": (1.2, 7), "gather_rows": (2.0, 6),
                                      "gather_elements": (3.0, 7)})  # fmt: skip
    beta = _costed("beta", static={"gather_nd": (6.0, 7), "gather_rows": (2.5, 6),
                                    "gather_elements": (4.0, 7)})  # fmt: skip
    assert _gather_of(revseq.inline(static, target=alpha)) == "GatherND"
    assert _gather_of(revseq.inline(static, target=combine([alpha, beta]))) == "Gather"
    # A member without costs (WebGPU: untimed) has no say in the order.
    untimed = dataclasses.replace(beta, name="gamma", costs=None)
    assert _gather_of(revseq.inline(static, target=combine([alpha, untimed]))) == "GatherND"
    tied = _costed("alpha", static={"gather_nd": (2.0, 12), "gather_rows": (2.1, 6),
                                     "gather_elements": (1.95, 30)})  # fmt: skip
    assert _gather_of(revseq.inline(static, target=tied)) == "Gather"


def _int32_casts(model):
    return sum(
        n.op_type == "Cast" and n.attribute[0].i == TensorProto.INT32 for n in model.graph.node
    )


def _both_index_types(name, costs, *, int64=True):
    """A synthetic profile that runs every form with symbolic dims, its index in int32
    (``form@int32``) as well as in int64 (or, without ``int64``, in int32 only)."""
    profile = _costed(name, **costs)
    ops = profile.dynamic_ops | {"Index:int32", "Mul:dim"}
    forms = {"gather_elements", "gather_nd", "gather_rows"}
    return dataclasses.replace(
        profile,
        dynamic_ops=ops if int64 else ops - {"Index:int64"},
        forms={
            "static": frozenset(forms),
            "dynamic": frozenset(forms | {f + "@int32" for f in forms} if int64 else forms),
        },
    )


def test_a_target_computes_its_index_in_int32_where_that_was_timed_faster():
    """Symbolic dims: ``gather_rows@int32`` (the row form, its index in int32) is a
    candidate of its own; within the tie the int64 index (exact at any size) wins."""
    symbolic = one_node(["T", "B", 3])
    costs = {"gather_nd": (4.0, 20), "gather_rows": (5.0, 21), "gather_rows@int32": (2.0, 26)}
    faster = _both_index_types("alpha", {"time+batch": costs})
    inlined = revseq.inline(symbolic, target=faster)
    assert _gather_of(inlined) == "Gather" and _int32_casts(inlined)
    tied = _both_index_types("alpha", {"time+batch": {**costs, "gather_rows": (2.1, 21)}})
    inlined = revseq.inline(symbolic, target=tied)
    assert _gather_of(inlined) == "Gather" and not _int32_casts(inlined)
    # Static dims are not timed in int32: the int32 timing has no say there.
    assert not _int32_casts(revseq.inline(one_node([5, 4, 3]), target=faster))
    # Without GatherND timed on such rows, single-element rows keep GatherElements first;
    # their index type still goes by cost.
    column = one_node(["T", "B", 1])
    elements = {"gather_elements": (9.0, 15), "gather_elements@int32": (4.0, 18)}
    narrow = _both_index_types("alpha", {"time+batch": elements})
    assert _int32_casts(revseq.inline(column, target=narrow))
    close = {**elements, "gather_elements@int32": (8.5, 18)}
    assert not _int32_casts(
        revseq.inline(column, target=_both_index_types("alpha", {"time+batch": close}))
    )
    # Timed on single-element rows (the ``matrix`` class), those timings decide there.
    matrix = {"matrix": close, "time+batch": elements}
    assert not _int32_casts(revseq.inline(column, target=_both_index_types("alpha", matrix)))
    matrix = {"matrix": elements, "time+batch": close}
    assert _int32_casts(revseq.inline(column, target=_both_index_types("alpha", matrix)))
    # A form@int32 that did not run exactly is not a candidate.
    ran = faster.forms["dynamic"] - {"gather_rows@int32"}
    unproven = dataclasses.replace(faster, forms={**faster.forms, "dynamic": ran})
    assert _gather_of(revseq.inline(symbolic, target=unproven)) == "GatherND"


def test_single_element_rows_take_the_form_timed_cheapest_on_such_rows():
    """Single-element rows: the ``matrix`` costs (symbolic dims) and ``matrix:static``
    choose between GatherElements on the data as a matrix and GatherND's tuple per
    element, per backend and for the default by the worst over the members; without
    them GatherElements goes first."""
    matrix = one_node(["T", "B"])
    column = one_node(["T", "B", 1])
    nd_cheaper = {"gather_elements": (3.2, 14), "gather_nd": (2.6, 21)}
    alpha = _both_index_types("alpha", {"matrix": nd_cheaper})
    static_nd = _both_index_types("alpha", {"matrix:static": nd_cheaper})
    for model in (matrix, column):
        assert _gather_of(revseq.inline(model, target=alpha)) == "GatherND"
        assert _gather_of(revseq.inline(model, target=static_nd)) == "GatherElements"
        static = one_node([7, 4] if model is matrix else [7, 4, 1])
        assert _gather_of(revseq.inline(static, target=alpha)) == "GatherElements"
        assert _gather_of(revseq.inline(static, target=static_nd)) == "GatherND"
    # Within the tie the fewer nodes go first.
    tied = _both_index_types("alpha", {"matrix": {**nd_cheaper, "gather_nd": (3.0, 21)}})
    assert _gather_of(revseq.inline(matrix, target=tied)) == "GatherElements"
    # A member where GatherND costs more: the default takes the best worst case.
    beta = _both_index_types(
        "beta", {"matrix": {"gather_elements": (1.5, 14), "gather_nd": (9.0, 21)}}
    )
    default = combine([alpha, beta])
    assert _gather_of(revseq.inline(matrix, target=default)) == "GatherElements"
    # GatherND's int32 timing counts for it as for any form.
    narrow = {**nd_cheaper, "gather_nd": (4.0, 21), "gather_nd@int32": (2.0, 27)}
    inlined = revseq.inline(matrix, target=_both_index_types("alpha", {"matrix": narrow}))
    assert _gather_of(inlined) == "GatherND" and _int32_casts(inlined)


def test_single_element_rows_go_by_the_row_gathers_cost():
    """The row form's Gather of single elements, timed as ``gather_rows`` on such rows,
    competes with GatherElements' matrix and GatherND by cost, whether GatherElements
    moves the type (float32; ``auto`` emits the row form with GatherElements withheld,
    as it was timed: tract, OpenVINO and IREE measured it cheaper) or not (onnx2torch's
    float16 with symbolic dims). Named, ``gather_rows`` still gathers such rows as
    GatherElements does where it moves the type."""
    costs = {"gather_elements": (1.0, 14), "gather_nd": (9.0, 21), "gather_rows": (3.0, 23)}
    alpha = _both_index_types("alpha", {"matrix": costs})
    half = frozenset({"float32", "float16"})
    lacking = dataclasses.replace(
        alpha, dtypes={**alpha.dtypes, "Gather": half, "GatherND": half}
    )  # GatherElements: float32 and uint16 only
    for dims in (["T", "B"], ["T", "B", 1]):
        model = one_node(dims, TensorProto.FLOAT16)
        assert _gather_of(revseq.inline(model, target=lacking)) == "Gather"
        dearer = _both_index_types("alpha", {"matrix": {**costs, "gather_rows": (12.0, 23)}})
        dearer = dataclasses.replace(dearer, dtypes=lacking.dtypes)
        assert _gather_of(revseq.inline(model, target=dearer)) == "GatherND"
        # float32: GatherElements while it is the cheaper; the row Gather, in the index
        # type it was timed cheapest in, once that is.
        float32 = one_node(dims)
        assert _gather_of(revseq.inline(float32, target=alpha)) == "GatherElements"
        cheapest = {**costs, "gather_elements@int32": (2.0, 18), "gather_rows@int32": (0.5, 9)}
        rows_timed_cheapest = _both_index_types("alpha", {"matrix": cheapest})
        inlined = revseq.inline(float32, target=rows_timed_cheapest)
        assert _gather_of(inlined) == "Gather" and _int32_casts(inlined)
        named = revseq.inline(float32, strategy="gather_rows", target=alpha)
        assert _gather_of(named) == "GatherElements"
    static = {"matrix:static": {"gather_elements": (3.0, 6), "gather_nd": (9.0, 11),
                                "gather_rows": (1.5, 10)}}  # fmt: skip
    rows_cheaper = _both_index_types("alpha", static)
    assert _gather_of(revseq.inline(one_node([7, 4]), target=rows_cheaper)) == "Gather"
    # Untimed (a profile from before the row gather was timed): last, as before.
    untimed = dataclasses.replace(
        lacking, costs={"matrix": {k: v for k, v in lacking.costs["matrix"].items()
                                   if not k.startswith("gather_rows")}}
    )  # fmt: skip
    half_matrix = one_node(["T", "B"], TensorProto.FLOAT16)
    assert _gather_of(revseq.inline(half_matrix, target=untimed)) == "GatherND"


def test_kept_costs_are_topped_up_with_what_they_lack():
    """``--keep-costs`` keeps the saved timings and times only the forms (or classes)
    added since; the merge keeps every saved cost."""
    from revseq.measure.costs import timed_forms
    from revseq.probe.backend import _merged, _untimed

    forms = {"static": frozenset({"gather_rows", "gather_nd"}),
             "dynamic": frozenset({"gather_rows", "gather_rows@int32"})}  # fmt: skip
    timing = timed_forms(forms)
    assert timing["matrix"] == {"gather_rows", "gather_rows@int32"}
    kept = {"static": {"gather_rows": Cost(2.0, 6), "gather_nd": Cost(3.0, 7)},
            "matrix": {"gather_rows": Cost(5.0, 20)}}  # fmt: skip
    missing = _untimed(timing, kept)
    assert missing["static"] == frozenset() and missing["matrix"] == {"gather_rows@int32"}
    assert missing["all"] == {"gather_rows", "gather_rows@int32"}
    merged = _merged(kept, {"matrix": {"gather_rows@int32": Cost(4.0, 26)}, "all": {}})
    assert merged["static"] == kept["static"]
    assert merged["matrix"] == {
        "gather_rows": Cost(5.0, 20),
        "gather_rows@int32": Cost(4.0, 26),
    }


def test_the_default_reads_each_backends_int32_timings_where_its_index_is_int32():
    """One member computes indexes in int32 only (WebGPU): the default's index is int32,
    so the others' int32 timings decide (their int64 ones put GatherND first)."""
    symbolic = one_node(["T", "B", 3])
    alpha = _both_index_types(
        "alpha",
        {
            "time+batch": {
                "gather_nd": (2.0, 20),
                "gather_nd@int32": (6.0, 25),
                "gather_rows": (3.0, 21),
                "gather_rows@int32": (2.5, 26),
                "gather_elements": (9.0, 15),
                "gather_elements@int32": (9.0, 18),
            }
        },
    )
    beta_costs = {
        "gather_nd": (2.0, 25),
        "gather_rows": (2.0, 26),
        "gather_elements": (9.0, 18),
    }
    beta = _both_index_types("beta", {"time+batch": beta_costs}, int64=False)
    default = combine([alpha, beta])
    inlined = revseq.inline(symbolic, target=default)
    assert _gather_of(inlined) == "Gather" and _int32_casts(inlined)
    wide = combine([alpha, dataclasses.replace(beta, dynamic_ops=alpha.dynamic_ops)])
    assert _gather_of(revseq.inline(symbolic, target=wide)) == "GatherND"


_LEAN = frozenset({"Shape:arithmetic", "Range:data_dim", "ReduceSum:scalar"})


def _lean(name, costs, *, lean=_LEAN):
    """A synthetic profile that runs every form with symbolic dims with the lean index
    (``form@lean``, the variants ``lean``) and without it."""
    profile = _costed(name, **costs)
    forms = {"gather_elements", "gather_nd", "gather_rows"}
    return dataclasses.replace(
        profile,
        dynamic_ops=profile.dynamic_ops | {"Mul:dim", "ReduceSum"} | lean,
        forms={
            "static": frozenset(forms),
            "dynamic": frozenset(forms | {f + "@lean" for f in forms}),
        },
    )


def _ops_but_the_view(model):
    """The op types but constants, a row view by Flatten read as one by Reshape."""
    ops = (n.op_type for n in model.graph.node if n.op_type != "Constant")
    return ["Reshape" if op == "Flatten" else op for op in ops]


def _shape_casts(model):
    """Casts to int64 of a value read from a shape (the index's run-time dims)."""
    shapes = {n.output[0] for n in model.graph.node if n.op_type == "Shape"}
    return sum(n.op_type == "Cast" and n.input[0] in shapes for n in model.graph.node)


def test_a_target_takes_the_lean_index_where_its_own_timings_chose_it():
    """Symbolic dims: ``form@lean`` (no Cast of the dims read from the shape, the batch
    count read from the data, Range's scalars by ReduceSum) is a candidate of its own,
    chosen by the target's costs (within the tie, by fewer nodes); the form's own name
    stands for it without the lean index, whatever variants the target has; the default
    takes it only where every member timed it."""
    symbolic = one_node(["T", "B", 3])
    lean_costs = {"gather_rows": (3.0, 21), "gather_rows@lean": (2.0, 17)}
    cheaper = _lean("alpha", {"time+batch": lean_costs})
    inlined = revseq.inline(symbolic, target=cheaper)
    ops = all_op_types(inlined)
    assert _gather_of(inlined) == "Gather" and "ReduceSum" in ops and "Squeeze" not in ops
    assert not _shape_casts(inlined)
    assert not [n for n in inlined.graph.node if n.op_type == "Shape" and n.input[0] == "lens"]
    x = np.random.default_rng(0).standard_normal((6, 4, 3)).astype(np.float32)
    lens = np.array([0, 1, 6, 9])
    truth = reverse_sequence(x, np.clip(lens, 0, 6)).tobytes()
    for optimize in (False, True):
        got = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)[0]
        assert got.tobytes() == truth
    # Dearer beyond the tie: the form without it.
    dearer = _lean("alpha", {"time+batch": {**lean_costs, "gather_rows@lean": (3.5, 17)}})
    plain = revseq.inline(symbolic, target=dearer)
    assert "ReduceSum" not in all_op_types(plain) and _shape_casts(plain)
    # A strategy by name is the form without the lean index, on any target.
    named = revseq.inline(symbolic, strategy="gather_rows", target=cheaper)
    assert [n.op_type for n in named.graph.node] == [n.op_type for n in plain.graph.node]
    # Nor for a target without a list (``any``: what a strategy gets with no target),
    # whose row view is a Flatten where the synthetic profile's is a Reshape.
    unlisted = revseq.inline(symbolic, strategy="gather_rows")
    assert _ops_but_the_view(unlisted) == _ops_but_the_view(plain)
    # Only the variants the target has: without ReduceSum:scalar, Range's scalars Squeeze.
    partial = _lean("alpha", {"time+batch": lean_costs}, lean=_LEAN - {"ReduceSum:scalar"})
    ops = all_op_types(revseq.inline(symbolic, target=partial))
    assert "Squeeze" in ops and "ReduceSum" not in ops
    # A form@lean that did not run exactly is not a candidate.
    ran = cheaper.forms["dynamic"] - {"gather_rows@lean"}
    unproven = dataclasses.replace(cheaper, forms={**cheaper.forms, "dynamic": ran})
    assert "ReduceSum" not in all_op_types(revseq.inline(symbolic, target=unproven))
    # The default: a member that has no lean index (TVM) never timed form@lean.
    beta = _costed("beta", **{"time+batch": {"gather_rows": (2.0, 21)}})
    plain_forms = {k: {f for f in v if "@" not in f} for k, v in cheaper.forms.items()}
    beta = dataclasses.replace(
        beta, dynamic_ops=beta.dynamic_ops | {"Mul:dim"}, forms=plain_forms
    )
    both = revseq.inline(symbolic, target=combine([cheaper, beta]))
    assert _gather_of(both) == "Gather" and "ReduceSum" not in all_op_types(both)
    # Nor where every member timed form@lean with variants of its own: the default's
    # lean index is the variants they share, which none of them timed.
    gamma = _lean("gamma", {"time+batch": lean_costs}, lean=frozenset({"ReduceSum:scalar"}))
    assert "ReduceSum" not in all_op_types(
        revseq.inline(symbolic, target=combine([cheaper, gamma]))
    )
    alike = combine([cheaper, _lean("gamma", {"time+batch": lean_costs})])
    assert "ReduceSum" in all_op_types(revseq.inline(symbolic, target=alike))
    # Restore reads it back.
    assert [n.op_type for n in revseq.restore(inlined).graph.node] == ["ReverseSequence"]


def test_a_shape_as_read_is_not_summed_where_the_target_does_no_arithmetic_on_one():
    """TVM Relax keeps a Shape's output as a shape expression, which its ReduceSum does
    not take ("cannot handle ShapeExpr inputs"): with ``ReduceSum:scalar`` but not
    ``Shape:arithmetic`` (nor ``Range:data_dim``: the batch counted from the lengths'
    shape), Range's scalar of a shape as read is a Squeeze; a computed vector is
    still summed."""
    symbolic = one_node(["T", "B", 3])
    costs = {"time+batch": {"gather_rows": (3.0, 21), "gather_rows@lean": (2.0, 17)}}
    tvm_like = _lean("alpha", costs, lean=frozenset({"ReduceSum:scalar"}))
    inlined = revseq.inline(symbolic, target=tvm_like)
    producer = {out: n.op_type for n in inlined.graph.node for out in n.output}
    summed = [producer[n.input[0]] for n in inlined.graph.node if n.op_type == "ReduceSum"]
    squeezed = [producer[n.input[0]] for n in inlined.graph.node if n.op_type == "Squeeze"]
    assert summed and "Shape" not in summed
    assert squeezed == ["Shape"]
    # Where it has the arithmetic, the same read is summed.
    full = _lean("alpha", costs, lean=frozenset({"ReduceSum:scalar", "Shape:arithmetic"}))
    full_inlined = revseq.inline(symbolic, target=full)
    assert "Squeeze" not in all_op_types(full_inlined)
    x = np.random.default_rng(1).standard_normal((6, 4, 3)).astype(np.float32)
    lens = np.array([0, 1, 6, 9])
    truth = reverse_sequence(x, np.clip(lens, 0, 6)).tobytes()
    for model in (inlined, full_inlined):
        for optimize in (False, True):
            got = run_ort(model, {"x": x, "lens": lens}, optimize=optimize)[0]
            assert got.tobytes() == truth


def test_a_target_without_mul_by_a_dim_counts_its_stride():
    """tract cannot multiply a tensor by a dim read from a shape: where a target lacks
    ``Mul:dim`` the row form's run-time stride is a ReduceSum of ones (exact in int64)."""
    ort = TARGETS["onnxruntime"]

    def without(*ops):
        return dataclasses.replace(ort, name="alpha", dynamic_ops=ort.dynamic_ops - set(ops))

    symbolic = one_node(["T", "B", 3])
    counted = revseq.inline(symbolic, strategy="gather_rows", target=without("Mul:dim"))
    assert "ReduceSum" in {n.op_type for n in counted.graph.node}
    rng = np.random.default_rng(0)
    for time_len, batch in ((5, 4), (1, 3), (6, 1), (0, 2)):
        x = rng.standard_normal((time_len, batch, 3)).astype(np.float32)
        lens = rng.integers(0, time_len + 1, batch).astype(np.int64)
        for optimize in (False, True):
            got = run_ort(counted, {"x": x, "lens": lens}, optimize=optimize)[0]
            assert got.tobytes() == reverse_sequence(x, lens).tobytes()
    assert [n.op_type for n in revseq.restore(counted).graph.node] == ["ReverseSequence"]
    with pytest.raises(revseq.StrategyError, match="Mul:dim"):
        revseq.inline(symbolic, strategy="gather_rows", target=without("Mul:dim", "ReduceSum"))
    # ONNX op types named as a target multiply by a dim (ONNX's Mul does).
    named = revseq.inline(symbolic, strategy="gather_rows", target=sorted(ort.dynamic_ops))
    assert "ReduceSum" not in {n.op_type for n in named.graph.node}


def test_the_row_view_of_symbolic_trailing_dims_follows_what_the_target_reshapes():
    """Synthetic, from onnxruntime's profile: ``[rows, *trailing]`` read from the shape
    (``Reshape:view``) where the target has it and a Flatten view would not do (several
    symbolic trailing dims, or no Flatten: tract); a Flatten view otherwise (TVM
    reshapes only to a shape as read), reshaped back where it flattened several."""
    ort = TARGETS["onnxruntime"]

    def alpha(*lacking):
        ops = ort.dynamic_ops - set(lacking)
        return dataclasses.replace(ort, name="alpha", dynamic_ops=ops)

    def view_ops(model):
        ops = [n.op_type for n in model.graph.node if "x" in n.input]
        return [op for op in ops if op in ("Flatten", "Reshape")]

    rank3, rank4 = one_node(["T", "B", "F"]), one_node(["T", "B", "C", "D"])
    cases = [
        (rank3, alpha(), ["Flatten"]),
        (rank3, alpha("Flatten"), ["Reshape"]),
        (rank4, alpha(), ["Reshape"]),
        (rank4, alpha("Reshape:view"), ["Flatten"]),
    ]
    rng = np.random.default_rng(0)
    for model, target, expected in cases:
        inlined = revseq.inline(model, strategy="gather_rows", target=target)
        assert view_ops(inlined) == expected
        last = inlined.graph.node[-1]
        reshaped_back = last.op_type == "Reshape" and "x" not in last.input
        assert reshaped_back == (expected == ["Flatten"] and model is rank4)
        rank = len(model.graph.input[0].type.tensor_type.shape.dim)
        for shape in ((5, 3, 2, 4), (3, 0, 2, 2), (4, 2, 0, 3)):
            x = rng.standard_normal(shape[:rank]).astype(np.float32)
            lens = np.array([shape[0], 0, 1][: shape[1]], np.int64)
            got = run_ort(inlined, {"x": x, "lens": lens}, optimize=False)[0]
            assert got.shape == x.shape
            assert got.tobytes() == reverse_sequence(x, lens).tobytes()
    with pytest.raises(revseq.StrategyError, match="Flatten"):
        revseq.inline(rank3, strategy="gather_rows", target=alpha("Flatten", "Reshape:view"))


def test_a_default_no_form_fits_names_the_backends_in_the_way():
    """Synthetic: one backend lacks GatherND on symbolic dims, the other's GatherElements
    moves no uint16; the default they make refuses uint16 there, naming both."""
    every_op = frozenset(TARGETS[PORTABLE].static_ops) | {"Index:int64"}
    default = combine(
        [
            _probed("alpha", dynamic_ops=every_op - {"GatherND"},
                    gather_elements=frozenset({"float32", "uint16"})),
            _probed("beta", dynamic_ops=every_op, gather_elements=frozenset({"float32"})),
        ]
    )  # fmt: skip
    model = one_node(["T", "B", 3], elem=TensorProto.UINT16)
    with pytest.raises(revseq.StrategyError) as error:
        revseq.inline(model, target=default)
    message = str(error.value)
    assert "GatherND, which alpha 1.0 lacks" in message
    assert "moves no uint16 on beta 1.0" in message
    assert "declare static input shapes" in message
    assert gathers(revseq.inline(one_node([5, 4, 3], elem=TensorProto.UINT16), target=default))


def test_a_named_target_refuses_a_type_it_lacks_with_its_version():
    model = one_node(["T", "B", 3], elem=TensorProto.COMPLEX64)
    refusal = r"target 'tract' .*probed with tract 0\.23"
    with pytest.raises(revseq.StrategyError, match=refusal):
        revseq.inline(model, target="tract")
    assert gathers(revseq.inline(model))  # the default serves it (tract has no complex)


def test_targets_command_marks_each_source(capsys):
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:] if line.strip()}
    for name in PROBED:
        assert rows[name] == "probed", out
    for name in DOCUMENTED:
        assert rows[name] == "documented", out


def test_several_backends_get_output_that_runs_on_each():
    """target=("onnx2torch", "tvm"): what both run, not what either does (TVM's GatherND
    takes batch_dims, onnx2torch's raises on it)."""
    pair = revseq.ops.targets.resolve_target(("tvm", "onnx2torch"))
    assert pair.name == "onnx2torch+tvm" and pair.members == (
        TARGETS["onnx2torch"],
        TARGETS["tvm"],
    )
    model = one_node(["B", "T", 3], batch_axis=0, time_axis=1)
    assert any(
        a.i
        for n in gathers(revseq.inline(model, strategy="gather_nd", target="tvm"))
        for a in n.attribute
    )  # batch_dims
    both = revseq.inline(model, strategy="gather_nd", target=("onnx2torch", "tvm"))
    assert not any(a.i for n in gathers(both) for a in n.attribute if a.name == "batch_dims")
    assert revseq.ops.targets.resolve_target(["tvm"]) is TARGETS["tvm"]
    assert revseq.ops.targets.resolve_target(["any", "tvm"]) is TARGETS["tvm"]


def test_probe_on_onnxruntime_matches_its_shipped_profile_and_times_the_forms(capsys):
    """What ``revseq probe onnxruntime`` measures here is what ships (ops, types, forms),
    and each form that ran gets a cost per shape class (values are not asserted)."""
    from revseq.measure.costs import MATRIX_FORMS
    from revseq.probe.backend import probe_backend

    probed, results = probe_backend("onnxruntime")
    shipped = TARGETS["onnxruntime"]
    if probed.backend_version == shipped.backend_version:  # another release may differ
        assert (probed.static_ops, probed.dynamic_ops) == (
            shipped.static_ops,
            shipped.dynamic_ops,
        )
        assert probed.dtypes == shipped.dtypes and probed.forms == shipped.forms
    assert any(r.index == "int32" for r in results)  # the int32 twins ran
    assert probed.costs is not None
    assert set(probed.costs) == {"static", "time+batch", "all", "matrix", "matrix:static"}
    for kind, costs in probed.costs.items():
        ran = probed.forms["static" if kind.endswith("static") else "dynamic"]
        assert set(costs) == (ran & MATRIX_FORMS if kind.startswith("matrix") else ran)
        assert all(c.ratio > 0 and c.nodes > 0 for c in costs.values())
    # The index layout timed per class, on batches of 1 to 256 (values not asserted).
    assert set(probed.layouts or {}) <= set(probed.costs) and probed.layouts
    assert all(
        lay.swapped_ratio > 0 and lay.in_place_ratio > 0 for lay in probed.layouts.values()
    )
    again = Profile.from_json(json.loads(json.dumps(probed.to_json())))
    assert again.costs == probed.costs and again.layouts == probed.layouts
    assert main(["probe", "onnxruntime", "--no-costs", "--json"]) == 0
    assert "costs" not in json.loads(capsys.readouterr().out)


def test_a_gather_moves_a_type_where_it_ran_with_its_index_constant_and_at_run_time():
    """Each gather's type probe runs twice, its index a constant and an input: a backend
    may take another kernel for each (tinygrad 0.14's float16 Gather quiets a signalling
    NaN with a run-time index only), and the forms feed both."""
    from revseq.backends import get
    from revseq.probe._runs import ProbeResult, moved, run_dtype_probes

    results = run_dtype_probes(get("onnxruntime"))
    passed = {r.certifies for r in results if r.failure is None}
    assert len(results) == len(passed) + len({r.certifies for r in results})
    assert {r.name for r in results} >= {"Gather[float16]", "Gather[float16] (run-time index)"}
    ok = ProbeResult("Gather[float16]", "static", ("Gather", "float16"), None)
    quieted = dataclasses.replace(ok, name="Gather[float16] (run-time index)", failure="x")
    other = ProbeResult("GatherND[float16]", "static", ("GatherND", "float16"), None)
    assert moved([ok, quieted, other]) == {("GatherND", "float16")}


def test_probe_keeps_the_saved_costs_of_the_same_version_only(capsys):
    """``--keep-costs`` probes what runs anew and keeps the shipped timings; a saved
    profile of another version has its costs refused, in one line."""
    from revseq.probe.backend import ProbeError, probe_backend

    shipped = TARGETS["onnxruntime"]
    assert main(["probe", "onnxruntime", "--keep-costs", "--json"]) == 0
    kept = Profile.from_json(json.loads(capsys.readouterr().out))
    assert kept.costs == shipped.costs
    assert kept.layouts == shipped.layouts  # timed on the output the kept costs choose
    assert kept.forms == shipped.forms
    older = dataclasses.replace(shipped, backend_version="onnxruntime 0.1")
    with pytest.raises(ProbeError, match=r"probed with onnxruntime 0\.1"):
        probe_backend("onnxruntime", keep=older)


def test_mnn_gets_no_batch_dims_where_tuples_hold_two_coordinates():
    """MNN 3.6.1 reads GatherND batch_dims wrong where its tuples hold two coordinates
    (probe GatherND:batch_dims:tuples): a batch axis after the time axis takes every
    leading axis as a coordinate there; one coordinate keeps batch_dims."""
    from revseq.ops.reference import reverse_sequence_model

    def batch_dims(dims, batch_axis, time_axis, target):
        model = reverse_sequence_model(
            dims, TensorProto.FLOAT, batch_axis=batch_axis, time_axis=time_axis,
            domain="revseq",
        )  # fmt: skip
        inlined = revseq.inline(model, target=target, strategy="gather_nd")
        (node,) = [n for n in inlined.graph.node if n.op_type == "GatherND"]
        return {a.name: a.i for a in node.attribute}.get("batch_dims", 0)

    assert "GatherND:batch_dims:tuples" not in TARGETS["mnn"].static_ops
    assert batch_dims([3, 5, 2, 4, 6], 3, 1, "mnn") == 0
    assert batch_dims([3, 5, 2, 4, 6], 3, 1, "onnxruntime") == 1
    assert batch_dims([4, 5, 6], 0, 1, "mnn") == 1  # one coordinate: (src,)


def test_a_backend_that_falls_back_yields_where_no_form_fits_every_member():
    """Synthetic: "gpu" (falls back to the CPU, like WebGPU) moves bool only with Gather
    and has no int64 arithmetic; "alpha" runs no row form on symbolic dims. With static
    dims the default fits both (int32 index, the row form); with symbolic dims no form
    does, so "gpu" yields: the output is alpha's, in int64, and nothing is refused. A
    member that does not fall back never yields."""
    ops = _EVERY_OP
    gpu = dataclasses.replace(
        _probed("gpu", dynamic_ops=ops, gather_elements=frozenset({"float32"})),
        static_ops=ops - {"Index:int64"} | {"Index:int32"},
        dynamic_ops=ops - {"Index:int64"} | {"Index:int32"},
        dtypes={g: frozenset({"float32", "bool"} if g == "Gather" else {"float32"})
                for g in GATHER_OPS},
        forms={"static": frozenset({"gather_rows"}), "dynamic": frozenset({"gather_rows"})},
        falls_back=True,
    )  # fmt: skip
    alpha = _probed("alpha", dynamic_ops=ops, gather_elements=frozenset({"float32", "bool"}))
    alpha = dataclasses.replace(
        alpha,
        static_ops=alpha.static_ops | {"Index:int32"},
        dynamic_ops=alpha.dynamic_ops | {"Index:int32"},
        dtypes=dict.fromkeys(GATHER_OPS, frozenset({"float32", "bool"})),
    )
    default = combine([gpu, alpha])
    static = revseq.inline(one_node([5, 4, 3], elem=TensorProto.BOOL), target=default)
    assert _gather_of(static) == "Gather"
    symbolic = revseq.inline(one_node(["T", "B", 3], elem=TensorProto.BOOL), target=default)
    assert _gather_of(symbolic) in ("GatherND", "GatherElements")
    strict = combine([dataclasses.replace(gpu, falls_back=False), alpha])
    with pytest.raises(revseq.StrategyError):
        revseq.inline(one_node(["T", "B", 3], elem=TensorProto.BOOL), target=strict)


# --- The index layout ------------------------------------------------------------------


def _laid_out(profile: Profile, layouts: dict[str, bool], name: str | None = None) -> Profile:
    """``profile`` as if its probe had chosen ``layouts`` (in place or not, per class)."""
    return dataclasses.replace(
        profile,
        name=name or profile.name,
        layouts={
            cls: Layout(chosen, 2.0, 1.5 if chosen else 3.0) for cls, chosen in layouts.items()
        },
    )


LAYOUT_CASES = {  # a time-major node of each class, and its data's shape to run
    "matrix": (["T", "B"], (9, 3)),
    "matrix:static": ([400, 3], (400, 3)),  # beyond the table (its Transpose stays)
    "time+batch": (["T", "B", 4], (9, 3, 4)),
    "all": (["T", "B", "F"], (9, 3, 4)),
}


@pytest.mark.parametrize("cls", LAYOUT_CASES)
def test_a_probed_layout_decides_whether_the_index_is_transposed(cls):
    """The swapped layout (a Transpose of the index, or of single-element data) is
    onnxruntime's for short batches; a profile whose probe timed the index cheaper in
    place for the class gets it in place, exactly, and only for that class."""
    dims, shape = LAYOUT_CASES[cls]
    model = one_node(dims)
    base = dataclasses.replace(TARGETS["onnxruntime"], layouts=None)
    swapped = revseq.inline(model, target=base)
    in_place = revseq.inline(model, target=_laid_out(base, {cls: True}))
    assert "Transpose" in all_op_types(swapped)
    assert "Transpose" not in all_op_types(in_place)
    other = next(c for c in LAYOUT_CASES if c != cls)
    elsewhere = revseq.inline(model, target=_laid_out(base, {other: True, cls: False}))
    assert elsewhere.SerializeToString() == swapped.SerializeToString()
    # The probe forces each way over whatever layout the profile holds (a kept one).
    chosen = _laid_out(base, {cls: True})
    forced = revseq.inline(model, target=laid_out(chosen, cls, in_place=False))
    assert forced.SerializeToString() == swapped.SerializeToString()
    forced = revseq.inline(model, target=laid_out(base, cls, in_place=True))
    assert forced.SerializeToString() == in_place.SerializeToString()
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    time_len = shape[0]
    lens = np.resize(np.array([time_len, 0, 1, 2], np.int64), shape[1])
    expected = reverse_sequence(x, lens).tobytes()
    for optimize in (False, True):
        got = run_ort(in_place, {"x": x, "lens": lens}, optimize=optimize)[0]
        assert got.tobytes() == expected


def test_the_default_computes_in_place_only_where_every_member_chose_it():
    alpha = dataclasses.replace(TARGETS["onnxruntime"], name="alpha", layouts=None)
    model = one_node(["T", "B"])
    agree = combine(
        [_laid_out(alpha, {"matrix": True}), _laid_out(alpha, {"matrix": True}, "beta")]
    )
    differ = combine(
        [_laid_out(alpha, {"matrix": True}), _laid_out(alpha, {"matrix": False}, "beta")]
    )
    untimed = combine(
        [_laid_out(alpha, {"matrix": True}), dataclasses.replace(alpha, name="beta")]
    )
    assert "Transpose" not in all_op_types(revseq.inline(model, target=agree))
    assert "Transpose" in all_op_types(revseq.inline(model, target=differ))
    assert "Transpose" not in all_op_types(revseq.inline(model, target=untimed))


def test_a_layout_is_chosen_in_place_only_where_no_case_loses_beyond_the_tie():
    assert measured_layout([2.0, 4.0], [2.1, 3.0], exact=True).in_place
    assert not measured_layout([2.0, 4.0], [2.1, 3.0], exact=False).in_place
    # Cheaper on average, but one batch size took it 1.5x: swapped.
    lost = measured_layout([2.0, 4.0, 4.0], [3.0, 2.0, 2.0], exact=True)
    assert not lost.in_place and lost.in_place_ratio < lost.swapped_ratio
    round_trip = Profile.from_json(_laid_out(TARGETS["tvm"], {"matrix": True}).to_json())
    assert round_trip.layouts == {"matrix": Layout(True, 2.0, 1.5)}


def test_user_profiles_are_read_over_the_shipped_ones(tmp_path):
    import os
    import subprocess
    import sys

    from revseq.ops.targets import TARGETS as shipped
    from revseq.probe.profile_file import saved_profile, write_profile

    mine = dataclasses.replace(shipped["tvm"], name="mytvm", backend_version="tvm 9.9")
    path = write_profile(mine, tmp_path)
    assert path == tmp_path / "mytvm.json"
    assert saved_profile("mytvm", tmp_path).backend_version == "tvm 9.9"
    program = (
        "import revseq; print(revseq.TARGETS['mytvm'].backend_version, "
        "revseq.TARGETS['tvm'].backend_version)"
    )
    env = {**os.environ, "REVSEQ_PROFILES": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[:2] == ["tvm", "9.9"] and out[2:] == shipped["tvm"].backend_version.split()
    assert json.loads(path.read_text())["name"] == "mytvm"


def test_a_deployment_runtime_is_kept_out_of_the_default_and_served_by_its_own_target():
    """OpenCV lacks exact int32 index arithmetic with static dims (its probe), which
    WebGPU needs: in the default it would push every static index to int64 and off the
    GPU; kept out, it narrows no one's output, and its own target serves it."""
    assert TARGETS["opencv"].yields and not TARGETS["tvm"].yields
    portable = TARGETS[PORTABLE]
    assert "opencv" not in {m.name for m in portable.members}
    assert {"tvm", "tract", "webgpu"} <= {m.name for m in portable.members}
    assert "Index:int32" in portable.static_ops
    assert "Index:int32" not in TARGETS["opencv"].static_ops
    model = one_node(["d0", "d1", "d2"], elem=TensorProto.DOUBLE)
    assert gathers(revseq.inline(model))
    assert gathers(revseq.inline(model, target="opencv"))


def test_forms_are_probed_in_a_type_the_backend_moves():
    """An NPU that stores float32 as float16 (RKNN) moves float32 (to that storage) with
    GatherND alone: the other forms are probed in int32, which their gathers move, so
    their index and ops are still certified."""
    from revseq.probe._runs import form_probe_types

    assert form_probe_types(TARGETS["onnxruntime"])[0] == "float32"
    only_int64 = dataclasses.replace(
        TARGETS["onnxruntime"], dtypes={"Gather": frozenset({"int64"})}
    )
    assert form_probe_types(only_int64) == ["int64"]
    rknn = TARGETS["rknn"]
    assert form_probe_types(rknn)[:2] == ["float32", "int32"]
    assert {"gather_rows", "gather_nd"} <= rknn.forms["static"]


def test_static_probes_build_their_index_as_the_static_forms_do():
    """A row of a constant table gathered by the lengths: no comparison, select or slice
    of a Shape on the way (x2paddle's Shape ignores start and end and its Where does not
    broadcast: they hid every gather it runs); Where's own probe keeps its select."""
    from revseq.probe._models import probe_model
    from revseq.probe._ops import OP_PROBES

    gathers = [p for p in OP_PROBES if any(c.startswith("Gather") for c in p.certifies)]
    assert len(gathers) >= 6
    for probe in gathers:
        for itype in probe.index_types:
            nodes = probe_model(probe, False, itype).graph.node
            ops = {n.op_type for n in nodes}
            assert not ops & {"Less", "Where", "Range"}, (probe.name, itype, ops)
            sliced = [n for n in nodes if n.op_type == "Shape" and n.attribute]
            assert not sliced, (probe.name, itype)
    (where,) = [p for p in OP_PROBES if p.name == "Where"]
    assert "Where" in {n.op_type for n in probe_model(where, False).graph.node}


def test_rknn_s_profile_says_what_it_rounds_as_its_adapter_does():
    """RKNN's int64 of rank 4 through float64: in the profile, and read back unchanged."""
    from revseq.backends import adapter
    from revseq.errors import ProfileError
    from revseq.ops.targets import TARGETS
    from revseq.ops.targets.profile import Profile

    profile = TARGETS["rknn"]
    declared = adapter("rknn").rounding
    assert profile.rounding == tuple((t, r, how) for t, (r, how) in declared.items())
    assert profile.rounding[0][:2] == ("int64", 4)
    assert Profile.from_json(profile.to_json()) == profile
    with pytest.raises(ProfileError, match="element type in rounding"):
        Profile.from_json(
            {**profile.to_json(), "rounding": {"int65": {"from_rank": 4, "how": ""}}}
        )
