"""One-node models and synthetic profiles the profile, ranking and layout tests share."""

from __future__ import annotations

from onnx import TensorProto, helper

from revseq.ops.targets import PORTABLE, TARGETS
from revseq.ops.targets.profile import Profile

PROBED = (
    "iree",
    "mnn",
    "onnx2torch",
    "onnxruntime",
    "opencv",
    "openvino",
    "tinygrad",
    "tract",
    "tvm",
    "webgpu",
)


DOCUMENTED = ("coreml", "nnapi", "qnn", "webnn")


def one_node(dims, elem=TensorProto.FLOAT, batch_axis=1, time_axis=0):
    node = helper.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis
    )
    graph = helper.make_graph(
        [node],
        "rs",
        [
            helper.make_tensor_value_info("x", elem, dims),
            helper.make_tensor_value_info("lens", TensorProto.INT64, [dims[batch_axis]]),
        ],
        [helper.make_tensor_value_info("y", elem, dims)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def gathers(model):
    return [n for n in model.graph.node if n.op_type.startswith("Gather")]


def probed(name, *, dynamic_ops, gather_elements, costs=None, falls_back=False):
    ops = frozenset({"Shape", "Slice", "Cast", "Squeeze", "Range", "Less", "Where", "Add",
                     "Sub", "Unsqueeze", "Concat", "Expand", "GatherElements", "GatherND",
                     "Gather", "Min", "Max", "Mul", "Reshape", "Transpose",
                     "Index:int64"})  # fmt: skip
    types = frozenset({"float32", "uint16"})
    return Profile(
        name=name,
        source="probed",
        description=name,
        backend_version=f"{name} 1.0",
        native=False,
        static_ops=ops,
        dynamic_ops=ops & dynamic_ops,
        dtypes={"Gather": types, "GatherElements": gather_elements, "GatherND": types},
        forms={
            "static": frozenset({"gather_elements", "gather_nd", "gather_rows"}),
            "dynamic": frozenset({"gather_elements", "gather_nd"}),
        },
        costs=costs,
        falls_back=falls_back,
    )


GATHER_OPS = ("Gather", "GatherElements", "GatherND")


EVERY_OP = frozenset(TARGETS[PORTABLE].static_ops) | {"Index:int64"}


def gather_of(model):
    """The gather that moves the data: the last one (a table lookup comes before)."""
    return gathers(model)[-1].op_type
