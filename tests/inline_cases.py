"""One-node and scoped models, and their data, that the inline tests share."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh

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


def value(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def scoped_model(scope: str) -> onnx.ModelProto:
    """ReverseSequence in an If branch, a Loop body, a Scan body, If-in-Loop, a function."""
    rs = oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs")
    dims = ["T", "B", 3]
    functions, initializers, nodes = [], [], []
    if scope == "if":
        then = oh.make_graph([rs], "then", [], [value("r")])
        other = oh.make_graph([oh.make_node("Neg", ["x"], ["r"])], "else", [], [value("r")])
        nodes = [oh.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)]
    elif scope in ("loop", "if_in_loop"):
        inner = oh.make_node("ReverseSequence", ["carried", "lens"], ["r"], name="rs")
        if scope == "if_in_loop":
            then = oh.make_graph([inner], "then", [], [value("r")])
            other = oh.make_graph(
                [oh.make_node("Identity", ["carried"], ["r"])], "else", [], [value("r")]
            )
            inner = oh.make_node("If", ["flag"], ["r"], then_branch=then, else_branch=other)
        body = oh.make_graph(
            [oh.make_node("Identity", ["c_in"], ["c_out"]), inner],
            "body",
            [value("i", TP.INT64, []), value("c_in", TP.BOOL, []), value("carried")],
            [value("c_out", TP.BOOL, []), value("r")],
        )
        initializers = [oh.make_tensor("trips", TP.INT64, [], [3])]
        nodes = [oh.make_node("Loop", ["trips", "", "x"], ["y"], body=body)]
    elif scope == "scan":
        # Scan over a leading axis of size 2: each slice [T, B, 3] is reversed.
        inner = oh.make_node("ReverseSequence", ["slice", "lens"], ["r"], name="rs")
        body = oh.make_graph(
            [inner], "body", [value("slice", TP.FLOAT, dims)], [value("r", TP.FLOAT, dims)]
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
            value("x", TP.FLOAT, dims),
            value("lens", TP.INT64, ["B"]),
            value("flag", TP.BOOL, []),
        ],
        [value("y", TP.FLOAT, dims)],
        initializers,
    )
    imports = [oh.make_opsetid("", 17)] + ([oh.make_opsetid("local", 1)] if functions else [])
    return oh.make_model(graph, opset_imports=imports, functions=functions, ir_version=8)
