"""Inline's planner: a form per node from a target's profile, fed synthetic profiles."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import revseq
from revseq.errors import StrategyError
from revseq.ops import forms
from revseq.ops.forms import FORMS
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.targets import ANY, TARGETS
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import INT32_INDEX, INT64_INDEX, MUL_DIM
from revseq.passes.graph import signature_of, walk
from revseq.passes.inline import planner
from revseq.passes.inline.templates import emitted

FLOAT = onnx.TensorProto.FLOAT


def _node(dims=("T", "B", 4), elem=FLOAT):
    model = ir.from_proto(reverse_sequence_model(list(dims), elem))
    scoped = next(s for s in walk(model) if s.node.op_type == "ReverseSequence")
    return scoped, signature_of(scoped, opset=17)


def _profile(ops: set[str] | None, **changes) -> Profile:
    """A profile that allows ``ops`` (None: any), static and symbolic dims alike.

    With index arithmetic of both widths: without, no form computes an index at all.
    """
    allowed = None if ops is None else frozenset({*ops, INT32_INDEX, INT64_INDEX})
    profile = Profile(
        name="synthetic",
        source="documented",
        description="a synthetic backend",
        backend_version=None,
        native=False,
        static_ops=allowed,
        dynamic_ops=allowed,
    )
    return dataclasses.replace(profile, **changes)


def _ops(plan: planner.Plan) -> set[str]:
    assert plan.template is not None
    return {node.op_type for node in plan.template.nodes}


def _allowed_ops(plan: planner.Plan) -> set[str]:
    """The plain op types a target named ``plan``'s form for allows (variants aside)."""
    return {op for op in plan.sig.allowed or () if ":" not in op and "@" not in op}


def test_any_target_gets_a_form_of_the_registry():
    scoped, sig = _node()
    plan = planner.plan("auto", sig, scoped, ANY)
    assert plan.replacement in FORMS
    assert "ReverseSequence" not in _ops(plan)


@pytest.mark.parametrize("target", ["portable", "tvm", "tract", "webnn", "qnn", "mnn"])
def test_a_plan_uses_only_what_its_target_allows(target):
    scoped, sig = _node(dims=(6, 4, 8))
    profile = TARGETS[target]
    try:
        plan = planner.plan("auto", sig, scoped, profile)
    except StrategyError as e:
        pytest.skip(f"{target} takes no static float node: {e}")
    used, _ = emitted(plan.sig, plan.replacement)  # op types and variants, as profiles say
    assert plan.sig.allowed is not None
    assert used - {"Constant"} <= plan.sig.allowed


def test_a_profile_without_gathers_gets_no_plan_and_each_form_says_why():
    scoped, sig = _node()
    profile = _profile({"Shape", "Range", "Squeeze", "Less", "Where", "Sub", "Add", "Reshape"})
    with pytest.raises(StrategyError) as caught:
        planner.plan("auto", sig, scoped, profile)
    message = str(caught.value)
    assert "no decomposition fits target 'synthetic'" in message
    assert message.count("needs ") >= 2, message


def test_a_named_strategy_that_the_target_lacks_is_refused():
    scoped, sig = _node()  # symbolic dims: the index is computed at run time
    uses = {name: emitted(sig, name)[0] for name in FORMS if name != "reverse_all"}
    name, used = next((n, u) for n, u in uses.items() if "Range" in u)
    profile = _profile(used - {"Range"})
    with pytest.raises(StrategyError, match="needs Range"):
        planner.plan(name, sig, scoped, profile)
    assert planner.plan(name, sig, scoped, _profile(used)).replacement == name


def test_the_first_form_in_order_that_fits_wins():
    scoped, sig = _node(dims=(6, 4, 8))
    every = planner.plan("auto", sig, scoped, ANY)
    # Withholding the chosen form's gather leaves a later candidate.
    gathers = {"Gather", "GatherElements", "GatherND"} & _ops(every)
    ops = set(_allowed_ops(every) or ()) | {
        "Shape", "Range", "Less", "Where", "Sub", "Add", "Reshape", "Unsqueeze", "Squeeze",
        "Expand", "Transpose", "Concat", "Cast", "Min", "Max", "Mul", "Slice", "Flatten",
        "Gather", "GatherElements", "GatherND", "Tile", "ConstantOfShape", "CumSum",
    }  # fmt: skip
    other = planner.plan("auto", sig, scoped, _profile(ops - gathers))
    assert not gathers & _ops(other)


def test_the_plan_is_recorded_once_per_signature():
    scoped, sig = _node()
    first = planner.plan("auto", sig, scoped, ANY)
    second = planner.plan("auto", sig, scoped, ANY)
    assert first.template is second.template


def test_an_unknown_strategy_names_the_known_ones():
    with pytest.raises(StrategyError, match="choose one of auto"):
        forms.check_strategy("fastest")


_GATHER_SHAPES = [
    ("T", "B"), (5, 3), (5, 3, 1), ("T", "B", 4), (2, 0, 3), (0, 3), (3, 0, 1), (4, "B", 2, 3),
    ("T", "B", 1, 1),
]  # fmt: skip
_T = onnx.TensorProto
_GATHER_TYPES = [_T.FLOAT, _T.STRING, _T.FLOAT16, _T.BOOL]


_INDEX_ONLY = frozenset(
    {"Range", "CumSum", "ConstantOfShape", "ReduceSum", MUL_DIM, INT64_INDEX, "Less", "Min"}
)
"""Op types and variants only an index is computed with: a form's view and gathers do
not depend on them."""


@pytest.mark.parametrize("dims", _GATHER_SHAPES, ids=str)
@pytest.mark.parametrize("elem", _GATHER_TYPES)
def test_what_a_form_does_with_the_data_is_seen_whatever_its_index_lacks(dims, elem):
    """``traced``: an index the target cannot compute is noted, not raised, so the
    planner still reads the form's view of the data and its gathers as emitted."""
    from revseq.ops.vocabulary import REVERSE_ALL
    from revseq.passes.inline.templates import recorded, traced, uses

    _, sig = _node(dims, elem)
    compared = lacking = 0
    for name, profile in TARGETS.items():
        fitted = planner._as_the_target_sees(sig, profile)
        if fitted.allowed is None:
            continue
        lean = dataclasses.replace(fitted, allowed=fitted.allowed - _INDEX_ONLY)
        for form in (*FORMS, REVERSE_ALL):
            try:
                whole = uses(recorded(fitted, form), fitted)
            except StrategyError:
                continue
            template, lacks = traced(lean, form)
            found = uses(template, lean)
            assert found.gathers == whole.gathers, (name, form)
            view = forms.view_kinds(form)
            assert found.view & view == whole.view & view, (name, form)
            compared += 1
            lacking += bool(lacks)
    assert compared > len(TARGETS) // 2
    assert lacking  # the lean profiles did lack an index op


def test_a_target_that_moves_no_such_data_is_told_so_before_what_the_index_lacks():
    """ncnn with run-time int64 lengths: its gathers move no float32 and it computes no
    int64 index; each form is turned away for its gather, the more basic lack."""
    from revseq.passes.inline.templates import traced

    model = reverse_sequence_model([4, 5], FLOAT, batch_axis=0, time_axis=1)
    scoped = next(s for s in walk(ir.from_proto(model)) if s.node.op_type == "ReverseSequence")
    profile = TARGETS["ncnn"]
    sig = planner._as_the_target_sees(signature_of(scoped, opset=17), profile)
    lacked = 0
    for form in FORMS:
        _, lacks = traced(sig, form)
        lacked += bool(lacks)
        why = planner._why_not_fitting(sig, form, profile, probed=False)
        assert why is not None and "which moves no float32" in why, (form, why)
    assert lacked  # an index lack was there to say first


def _constant_lengths_model(lens, dims=(6, 4, 3), elem=FLOAT, axes=(1, 0)):
    batch_axis = axes[0]
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node(
                "ReverseSequence", ["x", "L"], ["y"], batch_axis=batch_axis, time_axis=axes[1]
            )
        ],
        "constant_lengths",
        [onnx.helper.make_tensor_value_info("x", elem, list(dims))],
        [onnx.helper.make_tensor_value_info("y", elem, list(dims))],
        [onnx.numpy_helper.from_array(np.array(lens, np.int64), "L")],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


_SLICING = {"Slice:data", "Slice:reverse", "Concat:data"}  # no gather at all


@pytest.mark.parametrize(
    "lens, dims, axes",
    [
        ([2, 0, 5, 6], (6, 4, 3), (1, 0)),
        ([3, 3, 1, 1], (4, 6, 2), (0, 1)),
        ([9, -1, 6, 6], (6, 4, 3), (1, 0)),  # beyond T acts as T, below 0 as 0
        ([2, 2, 2, 2], ("T", 4, 3), (1, 0)),
    ],
    ids=str,
)
@pytest.mark.parametrize(
    "elem", [FLOAT, onnx.TensorProto.STRING, onnx.TensorProto.FLOAT16, onnx.TensorProto.BOOL]
)
def test_constant_lengths_become_slices_where_no_gather_runs(lens, dims, axes, elem):
    from helpers import assert_identical, run_reference

    from revseq.equivalence.inputs.values import random_array

    model = _constant_lengths_model(lens, dims, elem, axes)
    inlined = revseq.inline(model, target=_profile(_SLICING))
    ops = {n.op_type for n in inlined.graph.node}
    assert ops <= {"Slice", "Concat", "Constant"}, ops
    for time_len in (6, 9) if "T" in dims else (None,):
        shape = [time_len if d == "T" else d for d in dims]
        if time_len is not None and time_len < max(lens):
            continue
        x = random_array(np.random.default_rng(1), elem, tuple(shape))
        expected = reverse_sequence(x, np.array(lens), batch_axis=axes[0], time_axis=axes[1])
        assert_identical(run_reference(inlined, {"x": x})[0], expected)


def test_slices_need_constant_lengths_and_few_runs():
    scoped, sig = _node((6, 4, 3))  # lengths given at run time
    with pytest.raises(StrategyError, match="no decomposition fits"):
        planner.plan("auto", sig, scoped, _profile(_SLICING))
    many = _constant_lengths_model([i % 2 * 3 for i in range(70)], (6, 70, 3))
    with pytest.raises(revseq.RevseqError, match="no decomposition fits"):
        revseq.inline(many, target=_profile(_SLICING))
    gathering = revseq.inline(_constant_lengths_model([2, 0, 5, 6]))  # the default gathers
    assert "Slice" not in {n.op_type for n in gathering.graph.node}
