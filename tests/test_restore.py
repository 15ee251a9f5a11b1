"""The restore pass: decompositions fused back into ReverseSequence, and only those."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import onnxruntime as ort
import onnxscript.optimizer
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnxscript import rewriter
from onnxscript.rewriter import RewriteRuleSet

import revseq
from revseq.models import FOLDER as MODELS
from revseq.ops import reverse_sequence
from revseq.ops.reference import reverse_sequence_model
from revseq.passes import RestoreReverseSequencePass
from revseq.passes.graph.scopes import walk
from revseq.passes.restore.rules import rules

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
FLOAT = onnx.TensorProto.FLOAT
INT64 = onnx.TensorProto.INT64
FORMS = ("gather_elements", "gather_nd", "gather_rows")


def _one_node(dims, batch_axis, time_axis, *, elem=FLOAT, domain="", lens_type=INT64):
    node = oh.make_node(
        "ReverseSequence",
        ["x", "lens"],
        ["y"],
        name="rs",
        domain=domain,
        batch_axis=batch_axis,
        time_axis=time_axis,
    )
    graph = oh.make_graph(
        [node, oh.make_node("Identity", ["y"], ["z"], name="after")],
        "g",
        [
            oh.make_tensor_value_info("x", elem, dims),
            oh.make_tensor_value_info("lens", lens_type, [dims[batch_axis]]),
        ],
        [oh.make_tensor_value_info("z", elem, dims)],
    )
    imports = [oh.make_opsetid("", 17)] + ([oh.make_opsetid("revseq", 1)] if domain else [])
    return oh.make_model(graph, opset_imports=imports)


def _signature(model: onnx.ModelProto) -> list[tuple[str, str, int, int]]:
    """(scope, domain, batch_axis, time_axis) of each ReverseSequence, axes normalised."""
    found = []
    for scoped in walk(ir.from_proto(model)):
        node = scoped.node
        if node.op_type != "ReverseSequence":
            continue
        rank = len(node.inputs[0].shape) if node.inputs[0].shape is not None else None
        b = node.attributes.get_int("batch_axis", 1)
        t = node.attributes.get_int("time_axis", 0)
        if rank is not None:
            b, t = b % rank, t % rank
        found.append((scoped.scope, node.domain, b, t))
    return sorted(found)


def _feeds(model: onnx.ModelProto, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Inputs with symbolic dims set to 4, 3, 5, ... and valid lengths for 'lens'."""
    sizes = iter([4, 3, 5, 2, 6, 7])
    symbols: dict[str, int] = {}
    shapes = {}
    for info in model.graph.input:
        dims = []
        for d in info.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                dims.append(d.dim_value)
            else:
                dims.append(symbols.setdefault(d.dim_param, next(sizes)))
        shapes[info.name] = tuple(dims)
    feeds = {}
    for info in model.graph.input:
        elem = info.type.tensor_type.elem_type
        shape = shapes[info.name]
        if info.name in ("lens", "lengths"):
            continue
        np_type = oh.tensor_dtype_to_np_dtype(elem)
        if elem == onnx.TensorProto.BOOL:
            feeds[info.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[info.name] = rng.standard_normal(shape).astype(np_type)
    return feeds, shapes


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


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
    model = _one_node(dims, batch_axis, time_axis, domain=domain)
    inlined = revseq.inline(model, strategy=strategy, as_function=as_function)
    restored = revseq.restore(inlined)
    onnx.checker.check_model(restored, full_check=True)
    assert _signature(restored) == _signature(model)
    assert [n.op_type for n in restored.graph.node] == ["ReverseSequence", "Identity"]
    assert restored.graph.node[0].name == "rs"
    assert not restored.functions
    rng = np.random.default_rng(0)
    feeds, shapes = _feeds(model, rng)
    time_len = shapes["x"][time_axis]
    lens = rng.integers(0, time_len, shapes["lens"], endpoint=True)
    lens[0] = time_len
    feeds["lens"] = lens.astype(np.int64)
    got = _run(restored, feeds)[0] if not domain else None
    expected = reverse_sequence(feeds["x"], lens, batch_axis=batch_axis, time_axis=time_axis)
    if got is not None:
        assert got.tobytes() == expected.tobytes()
    assert _run(inlined, feeds)[0].tobytes() == expected.tobytes()


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
        assert (_attr(node, "batch_axis"), _attr(node, "time_axis")) == (batch_axis, time_axis)
        if static:
            assert [c.op_type for c in constant] == ["Constant"]
            assert node.input[1] == constant[0].output[0]
            read = onnx.numpy_helper.to_array(constant[0].attribute[0].t)
            assert read.tolist() == np.where(clamped == 1, 0, clamped).tolist()
        else:
            assert not constant and node.input[1] == "lens"
            assert [i.name for i in restored.graph.initializer] == ["lens"]
        if not domain and (static or (lens <= shape[time_axis]).all()):
            assert _run(restored, {"x": x})[0].tobytes() == truth


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
    assert _attr(node, "time_axis") == 2 and _attr(node, "batch_axis") in (0, 1)


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
    fused_batch, fused_time = _attr(node, "batch_axis"), _attr(node, "time_axis")
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
    assert _run(inlined, {"x": x})[0].tobytes() == truth.tobytes()
    if not domain and (lens >= 0).all():
        assert _run(restored, {"x": x})[0].tobytes() == truth.tobytes()


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
    model = _one_node(("T", "B", 3), 1, 0, elem=elem)
    assert _signature(revseq.restore(revseq.inline(model))) == _signature(model)
    generalised = _one_node((4, 3, 2), 1, 2, domain="revseq", lens_type=onnx.TensorProto.INT32)
    restored = revseq.restore(revseq.inline(generalised))
    assert _signature(restored) == [("main", "revseq", 1, 2)]
    assert restored.graph.node[0].input[1] == "lens"


@pytest.mark.parametrize("strategy", FORMS)
def test_restore_after_optimizer_and_shape_inference(strategy):
    for dims in ((6, 2, 3), ("T", "B", 3)):
        model = _one_node(dims, 1, 0)
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
        assert _signature(restored) == _signature(model), name
        report = revseq.check(model, restored, trials=2)
        assert report.ok, report


def test_restore_keeps_values_used_elsewhere():
    model = ir.from_proto(revseq.inline(_one_node(("T", "B", 3), 1, 0), strategy="gather_nd"))
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
    model = ir.from_proto(_one_node(("T", "B", 3), 1, 0))
    assert not RestoreReverseSequencePass()(model).modified
    inlined = ir.from_proto(revseq.inline(_one_node(("T", "B", 3), 1, 0)))
    assert RestoreReverseSequencePass()(inlined).modified


TORCH_FIXTURES = sorted(
    p.name for p in FIXTURES.glob("torch_*.onnx") if "nearmiss" not in p.name
)
NEAR_MISSES = {
    "torch_nearmiss_off_by_one.onnx": "probe",
    "torch_nearmiss_less_equal.onnx": "probe",
    "torch_nearmiss_range_from_1.onnx": "probe",
    "torch_nearmiss_wrong_gather_axis.onnx": "probe",
    "torch_nearmiss_wrong_lengths_axis.onnx": "differs from ReverseSequence",
}


def test_fixture_set_is_complete():
    assert len(TORCH_FIXTURES) == 24  # 2 exporters x 2 layouts x 3 ranks x static/dynamic
    assert sorted(NEAR_MISSES) == sorted(p.name for p in FIXTURES.glob("torch_nearmiss_*"))


@pytest.mark.parametrize("name", TORCH_FIXTURES)
def test_torch_exports_restore_to_one_node(name):
    model = onnx.load(FIXTURES / name)
    restored = revseq.restore(model)
    onnx.checker.check_model(restored, full_check=True)
    assert [n.op_type for n in restored.graph.node] == ["ReverseSequence"], name
    time_axis = 0 if "_time_" in name else 1
    node = restored.graph.node[0]
    assert (_attr(node, "batch_axis"), _attr(node, "time_axis")) == (1 - time_axis, time_axis)
    rng = np.random.default_rng(1)
    feeds, shapes = _feeds(model, rng)
    time_len = shapes["x"][time_axis]
    lengths = rng.integers(0, time_len, shapes["lengths"], endpoint=True)
    lengths[0] = time_len
    feeds["lengths"] = lengths.astype(np.int64)
    assert _run(restored, feeds)[0].tobytes() == _run(model, feeds)[0].tobytes()


def _attr(node: onnx.NodeProto, name: str) -> int:
    return next(a.i for a in node.attribute if a.name == name)


@pytest.mark.parametrize(("name", "reason"), sorted(NEAR_MISSES.items()))
def test_near_misses_stay_unfused_with_a_reason(name, reason):
    model = ir.load(FIXTURES / name)
    before = [n.op_type for n in model.graph]
    result = RestoreReverseSequencePass()(model)
    assert not result.modified
    assert [n.op_type for n in model.graph] == before
    gather_reasons = [r for (_, _, r) in result.reasons]
    assert any(reason in r for r in gather_reasons), gather_reasons


def test_rule_set_fuses_and_traces_near_misses():
    assert isinstance(rules, RewriteRuleSet)
    inlined = ir.from_proto(revseq.inline(_one_node(("T", "B", 3), 1, 0)))
    fused = rewriter.rewrite(inlined, pattern_rewrite_rules=rules)
    assert [n.op_type for n in fused.graph] == ["ReverseSequence", "Identity"]

    tracer = rewriter.MatchingTracer()
    near_miss = ir.load(FIXTURES / "torch_nearmiss_wrong_lengths_axis.onnx")
    count = rules.apply_to_model(near_miss, tracer=tracer)
    assert count == 0
    reasons = [
        str(match.match_result.reason)
        for matches in tracer.best_matches_map.values()
        for match in matches
    ]
    assert any("differs from ReverseSequence" in r for r in reasons), reasons


def test_torch_live_export_restores():
    torch = pytest.importorskip("torch")
    import sys

    sys.path.insert(0, str(FIXTURES))
    from make_torch_fixtures import ReversePadded, export

    path = FIXTURES.parent / ".torch_live.onnx"
    try:
        export(ReversePadded(1, "expand"), 3, 1, dynamo=True, dynamic=True, path=path)
        restored = revseq.restore(str(path))
    finally:
        path.unlink(missing_ok=True)
        sys.path.remove(str(FIXTURES))
    assert [n.op_type for n in restored.graph.node] == ["ReverseSequence"]
    assert torch is not None


def _rich_model() -> onnx.ModelProto:
    """Metadata, doc strings, value_info, several domains, a function and subgraphs."""
    then = oh.make_graph(
        [oh.make_node("ReverseSequence", ["x", "lens"], ["t"], name="rs_then")],
        "then",
        [],
        [oh.make_tensor_value_info("t", FLOAT, None)],
    )
    other = oh.make_graph(
        [oh.make_node("Identity", ["x"], ["t"], name="keep")],
        "else",
        [],
        [oh.make_tensor_value_info("t", FLOAT, None)],
    )
    function = oh.make_function(
        "local",
        "Rev",
        ["a", "l"],
        ["o"],
        [oh.make_node("ReverseSequence", ["a", "l"], ["o"], name="rs_fn")],
        opset_imports=[oh.make_opsetid("", 17)],
    )
    nodes = [
        oh.make_node("Mul", ["x", "w"], ["scaled"], name="scale", doc_string="scale"),
        oh.make_node(
            "ReverseSequence",
            ["scaled", "lens"],
            ["r"],
            name="rs_main",
            batch_axis=0,
            time_axis=1,
        ),
        oh.make_node(
            "If", ["flag"], ["branch"], then_branch=then, else_branch=other, name="branch"
        ),
        oh.make_node("Rev", ["r", "lens2"], ["f"], domain="local", name="call"),
        oh.make_node("Add", ["f", "branch"], ["y"], name="sum"),
    ]
    graph = oh.make_graph(
        nodes,
        "rich",
        [
            oh.make_tensor_value_info("x", FLOAT, ["B", "B", 3]),
            oh.make_tensor_value_info("lens", INT64, ["B"]),
            oh.make_tensor_value_info("lens2", INT64, ["B"]),
            oh.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["B", "B", 3])],
        [oh.make_tensor("w", FLOAT, [3], [1.0, 2.0, 3.0])],
        doc_string="graph doc",
        value_info=[oh.make_tensor_value_info("scaled", FLOAT, ["B", "B", 3])],
    )
    model = oh.make_model(
        graph,
        opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("local", 1)],
        functions=[function],
        producer_name="tests",
        doc_string="model doc",
    )
    oh.set_model_props(model, {"owner": "revseq"})
    return model


def test_round_trip_keeps_everything_and_restores_every_scope():
    model = _rich_model()
    onnx.checker.check_model(model, full_check=True)
    restored = revseq.restore(revseq.inline(model))
    onnx.checker.check_model(restored, full_check=True)
    assert _signature(restored) == _signature(model)
    assert {p.key: p.value for p in restored.metadata_props} == {"owner": "revseq"}
    assert (restored.producer_name, restored.doc_string) == ("tests", "model doc")
    assert restored.graph.doc_string == "graph doc"
    assert {o.domain: o.version for o in restored.opset_import} == {"": 17, "local": 1}
    assert [f.name for f in restored.functions] == ["Rev"]
    assert [t.name for t in restored.graph.initializer] == ["w"]
    assert [(n.name, n.op_type) for n in restored.graph.node] == [
        (n.name, n.op_type) for n in model.graph.node
    ]
    assert "scaled" in [v.name for v in restored.graph.value_info]
    report = revseq.check(model, restored, trials=2)
    assert report.ok, report


def test_the_rule_set_keeps_no_state_of_the_models_it_rewrote():
    """The rules are module-level: what they learn about one graph is dropped after it."""
    import gc
    import weakref

    graphs = []
    for name in ("batch_major.onnx", "opset10.onnx"):
        model = ir.from_proto(revseq.inline(ir.to_proto(ir.load(MODELS / name))))
        model = rewriter.rewrite(model, pattern_rewrite_rules=rules)
        assert "ReverseSequence" in [n.op_type for n in model.graph]
        graphs.append(weakref.ref(model.graph))
        del model
    gc.collect()
    instances = [rule.graph_post_visitor.__self__ for rule in rules.rules]
    assert all(i._matcher is None and i._match is None for i in instances)
    # onnxscript's own matcher would keep the last graph it looked at: ours forgets it.
    assert all(graph() is None for graph in graphs)


@pytest.mark.parametrize("target", [None, "onnxruntime"])
@pytest.mark.parametrize(
    "dims", [[5, 4, 3], [5, 4, 3, 2], ["T", "B", 3], ["T", "B", "d2", "d3"]]
)
def test_a_full_reversal_inline_wrote_comes_back_with_full_lengths(dims, target):
    """A Slice step -1 (onnxruntime's target) or reverse_all's Gather (the default at
    rank 4 and more or with symbolic dims) comes back as one ReverseSequence whose
    lengths are T for every batch entry; also through the onnxscript rule set."""
    model = reverse_sequence_model(dims, FLOAT, lens=np.full(4, 5, np.int64))
    if not isinstance(dims[0], int):  # lengths read from the shape, as tf.reverse
        model = _lengths_from_shape(model)
    inlined = revseq.inline(model, target=target)
    assert not [n for n in inlined.graph.node if n.op_type == "ReverseSequence"]
    restored = revseq.restore(inlined)
    fused = [n for n in restored.graph.node if n.op_type == "ReverseSequence"]
    assert len(fused) == 1 and fused[0].name == "rs"
    assert (_attr(fused[0], "batch_axis"), _attr(fused[0], "time_axis")) == (1, 0)
    onnx.checker.check_model(restored, full_check=True)
    assert revseq.check(model, restored, trials=2).ok
    ruled = rewriter.rewrite(ir.from_proto(inlined), pattern_rewrite_rules=rules)
    if not any(
        n.op_type == "Slice" for n in inlined.graph.node
    ):  # the rules anchor on gathers
        assert [n.op_type for n in ruled.graph].count("ReverseSequence") == 1


def _lengths_from_shape(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its lengths ``Expand(Shape(x)[0:1], Shape(x)[1:2])``."""
    graph = model.graph
    del graph.initializer[:]
    graph.node.insert(0, oh.make_node("Shape", ["x"], ["t"], start=0, end=1))
    graph.node.insert(1, oh.make_node("Shape", ["x"], ["b"], start=1, end=2))
    graph.node.insert(2, oh.make_node("Expand", ["t", "b"], ["lens"]))
    return model


def test_a_flip_inline_did_not_write_is_left_alone():
    """torch.flip exports a step -1 Slice, and a Gather by a flipped index flips too: a
    flip needs no ReverseSequence, so restore fuses only the flips inline wrote."""
    model = reverse_sequence_model([5, 4, 3], FLOAT, lens=np.full(4, 5, np.int64))
    graph = model.graph
    del graph.initializer[:]
    graph.node[0].CopyFrom(
        oh.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="flip")
    )
    for name, value in {"s": -1, "e": np.iinfo(np.int64).min, "a": 0, "st": -1}.items():
        graph.initializer.append(onnx.numpy_helper.from_array(np.array([value]), name))
    graph.node.append(oh.make_node("Identity", ["y"], ["y2"]))
    restored = revseq.restore(model)
    assert [n.op_type for n in restored.graph.node] == ["Slice", "Identity"]
    flipped = reverse_sequence_model([5, 4, 3], FLOAT, lens=np.full(4, 5, np.int64))
    flipped.graph.node[0].CopyFrom(oh.make_node("Gather", ["x", "i"], ["y"], name="g"))
    flipped.graph.initializer[0].CopyFrom(
        onnx.numpy_helper.from_array(np.arange(4, -1, -1, dtype=np.int64), "i")
    )
    result = RestoreReverseSequencePass()(ir.from_proto(flipped))
    assert not result.modified
    assert "a flip" in result.reasons[0][2]


@pytest.mark.parametrize(("start", "end"), [(-2, None), (-1, 0)])
def test_a_slice_of_part_of_the_axis_is_no_full_reversal(start, end):
    """Inline's Slice with its bounds changed (the last step dropped, the first one
    kept) reverses part of the axis only: restore fuses no ReverseSequence there."""
    model = reverse_sequence_model([5, 4, 3], FLOAT, lens=np.full(4, 5, np.int64))
    inlined = revseq.inline(model, target="onnxruntime")
    (flip,) = [n for n in inlined.graph.node if n.op_type == "Slice"]
    bounds = {t.name: t for t in inlined.graph.initializer}
    for name, value in ((flip.input[1], start), (flip.input[2], end)):
        if value is not None:
            bounds[name].CopyFrom(onnx.numpy_helper.from_array(np.array([value]), name))
    del inlined.graph.output[0].type.tensor_type.shape.dim[:]  # no longer [5, 4, 3]
    restored = revseq.restore(inlined)
    assert "ReverseSequence" not in [n.op_type for n in restored.graph.node]


def test_the_rule_set_keeps_no_model_it_rewrote_alive():
    """The module-level rules hold no graph once a rewrite is done: onnxscript's matcher
    keeps the last graph it matched in, which would keep a whole model alive."""
    import gc
    import weakref

    model = ir.from_proto(revseq.inline(onnx.load(MODELS / "batch_major.onnx")))
    rewriter.rewrite(model, pattern_rewrite_rules=rules)
    graph = weakref.ref(model.graph)
    del model
    gc.collect()
    assert graph() is None
