"""The source index as one Gather of a constant table (``ops/forms/_index.py``).

With a static T the index of each length is known before the model runs: a table of
T+1 rows, one per clamped length, gathered by the lengths. Exporters leave the batch
dim symbolic and the time dim static (Keras' ``[None, 9, 3]``), so the table serves a
symbolic batch too, where a target clamps in one Clip; the batch's own offsets (the
row form's) are then counted at run time.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_identical, run_ort

import revseq
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.targets import TARGETS

FLOAT = onnx.TensorProto.FLOAT
T = 9

# (dims, batch_axis, time_axis): time- and batch-major, ranks 2 to 4.
LAYOUTS = [
    ([T, "B"], 1, 0),
    (["B", T], 0, 1),
    ([T, "B", 4], 1, 0),
    (["B", T, 4], 0, 1),
    (["B", T, 2, 3], 0, 1),
    ([T, "B", 2, 3], 1, 0),
]
LAYOUT_IDS = ["[T,B]", "[B,T]", "[T,B,4]", "[B,T,4]", "[B,T,2,3]", "[T,B,2,3]"]


def _model(dims, batch_axis, time_axis, *, exported: bool) -> onnx.ModelProto:
    """The node as written by hand (int64 lengths of the data's batch dim), or as an
    exporter writes it: int32 lengths with a dim of their own (the revseq domain)."""
    return reverse_sequence_model(
        dims,
        FLOAT,
        batch_axis=batch_axis,
        time_axis=time_axis,
        domain="revseq" if exported else "",
        lens_elem=onnx.TensorProto.INT32 if exported else onnx.TensorProto.INT64,
        lens_dim="N" if exported else ...,
        opset=18,
        ir_version=9,
        name="table",
    )


def _tables(model: onnx.ModelProto) -> list[tuple[int, ...]]:
    """The shapes of the constants a Gather reads as its data (its lookup tables)."""
    constants = {t.name: tuple(t.dims) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute[0].name == "value":
            constants[node.output[0]] = tuple(node.attribute[0].t.dims)
    return [
        constants[n.input[0]]
        for n in model.graph.node
        if n.op_type == "Gather" and n.input[0] in constants
    ]


def _feeds(dims, batch_axis, batch: int, lens_type) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch)
    shape = tuple(batch if d == "B" else d for d in dims)
    x = rng.standard_normal(shape).astype(np.float32)
    wanted = [T, 0, 1, 4, -3, T + 5, 2**31 - 1, -(2**31)]  # valid, then invalid
    return {"x": x, "lens": np.array((wanted * batch)[:batch], lens_type)}


@pytest.mark.parametrize("exported", [False, True], ids=["int64", "exported"])
@pytest.mark.parametrize(("dims", "batch_axis", "time_axis"), LAYOUTS, ids=LAYOUT_IDS)
def test_a_symbolic_batch_with_a_static_time_is_exact_for_every_target(
    dims, batch_axis, time_axis, exported
):
    """Every target that writes the node: exact in onnxruntime, optimised or not, on
    lengths 0, 1, T and invalid ones (clamped to [0, T] as everywhere), at batches of
    8, 1 and 0."""
    model = _model(dims, batch_axis, time_axis, exported=exported)
    lens_type = np.int32 if exported else np.int64
    written = 0
    for target in [None, *sorted(TARGETS)]:
        if target is not None and TARGETS[target].domain is not None:
            continue  # exact on finite data only, its lengths given as float32
        try:
            inlined = revseq.inline(model, target=target)
        except revseq.StrategyError:
            continue
        written += 1
        for batch in (8, 1, 0):
            feeds = _feeds(dims, batch_axis, batch, lens_type)
            clamped = np.clip(feeds["lens"].astype(np.int64), 0, T)
            want = reverse_sequence(
                feeds["x"], clamped, batch_axis=batch_axis, time_axis=time_axis
            )
            for optimize in (False, True):
                got = run_ort(inlined, feeds, optimize=optimize)[0]
                assert_identical(got, want)
    assert written >= 12


@pytest.mark.parametrize(("dims", "batch_axis", "time_axis"), LAYOUTS, ids=LAYOUT_IDS)
def test_a_target_that_clips_looks_the_index_up_at_a_symbolic_batch(
    dims, batch_axis, time_axis
):
    """onnxruntime's target: one Clip and one Gather of the [T+1, T] table, no Range
    over the time steps and no select."""
    inlined = revseq.inline(
        _model(dims, batch_axis, time_axis, exported=False), target="onnxruntime"
    )
    ops = [n.op_type for n in inlined.graph.node if n.op_type != "Constant"]
    assert (T + 1, T) in _tables(inlined), ops
    assert "Where" not in ops and "Less" not in ops, ops
    assert ops.count("Clip") == 1, ops


def test_a_target_clamping_by_two_selects_keeps_the_arithmetic_at_a_symbolic_batch():
    """An NPU's target clamps by Less and Where: the table would need the lengths clamped
    at 0 too (two more nodes than the arithmetic), so it is not taken."""
    assert "Clip" not in (TARGETS["rknn"].allowed(dynamic=True) or ())
    inlined = revseq.inline(_model([T, "B", 4], 1, 0, exported=False), target="rknn")
    assert (T + 1, T) not in _tables(inlined)


def test_the_exported_shape_takes_fewer_nodes_than_with_a_symbolic_time():
    """The same node with T symbolic computes its index by arithmetic: the table writes
    fewer nodes for each target that takes it."""
    for target in ("onnxruntime", "openvino", "tract", None):
        static_time = revseq.inline(_model(["B", T, 4], 0, 1, exported=True), target=target)
        symbolic = revseq.inline(_model(["B", "T", 4], 0, 1, exported=True), target=target)
        count = [
            sum(n.op_type != "Constant" for n in m.graph.node) for m in (static_time, symbolic)
        ]
        assert count[0] < count[1], (target, count)


@pytest.mark.parametrize("batch", [1, "B"])
def test_a_batch_of_one_or_a_symbolic_one_adds_no_constant_offsets(batch):
    """The row form's offsets: none to add for a static batch of one; counted at run
    time (one Add of the batch's steps) for a symbolic one."""
    model = reverse_sequence_model(
        [batch, T, 4], FLOAT, batch_axis=0, time_axis=1, opset=18, ir_version=9, name="one"
    )
    inlined = revseq.inline(model, strategy="gather_rows", target="onnxruntime")
    ops = [n.op_type for n in inlined.graph.node if n.op_type != "Constant"]
    assert ops.count("Add") == (0 if batch == 1 else 1), ops
    assert (T + 1, T) in _tables(inlined)
    x = np.random.default_rng(0).standard_normal((1, T, 4)).astype(np.float32)
    lens = np.array([4])
    want = reverse_sequence(x, lens, batch_axis=0, time_axis=1)
    assert_identical(run_ort(inlined, {"x": x, "lens": lens}, optimize=False)[0], want)


@pytest.mark.parametrize("static_batch", [True, False], ids=["[3,9,4]", "[B,9,4]"])
def test_int32_lengths_index_the_table_as_they_are_where_gather_takes_int32(static_batch):
    """tf2onnx's int32 lengths, clamped in int32: not widened to int64 for the table's
    Gather where the target's Gather takes an int32 index (the default's and WebGPU's)."""
    dims = [3 if static_batch else "B", T, 4]
    model = _model(dims, 0, 1, exported=True)
    for target in (None, "webgpu"):
        assert "Gather:int32" in revseq.TARGETS[target or "portable"].dynamic_ops
        inlined = onnx.shape_inference.infer_shapes(revseq.inline(model, target=target))
        types = {v.name: v.type.tensor_type.elem_type for v in inlined.graph.value_info}
        tables = {t.name for t in inlined.graph.initializer} | {
            n.output[0] for n in inlined.graph.node if n.op_type == "Constant"
        }
        lookups = [
            n for n in inlined.graph.node if n.op_type == "Gather" and n.input[0] in tables
        ]
        assert [types[n.input[1]] for n in lookups] == [onnx.TensorProto.INT32], target


@pytest.mark.parametrize("exported", [False, True], ids=["int64", "exported"])
def test_time_major_rows_at_a_symbolic_batch_meet_the_batch_s_steps_without_an_unsqueeze(
    exported,
):
    """The table's [B, T] rows transposed first: the batch's steps, a vector, then
    broadcast along the last axis of [T, B] as they are."""
    model = _model([T, "B", 4], 1, 0, exported=exported)
    for target in ("onnxruntime", "openvino", None):
        inlined = revseq.inline(model, strategy="gather_rows", target=target)
        ops = [n.op_type for n in inlined.graph.node if n.op_type != "Constant"]
        assert (T + 1, T) in _tables(inlined), (target, ops)
        assert "Unsqueeze" not in ops and ops.count("Transpose") == 1, (target, ops)
