"""Build the bundled sample models: ``python models/build.py [FOLDER]``.

Every model is made from fixed seeds and fixed names, so two runs give identical bytes
(the tests check that the committed files are what this script makes).

- ``bidirectional_rnn.onnx``: the shape tf2onnx exports from a Keras Bidirectional RNN:
  the backward direction reverses the padded sequences, runs the RNN, reverses back.
- ``batch_major.onnx``: ``[batch, time, features]`` data, batch_axis=0, time_axis=1.
- ``control_flow.onnx``: ReverseSequence in an If branch, a Loop body, a local function.
- ``generalized_axes.onnx``: the ``revseq`` domain op, batch_axis=2, time_axis=-1, int32
  lengths (no runtime has a kernel for it: revseq inlines it).
- ``opset10.onnx``: the op at opset 10, where it first appeared.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
PRODUCER = "revseq models/build.py"


def _weights(name: str, shape: tuple[int, ...], seed: int) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def _model(graph: onnx.GraphProto, opsets: dict[str, int], ir_version: int = 8, **kw):
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
        ir_version=ir_version,
        producer_name=PRODUCER,
        producer_version="1",
        **kw,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def bidirectional_rnn() -> onnx.ModelProto:
    features, hidden = 4, 3
    nodes = [
        helper.make_node(
            "RNN",
            ["x", "w_fw", "r_fw", "b_fw"],
            ["y_fw"],
            hidden_size=hidden,
            name="rnn_forward",
        ),
        helper.make_node("Squeeze", ["y_fw", "axis1"], ["h_fw"], name="squeeze_forward"),
        helper.make_node(
            "ReverseSequence",
            ["x", "lengths"],
            ["x_rev"],
            batch_axis=1,
            time_axis=0,
            name="reverse_input",
        ),
        helper.make_node(
            "RNN",
            ["x_rev", "w_bw", "r_bw", "b_bw"],
            ["y_bw"],
            hidden_size=hidden,
            name="rnn_backward",
        ),
        helper.make_node("Squeeze", ["y_bw", "axis1"], ["h_bw_rev"], name="squeeze_backward"),
        helper.make_node(
            "ReverseSequence",
            ["h_bw_rev", "lengths"],
            ["h_bw"],
            batch_axis=1,
            time_axis=0,
            name="reverse_output",
        ),
        helper.make_node("Concat", ["h_fw", "h_bw"], ["outputs"], axis=2, name="concat"),
    ]
    initializers = [
        _weights("w_fw", (1, hidden, features), 1),
        _weights("r_fw", (1, hidden, hidden), 2),
        _weights("b_fw", (1, 2 * hidden), 3),
        _weights("w_bw", (1, hidden, features), 4),
        _weights("r_bw", (1, hidden, hidden), 5),
        _weights("b_bw", (1, 2 * hidden), 6),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
    ]
    graph = helper.make_graph(
        nodes,
        "bidirectional_rnn",
        [
            helper.make_tensor_value_info("x", FLOAT, ["time", "batch", features]),
            helper.make_tensor_value_info("lengths", INT64, ["batch"]),
        ],
        [helper.make_tensor_value_info("outputs", FLOAT, ["time", "batch", 2 * hidden])],
        initializers,
        doc_string="Bidirectional RNN over padded sequences, as tf2onnx exports Keras layers.",
    )
    return _model(graph, {"": 17})


def batch_major() -> onnx.ModelProto:
    features = 8
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["projected"], name="project"),
        helper.make_node("Relu", ["projected"], ["activated"], name="relu"),
        helper.make_node(
            "ReverseSequence",
            ["activated", "lengths"],
            ["reversed"],
            batch_axis=0,
            time_axis=1,
            name="reverse",
        ),
        helper.make_node("Add", ["reversed", "bias"], ["y"], name="bias_add"),
    ]
    graph = helper.make_graph(
        nodes,
        "batch_major",
        [
            helper.make_tensor_value_info("x", FLOAT, ["batch", "time", features]),
            helper.make_tensor_value_info("lengths", INT64, ["batch"]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", "time", features])],
        [_weights("w", (features, features), 7), _weights("bias", (features,), 8)],
    )
    return _model(graph, {"": 17})


def _value(name: str, elem: int = FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _branches() -> tuple[onnx.GraphProto, onnx.GraphProto]:
    """The If's branches: a ReverseSequence of the outer ``x``, and an Identity of it."""
    then_branch = helper.make_graph(
        [helper.make_node("ReverseSequence", ["x", "lengths"], ["then_out"], name="rs_in_if")],
        "then_branch",
        [],
        [_value("then_out")],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["else_out"], name="identity_in_else")],
        "else_branch",
        [],
        [_value("else_out")],
    )
    return then_branch, else_branch


def _loop_body() -> onnx.GraphProto:
    """The Loop's body: the carried value reversed on every trip."""
    return helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            helper.make_node(
                "ReverseSequence", ["carried", "lengths"], ["carried_out"], name="rs_in_loop"
            ),
        ],
        "loop_body",
        [
            _value("iteration", INT64, []),
            _value("cond_in", TensorProto.BOOL, []),
            _value("carried"),
        ],
        [_value("cond_out", TensorProto.BOOL, []), _value("carried_out")],
    )


def _reverse_then_negate() -> onnx.FunctionProto:
    """A model-local function that holds a ReverseSequence."""
    return helper.make_function(
        "local",
        "ReverseThenNegate",
        ["data", "lens"],
        ["result"],
        [
            helper.make_node(
                "ReverseSequence", ["data", "lens"], ["reversed"], name="rs_in_function"
            ),
            helper.make_node("Neg", ["reversed"], ["result"], name="negate"),
        ],
        opset_imports=[helper.make_opsetid("", 17)],
    )


def control_flow() -> onnx.ModelProto:
    then_branch, else_branch = _branches()
    body = _loop_body()
    nodes = [
        helper.make_node(
            "If",
            ["flag"],
            ["if_out"],
            then_branch=then_branch,
            else_branch=else_branch,
            name="branch",
        ),
        helper.make_node("Loop", ["trips", "", "x"], ["loop_out"], body=body, name="loop"),
        helper.make_node(
            "ReverseThenNegate",
            ["x", "lengths"],
            ["function_out"],
            domain="local",
            name="call",
        ),
    ]
    dims = ["time", "batch", 2]
    graph = helper.make_graph(
        nodes,
        "control_flow",
        [
            helper.make_tensor_value_info("x", FLOAT, dims),
            helper.make_tensor_value_info("lengths", INT64, ["batch"]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("if_out", FLOAT, dims),
            helper.make_tensor_value_info("loop_out", FLOAT, dims),
            helper.make_tensor_value_info("function_out", FLOAT, dims),
        ],
        [numpy_helper.from_array(np.array(3, dtype=np.int64), "trips")],
    )
    return _model(graph, {"": 17, "local": 1}, functions=[_reverse_then_negate()])


def generalized_axes() -> onnx.ModelProto:
    node = helper.make_node(
        "ReverseSequence",
        ["x", "lengths"],
        ["y"],
        domain="revseq",
        batch_axis=2,
        time_axis=-1,
        name="reverse_last_axis",
    )
    graph = helper.make_graph(
        [node],
        "generalized_axes",
        [
            helper.make_tensor_value_info("x", FLOAT, [2, 3, 4, 5]),
            helper.make_tensor_value_info("lengths", TensorProto.INT32, [4]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, [2, 3, 4, 5])],
    )
    return _model(graph, {"": 17, "revseq": 1})


def opset10() -> onnx.ModelProto:
    node = helper.make_node("ReverseSequence", ["x", "lengths"], ["y"], name="reverse")
    graph = helper.make_graph(
        [node],
        "opset10",
        [
            helper.make_tensor_value_info("x", FLOAT, ["time", "batch", 3]),
            helper.make_tensor_value_info("lengths", INT64, ["batch"]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, ["time", "batch", 3])],
    )
    return _model(graph, {"": 10}, ir_version=5)


MODELS = {
    "bidirectional_rnn.onnx": bidirectional_rnn,
    "batch_major.onnx": batch_major,
    "control_flow.onnx": control_flow,
    "generalized_axes.onnx": generalized_axes,
    "opset10.onnx": opset10,
}


def build(folder: pathlib.Path) -> list[pathlib.Path]:
    """Write every sample model into ``folder``; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, make in MODELS.items():
        path = folder / name
        path.write_bytes(make().SerializeToString())
        paths.append(path)
    return paths


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent
    for written in build(target):
        print(f"wrote {written} ({written.stat().st_size} bytes)")
