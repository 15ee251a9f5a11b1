"""The inline pass against the native op: every type, rank, layout, shape kind, scope.

Outputs are compared bit for bit (``tobytes()``; strings by value): the inlined model
against the native ReverseSequence in onnxruntime with graph optimisations off and on,
and against the numpy reference. onnxruntime has no complex types and its Python API
takes no bfloat16 arrays: those run in onnx's ReferenceEvaluator.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest
from helpers import all_op_types, assert_identical, run_ort, run_reference
from onnx.backend.test.case.node import collect_testcases

import revseq
from revseq.ops import reverse_sequence
from revseq.ops.reference import reference_evaluator, reverse_sequence_model

TP = onnx.TensorProto
TYPES = {
    "bool": TP.BOOL,
    "int8": TP.INT8,
    "int16": TP.INT16,
    "int32": TP.INT32,
    "int64": TP.INT64,
    "uint8": TP.UINT8,
    "uint16": TP.UINT16,
    "uint32": TP.UINT32,
    "uint64": TP.UINT64,
    "float16": TP.FLOAT16,
    "float32": TP.FLOAT,
    "float64": TP.DOUBLE,
    "complex64": TP.COMPLEX64,
    "complex128": TP.COMPLEX128,
    "string": TP.STRING,
    "bfloat16": TP.BFLOAT16,
}
REFERENCE_ONLY = {"complex64", "complex128", "bfloat16"}
STRATEGIES = [s for s in revseq.STRATEGIES]
LAYOUTS = [(1, 0), (0, 1), None]  # None: attributes omitted (defaults 1, 0)


def data(rng: np.random.Generator, type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random data of a type, with NaN payloads, -0.0 and extremes where they exist."""
    elem = TYPES[type_name]
    if type_name == "string":
        return rng.choice(np.array(["", "a", "bc", "🙂", "déf"], dtype=object), size=shape)
    if type_name == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if type_name.startswith("complex"):
        np_type = oh.tensor_dtype_to_np_dtype(elem)
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_type)
    if type_name == "bfloat16":
        return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    np_type = oh.tensor_dtype_to_np_dtype(elem)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        return rng.integers(info.min, info.max, shape, dtype=np_type, endpoint=True)
    values = rng.standard_normal(shape).astype(np_type)
    flat = values.reshape(-1)
    if flat.size >= 3:
        bits = flat.view(np.dtype(f"u{flat.itemsize}"))
        bits[0] = {2: 0x7E01, 4: 0x7FC00123, 8: 0x7FF8000000000123}[flat.itemsize]
        flat[1] = -0.0
        flat[2] = np.inf
    return values


def lengths(rng: np.random.Generator, batch: int, time: int) -> np.ndarray:
    """Lengths in [0, T] that contain 0, 1 and T whenever the batch is large enough."""
    values = rng.integers(0, time, batch, endpoint=True)
    for i, v in enumerate((0, 1, time)[:batch]):
        values[i] = min(v, time)
    return values.astype(np.int64)


def one_node_model(
    type_name: str,
    dims: list[int | str] | None,
    layout: tuple[int, int] | None,
    *,
    opset: int = 17,
    domain: str = "",
    lens_type: int = TP.INT64,
    rank: int | None = None,
) -> onnx.ModelProto:
    """``y = ReverseSequence(x, lens)``; ``dims=None`` hides the rank behind a Reshape."""
    elem = TYPES[type_name]
    attrs = {} if layout is None else {"batch_axis": layout[0], "time_axis": layout[1]}
    batch_axis = 1 if layout is None else layout[0]
    nodes, inputs = [], []
    if dims is None:
        assert rank is not None
        nodes.append(oh.make_node("Reshape", ["x_flat", "shape"], ["x"], name="hide_rank"))
        inputs += [
            oh.make_tensor_value_info("x_flat", elem, ["n"]),
            oh.make_tensor_value_info("shape", TP.INT64, [rank]),
        ]
        batch = "B"
    else:
        inputs.append(oh.make_tensor_value_info("x", elem, dims))
        batch = dims[batch_axis] if -len(dims) <= batch_axis < len(dims) else "B"
    inputs.append(oh.make_tensor_value_info("lens", lens_type, [batch]))
    nodes.append(
        oh.make_node(
            "ReverseSequence", ["x", "lens"], ["y"], name="rs", domain=domain, **attrs
        )
    )
    out_dims = dims if dims is not None else [f"o{i}" for i in range(rank)]
    graph = oh.make_graph(nodes, "g", inputs, [oh.make_tensor_value_info("y", elem, out_dims)])
    imports = [oh.make_opsetid("", opset)] + ([oh.make_opsetid(domain, 1)] if domain else [])
    return oh.make_model(graph, opset_imports=imports, ir_version=8 if opset < 21 else 10)


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


def _value(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def _scoped_model(scope: str) -> onnx.ModelProto:
    """ReverseSequence in an If branch, a Loop body, a Scan body, If-in-Loop, a function."""
    rs = oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs")
    dims = ["T", "B", 3]
    functions, initializers, nodes = [], [], []
    if scope == "if":
        then = oh.make_graph([rs], "then", [], [_value("r")])
        other = oh.make_graph([oh.make_node("Neg", ["x"], ["r"])], "else", [], [_value("r")])
        nodes = [oh.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)]
    elif scope in ("loop", "if_in_loop"):
        inner = oh.make_node("ReverseSequence", ["carried", "lens"], ["r"], name="rs")
        if scope == "if_in_loop":
            then = oh.make_graph([inner], "then", [], [_value("r")])
            other = oh.make_graph(
                [oh.make_node("Identity", ["carried"], ["r"])], "else", [], [_value("r")]
            )
            inner = oh.make_node("If", ["flag"], ["r"], then_branch=then, else_branch=other)
        body = oh.make_graph(
            [oh.make_node("Identity", ["c_in"], ["c_out"]), inner],
            "body",
            [_value("i", TP.INT64, []), _value("c_in", TP.BOOL, []), _value("carried")],
            [_value("c_out", TP.BOOL, []), _value("r")],
        )
        initializers = [oh.make_tensor("trips", TP.INT64, [], [3])]
        nodes = [oh.make_node("Loop", ["trips", "", "x"], ["y"], body=body)]
    elif scope == "scan":
        # Scan over a leading axis of size 2: each slice [T, B, 3] is reversed.
        inner = oh.make_node("ReverseSequence", ["slice", "lens"], ["r"], name="rs")
        body = oh.make_graph(
            [inner], "body", [_value("slice", TP.FLOAT, dims)], [_value("r", TP.FLOAT, dims)]
        )
        nodes = [
            oh.make_node("Unsqueeze", ["x", "axes0"], ["stacked"]),
            oh.make_node("Concat", ["stacked", "stacked"], ["pair"], axis=0),
            oh.make_node("Scan", ["pair"], ["scanned"], body=body, num_scan_inputs=1),
            oh.make_node("ReduceSum", ["scanned", "axes0"], ["y"], keepdims=0),
        ]
        initializers = [oh.make_tensor("axes0", TP.INT64, [1], [0])]
    elif scope == "function":
        functions = [
            oh.make_function(
                "local",
                "Rev",
                ["a", "l"],
                ["out"],
                [oh.make_node("ReverseSequence", ["a", "l"], ["out"], name="rs")],
                opset_imports=[oh.make_opsetid("", 17)],
            )
        ]
        nodes = [oh.make_node("Rev", ["x", "lens"], ["y"], domain="local")]
    graph = oh.make_graph(
        nodes,
        "scoped",
        [
            _value("x", TP.FLOAT, dims),
            _value("lens", TP.INT64, ["B"]),
            _value("flag", TP.BOOL, []),
        ],
        [_value("y", TP.FLOAT, dims)],
        initializers,
    )
    imports = [oh.make_opsetid("", 17)] + ([oh.make_opsetid("local", 1)] if functions else [])
    return oh.make_model(graph, opset_imports=imports, functions=functions, ir_version=8)


@pytest.mark.parametrize("as_function", [False, True], ids=["nodes", "as_function"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("scope", ["if", "loop", "scan", "if_in_loop", "function"])
def test_scopes(scope, strategy, as_function):
    model = _scoped_model(scope)
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
        model = _scoped_model("function" if scope == "as_function" else scope)
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


# --- What inlining keeps ---------------------------------------------------------------


def _rich_model() -> onnx.ModelProto:
    weights = oh.make_tensor("w", TP.FLOAT, [3], [1.0, 2.0, 3.0])
    nodes = [
        oh.make_node("Mul", ["x", "w"], ["scaled"], name="scale", doc_string="scale it"),
        oh.make_node("ReverseSequence", ["scaled", "lens"], ["rev"], name="rs"),
        oh.make_node("Custom", ["rev"], ["y"], name="custom", domain="vendor"),
    ]
    graph = oh.make_graph(
        nodes,
        "rich",
        [_value("x", TP.FLOAT, ["T", "B", 3]), _value("lens", TP.INT64, ["B"])],
        [_value("y", TP.FLOAT, ["T", "B", 3])],
        [weights],
        doc_string="graph doc",
        value_info=[_value("scaled", TP.FLOAT, ["T", "B", 3])],
    )
    model = oh.make_model(
        graph,
        opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("vendor", 3)],
        producer_name="tests",
        producer_version="9",
        doc_string="model doc",
    )
    oh.set_model_props(model, {"owner": "revseq", "license": "apache"})
    return model


def test_inline_keeps_everything_else():
    model = _rich_model()
    before = model.SerializeToString()
    inlined = revseq.inline(model)
    assert model.SerializeToString() == before  # a ModelProto argument is never modified
    assert {p.key: p.value for p in inlined.metadata_props} == {
        "owner": "revseq",
        "license": "apache",
    }
    assert (inlined.producer_name, inlined.producer_version) == ("tests", "9")
    assert inlined.doc_string == "model doc"
    assert inlined.graph.doc_string == "graph doc"
    assert {o.domain: o.version for o in inlined.opset_import} == {"": 17, "vendor": 3}
    # The user's initializer kept as it was, first; the decomposition's constants after.
    names = [t.name for t in inlined.graph.initializer]
    assert names[0] == "w" and all(name.startswith("rs/") for name in names[1:])
    original = next(t for t in model.graph.initializer if t.name == "w")
    assert inlined.graph.initializer[0] == original
    kept = {n.name: n for n in inlined.graph.node if not n.name.startswith("rs/")}
    assert sorted(kept) == ["custom", "scale"]
    assert kept["scale"].doc_string == "scale it"
    assert "scaled" in [v.name for v in inlined.graph.value_info]
    assert [o.name for o in inlined.graph.output] == ["y"]


def test_ir_model_is_rewritten_in_place_and_path_gives_proto(tmp_path):
    model = ir.from_proto(one_node_model("float32", ["T", "B", 2], (1, 0)))
    assert revseq.inline(model) is model
    assert "ReverseSequence" not in [n.op_type for n in model.graph]
    path = tmp_path / "m.onnx"
    onnx.save(one_node_model("float32", ["T", "B", 2], (1, 0)), path)
    assert isinstance(revseq.inline(str(path)), onnx.ModelProto)
    assert isinstance(revseq.inline(path), onnx.ModelProto)


def test_as_function_emits_functions_and_calls():
    model = _scoped_model("if")
    inlined = revseq.inline(model, as_function=True)
    onnx.checker.check_model(inlined, full_check=True)
    assert [f.domain for f in inlined.functions] == ["revseq.inline"]
    assert "revseq.inline" in {o.domain for o in inlined.opset_import}
    rng = np.random.default_rng(0)
    feeds = {
        "x": data(rng, "float32", (5, 4, 3)),
        "lens": lengths(rng, 4, 5),
        "flag": np.array(True),
    }
    assert_identical(
        run_ort(inlined, feeds, optimize=False)[0], run_ort(model, feeds, optimize=False)[0]
    )


def test_revseq_import_dropped_when_unused():
    model = one_node_model("float32", [3, 4, 5], (0, 2), domain="revseq")
    inlined = revseq.inline(model)
    assert "revseq" not in {o.domain for o in inlined.opset_import}


def test_static_shapes_and_constant_lengths_fold_to_one_gather():
    model = one_node_model("float32", [5, 4, 3], (1, 0))
    lens = oh.make_tensor("lens_c", TP.INT64, [4], [5, 2, 0, 3])
    model.graph.initializer.append(lens)
    model.graph.node[0].input[1] = "lens_c"
    del model.graph.input[1]
    for strategy in ("auto", "gather_rows"):
        inlined = revseq.inline(model, strategy=strategy)
        ops = [n.op_type for n in inlined.graph.node]
        assert not {"Range", "Less", "Where"} & set(ops), ops
    inlined = revseq.inline(model, strategy="gather_rows")
    # The view (a Flatten: one dim trails) keeps the trailing dim, so the gather's
    # output has the data's shape.
    assert [op for op in (n.op_type for n in inlined.graph.node) if op != "Constant"] == [
        "Flatten",
        "Gather",
    ]

    # The lengths initializer, folded into the index, does not stay behind unused; the
    # index is an initializer the gather reads.
    read = {name for n in inlined.graph.node for name in n.input}
    assert [t.name for t in inlined.graph.initializer if t.name not in read] == []
    assert "lens_c" not in [t.name for t in inlined.graph.initializer]


def test_constant_lengths_read_elsewhere_stay():
    model = one_node_model("float32", [5, 4, 3], (1, 0))
    model.graph.initializer.append(oh.make_tensor("lens_c", TP.INT64, [4], [5, 2, 0, 3]))
    model.graph.node[0].input[1] = "lens_c"
    del model.graph.input[1]
    model.graph.node.append(oh.make_node("Identity", ["lens_c"], ["lens_out"]))
    model.graph.output.append(oh.make_tensor_value_info("lens_out", TP.INT64, [4]))
    inlined = revseq.inline(model)
    assert [i.name for i in inlined.graph.initializer if not i.name.startswith("rs/")] == [
        "lens_c"
    ]


# --- Opsets ----------------------------------------------------------------------------


def test_opset_10_is_converted_to_11():
    model = one_node_model("float32", ["T", "B", 3], (1, 0), opset=10)
    model.ir_version = 5
    inlined = revseq.inline(model)
    assert {o.domain: o.version for o in inlined.opset_import}[""] == 11
    rng = np.random.default_rng(0)
    x = data(rng, "float32", (5, 4, 3))
    lens = lengths(rng, 4, 5)
    assert_identical(
        run_ort(inlined, {"x": x, "lens": lens}, optimize=False)[0], reverse_sequence(x, lens)
    )


def test_opset_9_reports_the_node():
    model = one_node_model("float32", ["T", "B", 3], (1, 0), opset=9)
    with pytest.raises(
        revseq.UnsupportedOpsetError, match=r"'rs'.*opset 9.*added in opset 10"
    ):
        revseq.inline(model)


# --- Invalid nodes ---------------------------------------------------------------------


def _with(model: onnx.ModelProto, **attrs) -> onnx.ModelProto:
    node = model.graph.node[-1]
    del node.attribute[:]
    node.attribute.extend(oh.make_attribute(k, v) for k, v in attrs.items())
    return model


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: _with(
                one_node_model("float32", [4, 3, 2], None), batch_axis=0, time_axis=0
            ),
            "must differ",
        ),
        (
            lambda: _with(
                one_node_model("float32", [4, 3, 2], None), batch_axis=2, time_axis=0
            ),
            "must each be 0 or 1",
        ),
        (
            lambda: _with(
                one_node_model("float32", [4, 3, 2], None, domain="revseq"),
                batch_axis=3,
                time_axis=0,
            ),
            "out of range for rank 3",
        ),
        (lambda: one_node_model("float32", [4], None), "rank >= 2"),
        (lambda: one_node_model("float32", [4, 3], None, lens_type=TP.INT16), "must be int64"),
    ],
    ids=["equal_axes", "onnx_axis_2", "revseq_axis_range", "rank_1", "int16_onnx"],
)
def test_invalid_nodes_raise_naming_the_node(make, message):
    with pytest.raises(revseq.InvalidNodeError, match=message) as info:
        revseq.inline(make())
    assert "'rs'" in str(info.value)


def test_wrong_input_counts_and_batch_mismatch():
    model = one_node_model("float32", [4, 3, 2], None)
    model.graph.node[-1].input.pop()
    with pytest.raises(revseq.InvalidNodeError, match=r"expects 2 inputs.*got 1"):
        revseq.inline(model)
    model = one_node_model("float32", [4, 3, 2], None)
    model.graph.node[-1].input.append("lens")
    with pytest.raises(revseq.InvalidNodeError, match="got 3"):
        revseq.inline(model)
    model = one_node_model("float32", [4, 3, 2], None)
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 5
    with pytest.raises(revseq.InvalidNodeError, match="5 elements but the batch axis"):
        revseq.inline(model)


def test_unknown_strategy_and_target():
    model = one_node_model("float32", [4, 3, 2], None)
    with pytest.raises(revseq.StrategyError, match="unknown strategy 'fast'"):
        revseq.inline(model, strategy="fast")
    with pytest.raises(revseq.StrategyError, match="unknown target 'tpu'"):
        revseq.inline(model, target="tpu")


# --- Targets ---------------------------------------------------------------------------

# What each profile can take: (static shapes + constant lengths, static + run-time
# lengths, symbolic shapes + run-time lengths). False means StrategyError.
TARGET_EXPECTATIONS = {
    "webgpu": (True, True, True),
    "webnn": (True, True, False),
    "qnn": (True, True, False),
    "coreml": (True, True, True),
    "nnapi": (True, False, False),
}


@pytest.mark.parametrize("target", sorted(TARGET_EXPECTATIONS))
def test_targets_use_only_their_ops(target):
    """The documented profiles (probed ones: test_profiles and test_backends)."""
    expectations = TARGET_EXPECTATIONS[target]
    allowed = revseq.TARGETS[target].static_ops | {"Constant"}
    rng = np.random.default_rng(0)
    x = data(rng, "float32", (5, 4, 3))
    lens = lengths(rng, 4, 5)
    constant = one_node_model("float32", [5, 4, 3], (1, 0))
    constant.graph.initializer.append(oh.make_tensor("lens", TP.INT64, [4], lens.tolist()))
    del constant.graph.input[1]
    variants = [
        (constant, {"x": x}),
        (one_node_model("float32", [5, 4, 3], (1, 0)), {"x": x, "lens": lens}),
        (one_node_model("float32", ["T", "B", 3], (1, 0)), {"x": x, "lens": lens}),
    ]
    for (model, feeds), fits in zip(variants, expectations, strict=True):
        if not fits:
            with pytest.raises(revseq.StrategyError, match=r"target lacks|needs"):
                revseq.inline(model, target=target)
            continue
        inlined = revseq.inline(model, target=target)
        used = {n.op_type for n in inlined.graph.node}
        assert used <= allowed, used - allowed
        assert_identical(run_ort(inlined, feeds, optimize=False)[0], reverse_sequence(x, lens))


@pytest.mark.parametrize(
    ("dims", "batch_axis", "time_axis"),
    [(["T", "B", 3], 1, 0), (["B", "T", 3], 0, 1), (["T", "B"], 1, 0)],
    ids=["time-major", "batch-major", "rank-2"],
)
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_coreml_takes_symbolic_dims_with_its_ops_alone(dims, batch_axis, time_axis, dtype):
    """No Less, Where, Min, Gather or Expand (CoreML's list): lengths clamped against a
    run-time T by Max and Sub, the tuples' batch column broadcast by adding zeros;
    invalid lengths (negative, past T, the type's extremes) clamped as everywhere."""
    model = one_node_model(dtype, dims, (batch_axis, time_axis))
    inlined = revseq.inline(model, target="coreml")
    used = {n.op_type for n in inlined.graph.node}
    assert used <= revseq.TARGETS["coreml"].dynamic_ops | {"Constant"}, used
    assert {"Max", "GatherND"} <= used
    rng = np.random.default_rng(0)
    for steps, batch in ((6, 5), (1, 3), (9, 1)):
        shape = [steps, batch] if time_axis == 0 else [batch, steps]
        x = data(rng, dtype, tuple(shape + dims[2:]))
        extremes = [-5, steps + 3, np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, steps]
        lens = np.array((extremes * batch)[:batch], np.int64)
        want = reverse_sequence(
            x, np.clip(lens, 0, steps), batch_axis=batch_axis, time_axis=time_axis
        )
        for optimize in (False, True):
            got = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)[0]
            assert_identical(got, want)


def test_explicit_op_sets_choose_other_arithmetic():
    model = one_node_model("float32", ["T", "B", 3], (1, 0))
    rng = np.random.default_rng(0)
    x = data(rng, "float32", (5, 4, 3))
    lens = lengths(rng, 4, 5)
    common = {
        "Shape",
        "Squeeze",
        "Gather",
        "Slice",
        "Unsqueeze",
        "Expand",
        "Concat",
        "GatherND",
        "GatherElements",
        "Reshape",
        "Sub",
        "Add",
        "Mul",
        "Min",
        "Max",
        "Cast",
    }
    for allowed, absent in (
        (common | {"Less", "Where", "ConstantOfShape", "CumSum"}, "Range"),
        (common | {"Range"}, "Where"),
    ):
        inlined = revseq.inline(model, target=sorted(allowed))
        used = {n.op_type for n in inlined.graph.node}
        assert absent not in used and used <= allowed | {"Constant"}
        assert_identical(
            run_ort(inlined, {"x": x, "lens": lens}, optimize=True)[0],
            reverse_sequence(x, lens),
        )


def test_a_node_no_form_fits_leaves_the_model_unchanged():
    # The first node has constant lengths (nnapi takes it), the second run-time lengths
    # (nnapi has no form for it): nothing may be rewritten, not even the first.
    nodes = [
        oh.make_node("ReverseSequence", ["x", "fixed"], ["r"], name="fits"),
        oh.make_node("ReverseSequence", ["r", "lens"], ["y"], name="does_not_fit"),
    ]
    graph = oh.make_graph(
        nodes,
        "g",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, [5, 4, 3]),
            oh.make_tensor_value_info("lens", TP.INT64, [4]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, [5, 4, 3])],
        [oh.make_tensor("fixed", TP.INT64, [4], [5, 2, 0, 3])],
    )
    model = ir.from_proto(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
    before = ir.to_proto(model).SerializeToString()
    with pytest.raises(revseq.StrategyError, match="does_not_fit"):
        revseq.inline(model, target="nnapi")
    assert ir.to_proto(model).SerializeToString() == before


@pytest.mark.parametrize("target", [None, "iree", "onnx2torch"])
@pytest.mark.parametrize("kind", ["static", "time+batch", "all"])
@pytest.mark.parametrize(
    ("rank", "trailing"), [(2, ()), (3, (3,)), (4, (1, 2)), (5, (2, 1, 3))]
)
def test_complex_data_runs_in_the_reference_runtime_at_every_rank(
    rank, trailing, kind, target
):
    """onnxruntime has no complex types: onnx.reference runs them, and its GatherElements
    takes at most 64 steps (np.choose's choices), so complex data is gathered otherwise."""
    time_len, batch = 70, 3
    dims: list = [time_len, batch, *trailing]
    declared = list(dims)
    if kind != "static":
        declared[:2] = ["T", "B"]
    if kind == "all":
        declared = [d if isinstance(d, str) else f"d{i}" for i, d in enumerate(declared)]
    for dtype, np_type in (
        (onnx.TensorProto.COMPLEX64, np.complex64),
        (onnx.TensorProto.COMPLEX128, np.complex128),
    ):
        model = reverse_sequence_model(declared, dtype)
        inlined = revseq.inline(model, target=target)
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(np_type)
        lens = np.array([time_len, 0, 2])
        got = reference_evaluator(inlined).run(None, {"x": x, "lens": lens})[0]
        assert_identical(got, reverse_sequence(x, lens))


def test_complex_data_takes_no_gather_elements_the_reference_runtime_cannot_run():
    """Named, GatherElements is refused for complex data along more than 63 steps; the
    matrix form (which onnx.reference gathers row by row) and short axes keep it."""
    long = reverse_sequence_model([70, 3, 2], onnx.TensorProto.COMPLEX64)
    with pytest.raises(revseq.StrategyError, match=r"onnx\.reference"):
        revseq.inline(long, strategy="gather_elements", target="iree")
    short = reverse_sequence_model([60, 3, 2], onnx.TensorProto.COMPLEX64)
    assert "GatherElements" in all_op_types(
        revseq.inline(short, strategy="gather_elements", target="iree")
    )
    matrix = reverse_sequence_model([70, 3], onnx.TensorProto.COMPLEX64)
    assert "GatherElements" in all_op_types(
        revseq.inline(matrix, strategy="gather_elements", target="iree")
    )


def _cast_lengths_model(source_type: int, dims) -> onnx.ModelProto:
    """A ReverseSequence whose int64 lengths are cast from a ``source_type`` input, as
    tf2onnx casts TensorFlow's int32 lengths."""
    model = reverse_sequence_model(dims, onnx.TensorProto.FLOAT, lens_elem=source_type)
    model.graph.node[0].input[1] = "lens_int64"
    cast = oh.make_node("Cast", ["lens"], ["lens_int64"], to=onnx.TensorProto.INT64)
    model.graph.node.insert(0, cast)
    return model


@pytest.mark.parametrize("as_function", [False, True])
@pytest.mark.parametrize("dims", [(5, 4, 3), ("T", "B", 3)])
@pytest.mark.parametrize(
    ("source_type", "target", "reads_source"),
    [
        (onnx.TensorProto.INT32, "webgpu", True),  # its index is int32: nothing int64
        (onnx.TensorProto.INT32, "onnxruntime", False),  # int64 arithmetic: as it is
        (onnx.TensorProto.INT16, "webgpu", False),  # int32 forms take no int16
    ],
)
def test_int32_lengths_cast_to_int64_are_read_as_int32(
    source_type, target, reads_source, dims, as_function
):
    """Where the target computes its index in int32, lengths cast from int32 are read as
    they were (onnxruntime-web would otherwise copy them back to the host for int64
    arithmetic on its CPU); exact either way."""
    model = _cast_lengths_model(source_type, dims)
    inlined = revseq.inline(model, target=target, as_function=as_function)
    onnx.checker.check_model(inlined, full_check=True)
    graph = inlined.graph
    readers = [n for n in graph.node if "lens" in n.input]
    casts = [n for n in graph.node if n.op_type == "Cast" and n.output[0] == "lens_int64"]
    assert bool(casts) != reads_source  # the exporter's Cast goes when nothing reads it
    assert (readers and readers[0].op_type != "Cast") == reads_source
    rng = np.random.default_rng(0)
    for time_len, batch in ((5, 4), (2, 3)) if "T" in dims else ((5, 4),):
        x = rng.standard_normal((time_len, batch, 3)).astype(np.float32)
        np_type = onnx.helper.tensor_dtype_to_np_dtype(source_type)
        lens = np.array([0, 1, time_len, 2][:batch], np_type)
        got = run_ort(inlined, {"x": x, "lens": lens}, optimize=False)[0]
        assert_identical(got, reverse_sequence(x, lens, batch_axis=1, time_axis=0))
