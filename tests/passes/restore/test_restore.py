"""The restore pass: decompositions fused back into ReverseSequence, and only those.

Round trips through inline, constant lengths, other types; what exporters and
optimisers write: ``test_restore_exports.py``.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import onnxscript.optimizer
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnxscript import rewriter
from restore_cases import (
    FLOAT,
    INT64,
    node_attr,
    one_node,
    random_feeds,
    run_in_ort,
    sig_of,
)

import revseq
from revseq.models import FOLDER as MODELS
from revseq.ops import reverse_sequence
from revseq.ops.reference import reverse_sequence_model
from revseq.passes import RestoreReverseSequencePass
from revseq.passes.restore.rules import rules

FORMS = ("gather_elements", "gather_nd", "gather_rows")


ROUND_TRIP_CASES = [
    ((5, 3, 4), 1, 0, ""),
    (("T", "B", 4), 1, 0, ""),
    (("B", "T"), 0, 1, ""),
    ((3, 5, 2, 2), 0, 1, ""),
    (("T", "B", 2, 2, 3), 1, 0, ""),
    ((2, 3, 4, 5), 2, 3, "revseq"),
    (("a", "b", "c", 4), 0, 2, "revseq"),
    ((4, 3, 5), 2, 0, "revseq"),
]


@pytest.mark.parametrize("as_function", [False, True])
@pytest.mark.parametrize("strategy", FORMS)
@pytest.mark.parametrize(("dims", "batch_axis", "time_axis", "domain"), ROUND_TRIP_CASES)
def test_restore_inverts_inline(dims, batch_axis, time_axis, domain, strategy, as_function):
    model = one_node(dims, batch_axis, time_axis, domain=domain)
    inlined = revseq.inline(model, strategy=strategy, as_function=as_function)
    restored = revseq.restore(inlined)
    onnx.checker.check_model(restored, full_check=True)
    assert sig_of(restored) == sig_of(model)
    assert [n.op_type for n in restored.graph.node] == ["ReverseSequence", "Identity"]
    assert restored.graph.node[0].name == "rs"
    assert not restored.functions
    rng = np.random.default_rng(0)
    feeds, shapes = random_feeds(model, rng)
    time_len = shapes["x"][time_axis]
    lens = rng.integers(0, time_len, shapes["lens"], endpoint=True)
    lens[0] = time_len
    feeds["lens"] = lens.astype(np.int64)
    got = run_in_ort(restored, feeds)[0] if not domain else None
    expected = reverse_sequence(feeds["x"], lens, batch_axis=batch_axis, time_axis=time_axis)
    if got is not None:
        assert got.tobytes() == expected.tobytes()
    assert run_in_ort(inlined, feeds)[0].tobytes() == expected.tobytes()


CONSTANT_LENGTH_CASES = [
    ((6, 4), 1, 0, ""),
    ((4, 6), 0, 1, ""),
    ((6, 4, 3), 1, 0, ""),
    ((4, 6, 3), 0, 1, ""),
    ((6, 4, 3, 2), 1, 0, ""),
    ((3, 6, 4), 2, 1, "revseq"),
    ((2, 6, 3, 4), 3, 1, "revseq"),
    (("T", 4), 1, 0, ""),
    ((4, "T", "F"), 0, 1, ""),
    (("T", 4, 3, 2), 1, 0, ""),
    ((3, "T", 4), 2, 1, "revseq"),
]


@pytest.mark.parametrize("strategy", ("auto", *FORMS))
@pytest.mark.parametrize(("dims", "batch_axis", "time_axis", "domain"), CONSTANT_LENGTH_CASES)
def test_restore_fuses_constant_lengths(dims, batch_axis, time_axis, domain, strategy):
    """Constant lengths: with static dims inline folds them into a constant index and
    restore reads them back from it (a batch of length 1 as 0: neither moves an element;
    beyond T as T), fused as a Constant; with a symbolic dim the index computes from
    their values, and restore proves it with those values and keeps them."""
    lens = np.array([6, 0, 1, 3, 9, -1][: dims[batch_axis]], np.int64)
    model = reverse_sequence_model(
        dims, FLOAT, batch_axis=batch_axis, time_axis=time_axis, domain=domain, lens=lens
    )
    inlined = revseq.inline(model, strategy=strategy)
    assert "ReverseSequence" not in {n.op_type for n in inlined.graph.node}
    static = all(isinstance(d, int) for d in dims)
    shape = [6 if d == "T" else 2 if d == "F" else d for d in dims]
    clamped = np.clip(lens, 0, shape[time_axis])
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    truth = reverse_sequence(x, clamped, batch_axis=batch_axis, time_axis=time_axis).tobytes()
    for restored in (
        revseq.restore(inlined),
        ir.to_proto(rewriter.rewrite(ir.from_proto(inlined), pattern_rewrite_rules=rules)),
    ):
        onnx.checker.check_model(restored, full_check=True)
        *constant, node = restored.graph.node
        assert node.op_type == "ReverseSequence" and node.output[0] == "y"
        assert (node_attr(node, "batch_axis"), node_attr(node, "time_axis")) == (
            batch_axis,
            time_axis,
        )
        if static:
            assert [c.op_type for c in constant] == ["Constant"]
            assert node.input[1] == constant[0].output[0]
            read = onnx.numpy_helper.to_array(constant[0].attribute[0].t)
            assert read.tolist() == np.where(clamped == 1, 0, clamped).tolist()
        else:
            assert not constant and node.input[1] == "lens"
            assert [i.name for i in restored.graph.initializer] == ["lens"]
        if not domain and (static or (lens <= shape[time_axis]).all()):
            assert run_in_ort(restored, {"x": x})[0].tobytes() == truth


@pytest.mark.parametrize("target", [None, "onnxruntime", "tract"])
@pytest.mark.parametrize("dims", [("T", 2, 1), ("T", 2, 1, 1)])
def test_restore_keeps_the_models_lengths_beside_an_equal_constant(dims, target):
    """Lengths [2, 2] over trailing size-1 axes: the decomposition also writes [2] (the
    axes its Squeeze drops) as an initializer of the main graph. Both prove; the fused
    node reads the model's own lengths and the decomposition's constant goes."""
    lens = np.array([2, 2], np.int64)
    model = reverse_sequence_model(dims, FLOAT, batch_axis=1, time_axis=0, lens=lens)
    restored = revseq.restore(revseq.inline(model, target=target))
    (node,) = restored.graph.node
    assert node.op_type == "ReverseSequence" and node.input[1] == "lens"
    assert [i.name for i in restored.graph.initializer] == ["lens"]


@pytest.mark.parametrize("strategy", FORMS)
@pytest.mark.parametrize("dims", [(1, 1, "T"), (1, 1, 5), (1, "B", "T")])
def test_restore_takes_the_axis_that_reverses_where_size_1_dims_leave_several(dims, strategy):
    """Data [1, 1, T] reversed along T: a reading along its first axis (size 1) agrees
    on every probe, since lengths there are only 0 and 1, but reverses nothing, and its
    node would refuse the lengths the model takes; restore reads the axis of length T."""
    model = reverse_sequence_model(
        list(dims), FLOAT, batch_axis=0, time_axis=2, domain="revseq"
    )
    restored = revseq.restore(revseq.inline(model, strategy=strategy))
    (node,) = restored.graph.node
    assert node.op_type == "ReverseSequence"
    assert node_attr(node, "time_axis") == 2 and node_attr(node, "batch_axis") in (
        0,
        1,
    )


@st.composite
def constant_length_cases(draw: st.DrawFn) -> dict[str, object]:
    rank = draw(st.integers(2, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    if draw(st.booleans()):
        batch_axis, time_axis = draw(st.permutations(range(rank)))[:2]
    else:
        batch_axis, time_axis = draw(st.sampled_from([(1, 0), (0, 1)]))
    time_len = shape[time_axis]
    lens = draw(
        st.lists(
            st.integers(-2, time_len + 2),
            min_size=shape[batch_axis],
            max_size=shape[batch_axis],
        )
    )
    return {
        "shape": shape,
        "batch_axis": batch_axis,
        "time_axis": time_axis,
        "lens": np.array(lens, np.int64),
        "symbolic_time": draw(st.booleans()),
        "strategy": draw(st.sampled_from(revseq.STRATEGIES)),
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constant_length_cases())
def test_restore_fuses_random_constant_lengths(case):
    """Whatever the shape, axes, lengths (invalid ones too) and form: an inlined constant
    length reversal restores to one ReverseSequence that computes what the inlined model
    does, and reads the model's own lengths where a symbolic dim kept them."""
    shape, lens = case["shape"], case["lens"]
    batch_axis, time_axis = case["batch_axis"], case["time_axis"]
    dims = list(shape)
    if case["symbolic_time"]:
        dims[time_axis] = "T"
    domain = "" if {batch_axis, time_axis} == {0, 1} else "revseq"
    model = reverse_sequence_model(
        dims, FLOAT, batch_axis=batch_axis, time_axis=time_axis, domain=domain, lens=lens
    )
    inlined = revseq.inline(model, strategy=case["strategy"])
    if not any(n.op_type.startswith("Gather") for n in inlined.graph.node):
        return  # simplified: an identity or a flip, nothing to restore
    restored = revseq.restore(inlined)
    fused = [n for n in restored.graph.node if n.op_type == "ReverseSequence"]
    clamped = np.clip(lens, 0, shape[time_axis])
    # At the probes' sizes of a symbolic T; an identity is left as it is, and a flip
    # inline wrote (reverse_all, at rank 4 and more) is fused with full lengths.
    reverses = (lens if case["symbolic_time"] else clamped).max() >= 2
    if not reverses:
        assert not fused
        return
    assert len(fused) == 1 and len(restored.graph.node) <= 2, restored.graph.node
    node = fused[0]
    # Where every sequence has the same length, any axis of the lengths' size reads as
    # the batch (the lengths read back then have its size); the time axis is one.
    fused_batch, fused_time = (
        node_attr(node, "batch_axis"),
        node_attr(node, "time_axis"),
    )
    assert fused_time == time_axis
    assert fused_batch == batch_axis or (clamped == clamped[0]).all()
    if case["symbolic_time"]:
        assert node.input[1] == "lens"
        read = lens
    else:
        constant = next(n for n in restored.graph.node if n.output[0] == node.input[1])
        read = onnx.numpy_helper.to_array(constant.attribute[0].t)
    run_shape = list(shape)
    if case["symbolic_time"]:
        run_shape[time_axis] = max(shape[time_axis], int(lens.max()))
    x = np.random.default_rng(0).standard_normal(run_shape).astype(np.float32)
    clamped = np.clip(lens, 0, run_shape[time_axis])
    truth = reverse_sequence(x, clamped, batch_axis=batch_axis, time_axis=time_axis)
    assert (
        reverse_sequence(
            x,
            np.clip(read, 0, run_shape[time_axis]),
            batch_axis=fused_batch,
            time_axis=time_axis,
        ).tobytes()
        == truth.tobytes()
    )
    assert run_in_ort(inlined, {"x": x})[0].tobytes() == truth.tobytes()
    if not domain and (lens >= 0).all():
        assert run_in_ort(restored, {"x": x})[0].tobytes() == truth.tobytes()


def _constant_gather(index):
    """x[4, 3] gathered along axis 0 by a constant index."""
    graph = oh.make_graph(
        [
            oh.make_node("Constant", [], ["i"], value=onnx.numpy_helper.from_array(
                np.array(index, np.int64))),
            oh.make_node("Gather", ["x", "i"], ["y"], name="g", axis=0),
        ],
        "g",
        [oh.make_tensor_value_info("x", FLOAT, [4, 3])],
        [oh.make_tensor_value_info("y", FLOAT, [len(index), 3])],
    )  # fmt: skip
    return ir.from_proto(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))


@pytest.mark.parametrize(
    ("index", "reason"),
    [
        ([3, 2, 1, 0], "a flip, not a ReverseSequence"),
        ([0, 1, 2, 3], "an identity, not a reversal"),
        ([1, 0, 3, 2], "not a reversal of the data's sequences"),
        ([2, 1, 0], "the result is not shaped as the data"),
    ],
)
def test_constant_gathers_that_are_no_reversal_stay_unfused(index, reason):
    """A flip (simplify's Slice) and an identity need no ReverseSequence; a permutation
    that reverses no sequence prefix is none, nor is a gather of another shape."""
    model = _constant_gather(index)
    result = RestoreReverseSequencePass()(model)
    assert not result.modified
    assert [n.op_type for n in model.graph] == ["Constant", "Gather"]
    assert any(reason in r for (_, _, r) in result.reasons), result.reasons


@pytest.mark.parametrize("elem", [onnx.TensorProto.STRING, onnx.TensorProto.BOOL, INT64])
def test_restore_other_types_and_int32_lengths(elem):
    model = one_node(("T", "B", 3), 1, 0, elem=elem)
    assert sig_of(revseq.restore(revseq.inline(model))) == sig_of(model)
    generalised = one_node((4, 3, 2), 1, 2, domain="revseq", lens_type=onnx.TensorProto.INT32)
    restored = revseq.restore(revseq.inline(generalised))
    assert sig_of(restored) == [("main", "revseq", 1, 2)]
    assert restored.graph.node[0].input[1] == "lens"


@pytest.mark.parametrize("strategy", FORMS)
def test_restore_after_optimizer_and_shape_inference(strategy):
    for dims in ((6, 2, 3), ("T", "B", 3)):
        model = one_node(dims, 1, 0)
        inlined = ir.from_proto(revseq.inline(model, strategy=strategy))
        onnxscript.optimizer.optimize(inlined)
        proto = onnx.shape_inference.infer_shapes(ir.to_proto(inlined), data_prop=True)
        # Constants folded into initializers, as exporters leave static shapes.
        folded = ir.from_proto(proto)
        ir.passes.common.LiftConstantsToInitializersPass(size_limit=0)(folded)
        restored = revseq.restore(folded)
        # The optimizer removes the Identity after the op itself.
        ops = [n.op_type for n in restored.graph]
        assert ops == ["ReverseSequence"], (dims, ops)


def test_restore_keeps_scopes_of_the_sample_models():
    for name in ("control_flow.onnx", "bidirectional_rnn.onnx", "batch_major.onnx"):
        model = onnx.load(MODELS / name)
        restored = revseq.restore(revseq.inline(model))
        assert sig_of(restored) == sig_of(model), name
        report = revseq.check(model, restored, trials=2)
        assert report.ok, report


def test_restore_keeps_values_used_elsewhere():
    model = ir.from_proto(revseq.inline(one_node(("T", "B", 3), 1, 0), strategy="gather_nd"))
    where = next(n for n in model.graph if n.op_type == "Where")
    extra = where.outputs[0]
    extra.name = "source_index"
    model.graph.outputs.append(extra)
    RestoreReverseSequencePass()(model)
    ops = [n.op_type for n in model.graph]
    assert "ReverseSequence" in ops
    assert "Where" in ops  # still computes the extra output
    assert "GatherND" not in ops


def test_modified_is_honest():
    model = ir.from_proto(one_node(("T", "B", 3), 1, 0))
    assert not RestoreReverseSequencePass()(model).modified
    inlined = ir.from_proto(revseq.inline(one_node(("T", "B", 3), 1, 0)))
    assert RestoreReverseSequencePass()(inlined).modified
