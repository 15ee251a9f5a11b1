"""Property-based tests: random models with ReverseSequence anywhere, inlined, bit-exact.

Each example draws an element type, a rank and shape, axes (ONNX domain or the
generalised ``revseq`` domain), lengths (valid and invalid), static, symbolic or mixed
dims, an opset, a strategy, and where the node sits: the main graph, an If branch, a
Loop body or a model-local function. The inlined model's output, in onnxruntime with
optimisations off and on, must equal the numpy reference bit for bit, and so must the
native op wherever onnxruntime runs it (onnx's ReferenceEvaluator runs the types
onnxruntime lacks).

Profiles: the default runs 300 examples; ``HYPOTHESIS_PROFILE=long`` runs 5000.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import all_op_types, assert_identical, run_ort, run_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import revseq
from revseq.ops import reverse_sequence

settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TYPES = {
    "bool": (np.bool_, onnx.TensorProto.BOOL),
    "int8": (np.int8, onnx.TensorProto.INT8),
    "int16": (np.int16, onnx.TensorProto.INT16),
    "int32": (np.int32, onnx.TensorProto.INT32),
    "int64": (np.int64, onnx.TensorProto.INT64),
    "uint8": (np.uint8, onnx.TensorProto.UINT8),
    "uint16": (np.uint16, onnx.TensorProto.UINT16),
    "uint32": (np.uint32, onnx.TensorProto.UINT32),
    "uint64": (np.uint64, onnx.TensorProto.UINT64),
    "float16": (np.float16, onnx.TensorProto.FLOAT16),
    "float32": (np.float32, onnx.TensorProto.FLOAT),
    "float64": (np.float64, onnx.TensorProto.DOUBLE),
    "complex64": (np.complex64, onnx.TensorProto.COMPLEX64),
    "complex128": (np.complex128, onnx.TensorProto.COMPLEX128),
    "string": (np.object_, onnx.TensorProto.STRING),
    "bfloat16": (ml_dtypes.bfloat16, onnx.TensorProto.BFLOAT16),
}
# onnxruntime registers no complex kernels at all, and its Python API takes no bfloat16
# arrays: these run in onnx's ReferenceEvaluator.
REFERENCE_ONLY = {"complex64", "complex128", "bfloat16"}
SCOPES = ("main", "if", "loop", "function")
OPSETS = (10, 11, 12, 13, 14, 17, 21)


def _data(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    np_type = TYPES[name][0]
    if name == "string":
        words = np.array(["", "a", "bc", "déf", "ghij", "🙂"], dtype=object)
        return rng.choice(words, size=shape).astype(object)
    if name == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if name.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_type)
    if name.startswith(("float", "bfloat")):
        values = rng.standard_normal(shape).astype(np.float32)
        flat = values.reshape(-1)
        if flat.size:
            flat[rng.integers(0, flat.size)] = np.nan
            flat[rng.integers(0, flat.size)] = -0.0
        return values.astype(np_type)
    info = np.iinfo(np_type)
    return rng.integers(info.min, info.max, shape, dtype=np_type, endpoint=True)


def _wrap(node: onnx.NodeProto, scope: str, opset: int, out_info):
    """A graph whose output is ``node``'s result, with the node placed in ``scope``."""
    if scope == "main":
        return [node], [], []
    if scope == "function":
        call = oh.make_node("Reverse", ["x", "lens"], ["y"], domain="local")
        function = oh.make_function(
            "local",
            "Reverse",
            ["x", "lens"],
            ["y"],
            [node],
            opset_imports=[oh.make_opsetid("", opset), oh.make_opsetid("revseq", 1)],
        )
        return [call], [function], []
    # Inside a subgraph the node writes "y_inner", so no name shadows the outer output.
    node.output[0] = "y_inner"
    body_out = oh.make_tensor_value_info("y_inner", out_info.type.tensor_type.elem_type, None)
    if scope == "if":
        branch = oh.make_graph([node], "then", [], [body_out])
        other = oh.make_graph(
            [oh.make_node("Identity", ["x"], ["y_inner"])], "else", [], [body_out]
        )
        cond = oh.make_tensor("cond", onnx.TensorProto.BOOL, [], [True])
        return (
            [oh.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=other)],
            [],
            [cond],
        )
    # A one-iteration Loop whose body reverses the outer-scope input into a carried value.
    body = oh.make_graph(
        [node, oh.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [
            oh.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
            oh.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
            oh.make_tensor_value_info("carried", out_info.type.tensor_type.elem_type, None),
        ],
        [oh.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []), body_out],
    )
    trips = oh.make_tensor("trips", onnx.TensorProto.INT64, [], [1])
    return [oh.make_node("Loop", ["trips", "", "x"], ["y"], body=body)], [], [trips]


@st.composite
def cases(draw: st.DrawFn) -> dict[str, object]:
    type_name = draw(st.sampled_from(sorted(TYPES)))
    rank = draw(st.integers(2, 5))
    # onnx's ReferenceEvaluator cannot Flatten or Reshape empty arrays (it reshapes with
    # -1): types that only it can run get no zero-sized dimension.
    smallest = 1 if type_name in REFERENCE_ONLY else 0
    shape = tuple(draw(st.lists(st.integers(smallest, 5), min_size=rank, max_size=rank)))
    generalised = draw(st.booleans())
    if generalised:
        axes = draw(st.permutations(range(rank)))[:2]
        batch_axis = axes[0] - draw(st.sampled_from([0, rank]))
        time_axis = axes[1] - draw(st.sampled_from([0, rank]))
        lens_type = draw(st.sampled_from([onnx.TensorProto.INT64, onnx.TensorProto.INT32]))
    else:
        batch_axis, time_axis = draw(st.sampled_from([(1, 0), (0, 1)]))
        lens_type = onnx.TensorProto.INT64
    # onnx's ReferenceEvaluator returns a Loop's carried value unchanged when the body
    # reads an outer-scope input (onnx 1.23): reference-only types skip Loop bodies.
    scope = draw(
        st.sampled_from(
            [s for s in SCOPES if s != "loop"] if type_name in REFERENCE_ONLY else SCOPES
        )
    )
    omit_axes = not generalised and (batch_axis, time_axis) == (1, 0) and draw(st.booleans())
    return {
        "type": type_name,
        "shape": shape,
        "batch_axis": batch_axis,
        "time_axis": time_axis,
        "domain": "revseq" if generalised else "",
        "lens_type": lens_type,
        "omit_axes": omit_axes,
        # The symbolic axes: none, all, or some (an exporter's [None, 9, 3]).
        "symbolic": draw(
            st.one_of(
                st.just(()),
                st.just(tuple(range(rank))),
                st.sets(st.sampled_from(range(rank))).map(lambda s: tuple(sorted(s))),
            )
        ),
        "scope": scope,
        "strategy": draw(st.sampled_from(revseq.STRATEGIES)),
        # Opset 10 models are converted to 11 first; functions are not converted.
        # bfloat16 reaches Gather* at opset 13 and If/Loop at opset 16.
        "opset": draw(
            st.sampled_from(
                [o for o in OPSETS if (o > 10 or scope != "function")]
                if type_name != "bfloat16"
                else [o for o in OPSETS if o >= 16]
            )
        ),
        "invalid_lengths": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


def _model(case: dict[str, object]) -> onnx.ModelProto:
    shape = case["shape"]
    dims = [f"d{i}" if i in case["symbolic"] else d for i, d in enumerate(shape)]
    elem = TYPES[case["type"]][1]
    batch = dims[case["batch_axis"]]
    attributes = {}
    if not case["omit_axes"]:
        attributes = {"batch_axis": case["batch_axis"], "time_axis": case["time_axis"]}
    node = oh.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], domain=case["domain"], name="rs", **attributes
    )
    data_info = oh.make_tensor_value_info("x", elem, dims)
    lens_info = oh.make_tensor_value_info("lens", case["lens_type"], [batch])
    out_info = oh.make_tensor_value_info("y", elem, dims)
    nodes, functions, initializers = _wrap(node, case["scope"], case["opset"], out_info)
    graph = oh.make_graph(nodes, "fuzz", [data_info, lens_info], [out_info], initializers)
    opsets = [oh.make_opsetid("", case["opset"]), oh.make_opsetid("revseq", 1)]
    if functions:
        opsets.append(oh.make_opsetid("local", 1))
    ir_version = max(oh.find_min_ir_version_for(opsets[:1]), 8 if functions else 3)
    return oh.make_model(
        graph, opset_imports=opsets, functions=functions, ir_version=ir_version
    )


def _run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], type_name: str, *, optimize: bool
) -> np.ndarray:
    if type_name in REFERENCE_ONLY:
        return run_reference(model, feeds)[0]
    return run_ort(model, feeds, optimize=optimize)[0]


def _native_runs(case: dict[str, object]) -> bool:
    """Whether the native op can be the oracle: ONNX domain, a type and opset ORT runs,
    valid lengths (ORT CPU rejects the others), and no zero-sized static dims inside a
    function (see below)."""
    return (
        case["domain"] == ""
        and case["type"] not in REFERENCE_ONLY
        and not case["invalid_lengths"]
        and case["opset"] >= 10
    )


@settings(settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci")))
@given(cases())
def test_inlined_random_models_are_bit_exact(case: dict[str, object]) -> None:
    model = _model(case)
    if case["scope"] == "function" and min(case["batch_axis"], case["time_axis"]) < 0:
        # Values inside functions carry no shapes: negative axes cannot be placed.
        with pytest.raises(revseq.UnsupportedOpsetError, match="negative axes"):
            revseq.inline(model, strategy=case["strategy"])
        return
    try:
        inlined = revseq.inline(model, strategy=case["strategy"])
    except revseq.StrategyError as e:
        # The default refuses no valid node. The row form asked for by name needs opset
        # 14 where a dim may be 0 at run time (Reshape's allowzero); every other form
        # runs from opset 11 (10 is upgraded).
        assert case["strategy"] == "gather_rows" and case["opset"] < 14, e
        assert "opset >= 14" in str(e)
        return
    onnx.checker.check_model(inlined, full_check=True)
    static = [d for i, d in enumerate(case["shape"]) if i not in case["symbolic"]]
    if case["scope"] == "function" and 0 in static:
        # onnxruntime bugs with static zero-sized dims, met only once it has inlined the
        # function (values inside functions carry no shapes for revseq to see): it
        # infers Expand([0,0,1] -> [0,0,0]) as [0,0,1] and then drops the Expand, and
        # GatherND refuses zero-sized batch dims. Outside functions revseq replaces
        # statically empty nodes by Identity and never meets either.
        return
    assert not any(op == "ReverseSequence" for op in all_op_types(inlined))

    rng = np.random.default_rng(case["seed"])
    shape = case["shape"]
    x = _data(rng, case["type"], shape)
    time_len = shape[case["time_axis"]]
    low, high = (-3, time_len + 3) if case["invalid_lengths"] else (0, time_len)
    lens = rng.integers(low, high, shape[case["batch_axis"]], endpoint=True)
    if lens.size and not case["invalid_lengths"]:
        lens[0] = time_len
    lens = lens.astype(onnx.helper.tensor_dtype_to_np_dtype(case["lens_type"]))
    expected = reverse_sequence(
        x, lens, batch_axis=case["batch_axis"], time_axis=case["time_axis"]
    )
    feeds = {"x": x, "lens": lens}
    for optimize in (False, True):
        assert_identical(_run(inlined, feeds, case["type"], optimize=optimize), expected)
        if _native_runs(case):
            native = _run(model, feeds, case["type"], optimize=optimize)
            assert_identical(native, expected)
        if case["type"] in REFERENCE_ONLY:
            break  # one engine, no optimisation levels


@pytest.mark.parametrize("scope", SCOPES)
def test_every_scope_is_reached(scope: str) -> None:
    case = {
        "type": "float32",
        "shape": (4, 3, 2),
        "batch_axis": 1,
        "time_axis": 0,
        "domain": "",
        "lens_type": onnx.TensorProto.INT64,
        "omit_axes": False,
        "symbolic": (0, 1, 2),
        "scope": scope,
        "strategy": "auto",
        "invalid_lengths": False,
        "seed": 0,
        "opset": 17,
    }
    model = _model(case)
    assert any(op == "ReverseSequence" for op in all_op_types(model))
    inlined = revseq.inline(model)
    assert not any(op == "ReverseSequence" for op in all_op_types(inlined))
