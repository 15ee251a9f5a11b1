"""One-node models, their feeds and signatures, that the restore tests share."""

from __future__ import annotations

import helpers
import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import onnxruntime as ort

from revseq.passes.graph.scopes import walk

FIXTURES = helpers.FIXTURES


FLOAT = onnx.TensorProto.FLOAT


INT64 = onnx.TensorProto.INT64


def one_node(dims, batch_axis, time_axis, *, elem=FLOAT, domain="", lens_type=INT64):
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


def sig_of(model: onnx.ModelProto) -> list[tuple[str, str, int, int]]:
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


def random_feeds(model: onnx.ModelProto, rng: np.random.Generator) -> dict[str, np.ndarray]:
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


def run_in_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def node_attr(node: onnx.NodeProto, name: str) -> int:
    return next(a.i for a in node.attribute if a.name == name)
