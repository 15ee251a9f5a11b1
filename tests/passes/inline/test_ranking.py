"""The planner ranks the forms a profile found exact by their measured costs (synthetic
profiles: no backend needed).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import all_op_types, run_ort
from onnx import TensorProto
from profile_cases import EVERY_OP, gather_of, one_node, probed

import revseq
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import TARGETS, combine
from revseq.ops.targets.cost import Cost


def _costed(name, **costs):
    """A synthetic probed profile whose forms cost ``costs``: {class: {form: (x, nodes)}}."""
    return probed(
        name,
        dynamic_ops=EVERY_OP,
        gather_elements=frozenset({"float32", "uint16"}),
        costs={k: {f: Cost(*c) for f, c in forms.items()} for k, forms in costs.items()},
    )


def test_auto_picks_the_cheapest_form_measured_on_the_target():
    """Synthetic costs, not the fixed order: the row form is first without them."""
    static = one_node([5, 4, 3])
    cheap_nd = _costed("alpha", static={"gather_rows": (3.0, 6), "gather_nd": (1.5, 7),
                                         "gather_elements": (5.0, 7)})  # fmt: skip
    assert gather_of(revseq.inline(static, target=cheap_nd)) == "GatherND"
    uncosted = dataclasses.replace(cheap_nd, costs=None)
    assert gather_of(revseq.inline(static, target=uncosted)) == "Gather"
    # Symbolic time and batch: measured apart from static dims.
    symbolic = one_node(["T", "B", 3])
    elements = _costed("alpha", static={"gather_nd": (1.5, 7)},
                       **{"time+batch": {"gather_nd": (4.0, 22),
                                         "gather_elements": (2.0, 16)}})  # fmt: skip
    assert gather_of(revseq.inline(symbolic, target=elements)) == "GatherElements"
    assert gather_of(revseq.inline(static, target=elements)) == "GatherND"


def test_the_default_picks_the_best_worst_case_and_ties_go_to_fewer_nodes():
    """Two backends: GatherND is the cheapest on one and the dearest on the other; the
    row form's worst case is the lowest. Within 10% of each other, fewer nodes win."""
    static = one_node([5, 4, 3])
    alpha = _costed("alpha", static={"gather_nd": (1.2, 7), "gather_rows": (2.0, 6),
                                      "gather_elements": (3.0, 7)})  # fmt: skip
    beta = _costed("beta", static={"gather_nd": (6.0, 7), "gather_rows": (2.5, 6),
                                    "gather_elements": (4.0, 7)})  # fmt: skip
    assert gather_of(revseq.inline(static, target=alpha)) == "GatherND"
    assert gather_of(revseq.inline(static, target=combine([alpha, beta]))) == "Gather"
    # A member without costs (WebGPU: untimed) has no say in the order.
    untimed = dataclasses.replace(beta, name="gamma", costs=None)
    assert gather_of(revseq.inline(static, target=combine([alpha, untimed]))) == "GatherND"
    tied = _costed("alpha", static={"gather_nd": (2.0, 12), "gather_rows": (2.1, 6),
                                     "gather_elements": (1.95, 30)})  # fmt: skip
    assert gather_of(revseq.inline(static, target=tied)) == "Gather"


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
    assert gather_of(inlined) == "Gather" and _int32_casts(inlined)
    tied = _both_index_types("alpha", {"time+batch": {**costs, "gather_rows": (2.1, 21)}})
    inlined = revseq.inline(symbolic, target=tied)
    assert gather_of(inlined) == "Gather" and not _int32_casts(inlined)
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
    assert gather_of(revseq.inline(symbolic, target=unproven)) == "GatherND"


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
        assert gather_of(revseq.inline(model, target=alpha)) == "GatherND"
        assert gather_of(revseq.inline(model, target=static_nd)) == "GatherElements"
        static = one_node([7, 4] if model is matrix else [7, 4, 1])
        assert gather_of(revseq.inline(static, target=alpha)) == "GatherElements"
        assert gather_of(revseq.inline(static, target=static_nd)) == "GatherND"
    # Within the tie the fewer nodes go first.
    tied = _both_index_types("alpha", {"matrix": {**nd_cheaper, "gather_nd": (3.0, 21)}})
    assert gather_of(revseq.inline(matrix, target=tied)) == "GatherElements"
    # A member where GatherND costs more: the default takes the best worst case.
    beta = _both_index_types(
        "beta", {"matrix": {"gather_elements": (1.5, 14), "gather_nd": (9.0, 21)}}
    )
    default = combine([alpha, beta])
    assert gather_of(revseq.inline(matrix, target=default)) == "GatherElements"
    # GatherND's int32 timing counts for it as for any form.
    narrow = {**nd_cheaper, "gather_nd": (4.0, 21), "gather_nd@int32": (2.0, 27)}
    inlined = revseq.inline(matrix, target=_both_index_types("alpha", {"matrix": narrow}))
    assert gather_of(inlined) == "GatherND" and _int32_casts(inlined)


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
        assert gather_of(revseq.inline(model, target=lacking)) == "Gather"
        dearer = _both_index_types("alpha", {"matrix": {**costs, "gather_rows": (12.0, 23)}})
        dearer = dataclasses.replace(dearer, dtypes=lacking.dtypes)
        assert gather_of(revseq.inline(model, target=dearer)) == "GatherND"
        # float32: GatherElements while it is the cheaper; the row Gather, in the index
        # type it was timed cheapest in, once that is.
        float32 = one_node(dims)
        assert gather_of(revseq.inline(float32, target=alpha)) == "GatherElements"
        cheapest = {**costs, "gather_elements@int32": (2.0, 18), "gather_rows@int32": (0.5, 9)}
        rows_timed_cheapest = _both_index_types("alpha", {"matrix": cheapest})
        inlined = revseq.inline(float32, target=rows_timed_cheapest)
        assert gather_of(inlined) == "Gather" and _int32_casts(inlined)
        named = revseq.inline(float32, strategy="gather_rows", target=alpha)
        assert gather_of(named) == "GatherElements"
    static = {"matrix:static": {"gather_elements": (3.0, 6), "gather_nd": (9.0, 11),
                                "gather_rows": (1.5, 10)}}  # fmt: skip
    rows_cheaper = _both_index_types("alpha", static)
    assert gather_of(revseq.inline(one_node([7, 4]), target=rows_cheaper)) == "Gather"
    # Untimed (a profile from before the row gather was timed): last, as before.
    untimed = dataclasses.replace(
        lacking, costs={"matrix": {k: v for k, v in lacking.costs["matrix"].items()
                                   if not k.startswith("gather_rows")}}
    )  # fmt: skip
    half_matrix = one_node(["T", "B"], TensorProto.FLOAT16)
    assert gather_of(revseq.inline(half_matrix, target=untimed)) == "GatherND"


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
    assert gather_of(inlined) == "Gather" and _int32_casts(inlined)
    wide = combine([alpha, dataclasses.replace(beta, dynamic_ops=alpha.dynamic_ops)])
    assert gather_of(revseq.inline(symbolic, target=wide)) == "GatherND"


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
    assert gather_of(inlined) == "Gather" and "ReduceSum" in ops and "Squeeze" not in ops
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
    assert gather_of(both) == "Gather" and "ReduceSum" not in all_op_types(both)
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
