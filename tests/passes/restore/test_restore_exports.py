"""Restore on what exporters and rewriters write: torch's exports and their near misses,
the rule set, every scope, full reversals.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest
from onnxscript import rewriter
from onnxscript.rewriter import RewriteRuleSet
from restore_cases import (
    FIXTURES,
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
from revseq.ops.reference import reverse_sequence_model
from revseq.passes import RestoreReverseSequencePass
from revseq.passes.restore.rules import rules

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
    assert (node_attr(node, "batch_axis"), node_attr(node, "time_axis")) == (
        1 - time_axis,
        time_axis,
    )
    rng = np.random.default_rng(1)
    feeds, shapes = random_feeds(model, rng)
    time_len = shapes["x"][time_axis]
    lengths = rng.integers(0, time_len, shapes["lengths"], endpoint=True)
    lengths[0] = time_len
    feeds["lengths"] = lengths.astype(np.int64)
    assert run_in_ort(restored, feeds)[0].tobytes() == run_in_ort(model, feeds)[0].tobytes()


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
    inlined = ir.from_proto(revseq.inline(one_node(("T", "B", 3), 1, 0)))
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
    assert sig_of(restored) == sig_of(model)
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
    assert (node_attr(fused[0], "batch_axis"), node_attr(fused[0], "time_axis")) == (
        1,
        0,
    )
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
