"""The inline pass against the native op: every type, rank, layout, shape kind, scope.

Outputs are compared bit for bit (``tobytes()``; strings by value): the inlined model
against the native ReverseSequence in onnxruntime with graph optimisations off and on,
and against the numpy reference. onnxruntime has no complex types and its Python API
takes no bfloat16 arrays: those run in onnx's ReferenceEvaluator. What inlining keeps
and refuses: ``test_inline_output.py``; each target's output: ``test_inline_targets.py``.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import all_op_types, assert_identical, run_ort, run_reference
from inline_cases import TP, TYPES, data, lengths, one_node_model, scoped_model
from onnx.backend.test.case.node import collect_testcases

import revseq
from revseq.ops import reverse_sequence

REFERENCE_ONLY = {"complex64", "complex128", "bfloat16"}
STRATEGIES = [s for s in revseq.STRATEGIES]
LAYOUTS = [(1, 0), (0, 1), None]  # None: attributes omitted (defaults 1, 0)


def all_nodes(model: onnx.ModelProto) -> list[str]:
    return all_op_types(model)


def verify(model: onnx.ModelProto, strategy: str, feeds: dict, expected: np.ndarray) -> None:
    """Inline, check the model, and compare with the native op and the reference."""
    elem = model.graph.output[0].type.tensor_type.elem_type
    name = next(k for k, v in TYPES.items() if v == elem)
    inlined = revseq.inline(model, strategy=strategy)  # the default refuses no valid node
    onnx.checker.check_model(inlined, full_check=True)
    assert "ReverseSequence" not in all_nodes(inlined)
    if name in REFERENCE_ONLY:
        assert_identical(run_reference(inlined, feeds)[0], expected)
        if name != "bfloat16" and model.graph.node[-1].domain == "":
            assert_identical(run_reference(model, feeds)[0], expected)
        return
    for optimize in (False, True):
        got = run_ort(inlined, feeds, optimize=optimize)[0]
        assert_identical(got, expected)
        if model.graph.node[-1].domain == "":
            assert_identical(run_ort(model, feeds, optimize=optimize)[0], expected)


def _case(type_name, shape, layout, dims, strategy, seed=0, **kw):
    rng = np.random.default_rng(seed)
    batch_axis, time_axis = layout or (1, 0)
    x = data(rng, type_name, shape)
    lens = lengths(rng, shape[batch_axis], shape[time_axis])
    model = one_node_model(type_name, dims, layout, rank=len(shape), **kw)
    feeds = {"x": x, "lens": lens}
    if dims is None:
        feeds = {"x_flat": x.reshape(-1), "shape": np.array(shape), "lens": lens}
    expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    verify(model, strategy, feeds, expected)


# --- ONNX's own test cases -------------------------------------------------------------


@pytest.mark.parametrize("case", collect_testcases("ReverseSequence"), ids=lambda c: c.name)
def test_onnx_backend_cases(case):
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    names = [i.name for i in model.graph.input]
    feeds = dict(zip(names, inputs, strict=True))
    if "bfloat16" in case.name:
        # ReverseSequence-28 is the first with bfloat16: keep opset 28, run the reference.
        inlined = revseq.inline(model)
        assert_identical(run_reference(inlined, feeds)[0], outputs[0])
        return
    model.opset_import[0].version = 17
    model.ir_version = 8
    inlined = revseq.inline(model)
    for optimize in (False, True):
        assert_identical(run_ort(inlined, feeds, optimize=optimize)[0], outputs[0])
        assert_identical(run_ort(model, feeds, optimize=optimize)[0], outputs[0])


def test_spec_examples_and_zero_length():
    x = np.array(
        [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]], dtype=np.float32
    )
    expected = np.array(
        [[3, 6, 9, 12], [2, 5, 8, 13], [1, 4, 10, 14], [0, 7, 11, 15]], dtype=np.float32
    )
    model = one_node_model("float32", [4, 4], (1, 0))
    verify(model, "auto", {"x": x, "lens": np.array([4, 3, 2, 1])}, expected)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    expected = np.array(
        [[0, 1, 2, 3], [5, 4, 6, 7], [10, 9, 8, 11], [15, 14, 13, 12]], dtype=np.float32
    )
    model = one_node_model("float32", [4, 4], (0, 1))
    verify(model, "auto", {"x": x, "lens": np.array([1, 2, 3, 4])}, expected)
    # Length 0 is "reverse nothing", like length 1.
    verify(
        model,
        "auto",
        {"x": x, "lens": np.array([0, 0, 4, 1])},
        reverse_sequence(x, np.array([0, 0, 4, 1]), batch_axis=0, time_axis=1),
    )


# --- The exactness matrix --------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=["time_major", "batch_major", "defaults"])
@pytest.mark.parametrize("type_name", sorted(TYPES))
def test_every_type(type_name, layout, strategy):
    batch_axis, time_axis = layout or (1, 0)
    shape = [0, 0, 3]
    shape[time_axis], shape[batch_axis] = 5, 4
    for dims in (list(shape), ["d0", "d1", "d2"]):
        _case(type_name, tuple(shape), layout, dims, strategy, opset=17)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("shape_kind", ["static", "symbolic", "unknown_rank"])
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
@pytest.mark.parametrize("type_name", ["float32", "string", "bool", "complex64", "int8"])
def test_every_rank_and_shape_kind(type_name, rank, shape_kind, strategy):
    for layout in ((1, 0), (0, 1)):
        shape = tuple([4, 3, 2, 3, 2][:rank])
        if layout == (0, 1):
            shape = (3, 4, *shape[2:])
        dims = {
            "static": list(shape),
            "symbolic": [f"d{i}" for i in range(rank)],
            "unknown_rank": None,
        }[shape_kind]
        _case(type_name, shape, layout, dims, strategy, seed=rank)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    "shape", [(0, 3, 2), (4, 0, 2), (4, 3, 0), (0, 0, 0)], ids=lambda s: "x".join(map(str, s))
)
def test_empty_tensors(shape, strategy):
    for dims in (list(shape), ["a", "b", "c"]):
        _case("float32", shape, (1, 0), dims, strategy)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("lens_type", [TP.INT64, TP.INT32], ids=["int64", "int32"])
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
def test_generalised_op_any_axes(rank, lens_type, strategy):
    rng = np.random.default_rng(rank)
    shape = tuple(int(d) for d in rng.integers(2, 5, rank))
    for batch_axis in range(-rank, rank):
        for time_axis in range(-rank, rank):
            if batch_axis % rank == time_axis % rank:
                continue
            x = data(rng, "float32", shape)
            lens = lengths(rng, shape[batch_axis], shape[time_axis])
            lens = lens.astype(oh.tensor_dtype_to_np_dtype(lens_type))
            model = one_node_model(
                "float32",
                list(shape),
                (batch_axis, time_axis),
                domain="revseq",
                lens_type=lens_type,
            )
            expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
            verify(model, strategy, {"x": x, "lens": lens}, expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_invalid_lengths_are_clamped(strategy):
    rng = np.random.default_rng(3)
    x = data(rng, "float32", (5, 4, 2))
    lens = np.array([-3, 7, 99, -1], dtype=np.int64)
    inlined = revseq.inline(
        one_node_model("float32", ["T", "B", 2], (1, 0)), strategy=strategy
    )
    expected = reverse_sequence(x, lens, batch_axis=1, time_axis=0)
    np.testing.assert_array_equal(expected[:, 2], x[::-1, 2])  # 99 -> everything
    np.testing.assert_array_equal(expected[:, 0], x[:, 0])  # -3 -> nothing
    for optimize in (False, True):
        assert_identical(
            run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)[0], expected
        )


@pytest.mark.parametrize("target", [None, "webgpu", "onnxruntime"])
@pytest.mark.parametrize("dims", [[5, 4, 2], ["T", "B", 2]], ids=["static", "symbolic"])
def test_lengths_beyond_int32_are_clamped_before_any_narrowing(dims, target):
    """Targets whose index is int32 (webgpu, and so the default) narrow the lengths: a
    64-bit length must be clamped first, or -2^32+3 would wrap to 3 and 2^32+1 to 1."""
    rng = np.random.default_rng(4)
    x = data(rng, "float32", (5, 4, 2))
    lens = np.array([-(2**32) + 3, 2**32 + 1, -(2**40), 2**40], dtype=np.int64)
    inlined = revseq.inline(one_node_model("float32", dims, (1, 0)), target=target)
    expected = reverse_sequence(x, lens, batch_axis=1, time_axis=0)
    assert_identical(run_ort(inlined, {"x": x, "lens": lens}, optimize=False)[0], expected)


# --- Scopes ----------------------------------------------------------------------------


@pytest.mark.parametrize("as_function", [False, True], ids=["nodes", "as_function"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("scope", ["if", "loop", "scan", "if_in_loop", "function"])
def test_scopes(scope, strategy, as_function):
    model = scoped_model(scope)
    onnx.checker.check_model(model, full_check=True)
    assert "ReverseSequence" in all_nodes(model)
    inlined = revseq.inline(model, strategy=strategy, as_function=as_function)
    onnx.checker.check_model(inlined, full_check=True)
    assert "ReverseSequence" not in all_nodes(inlined)
    rng = np.random.default_rng(0)
    x = data(rng, "float32", (5, 4, 3))
    feeds = {"x": x, "lens": lengths(rng, 4, 5), "flag": np.array(True)}
    for optimize in (False, True):
        expected = run_ort(model, feeds, optimize=optimize)[0]
        assert_identical(run_ort(inlined, feeds, optimize=optimize)[0], expected)


@pytest.mark.parametrize("scope", ["main", "if", "loop", "function", "as_function"])
def test_constants_are_initializers_of_the_main_graph_only(scope):
    """onnx2torch calls a module for every Constant node: the main graph's constants are
    initializers, one per value however many nodes read it. A body or a function has
    no initializers every backend reads: its constants stay Constant nodes."""
    if scope == "main":
        model = one_node_model("float32", ["T", "B", 3], (1, 0), opset=17)
    else:
        model = scoped_model("function" if scope == "as_function" else scope)
    inlined = revseq.inline(model, as_function=scope == "as_function")
    main_constants = [n for n in inlined.graph.node if n.op_type == "Constant"]
    emitted = [t for t in inlined.graph.initializer if t.name.startswith("rs/")]
    assert not main_constants
    if scope == "main":
        assert emitted
        values = [(t.data_type, tuple(t.dims), t.raw_data) for t in emitted]
        assert len(set(values)) == len(values)
    else:
        assert not emitted
        assert "Constant" in all_nodes(inlined)


def test_constants_stay_nodes_where_initializers_are_inputs():
    """Before IR version 4 every initializer is also a graph input, one a caller may
    feed: a decomposition's constants stay Constant nodes there."""
    model = one_node_model("float32", ["T", "B", 3], (1, 0), opset=17)
    model.ir_version = 3
    inlined = revseq.inline(model)
    assert not inlined.graph.initializer
    assert "Constant" in [n.op_type for n in inlined.graph.node]
