"""Models shaped like the ones people ship, built here: token ids, conv front ends, pads.

Each holds a ReverseSequence where real models put one (a hand-built backward
direction) and what makes random inputs fail there: ids that index an embedding, a
kernel longer than a small time dim, a reflect pad, lengths declared with a symbol of
their own, dims named apart but broadcast together.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

FLOAT = onnx.TensorProto.FLOAT
INT32 = onnx.TensorProto.INT32
INT64 = onnx.TensorProto.INT64


def _model(nodes, inputs, outputs, initializers, name: str) -> onnx.ModelProto:
    graph = oh.make_graph(nodes, name, inputs, outputs, initializers)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _weights(name: str, *shape: int) -> onnx.TensorProto:
    """The same weights for the same name and shape, call after call."""
    rng = np.random.default_rng([len(name), *shape])
    return onh.from_array(rng.standard_normal(shape).astype(np.float32), name)


def _ints(name: str, values) -> onnx.TensorProto:
    return onh.from_array(np.asarray(values, np.int64), name)


def embedding_tagger() -> onnx.ModelProto:
    """Token ids -> embedding Gather -> ReverseSequence (lengths on dim N) -> ReduceSum."""
    return _model(
        [
            oh.make_node("Gather", ["emb", "ids"], ["e"], name="embed"),
            oh.make_node("ReverseSequence", ["e", "lens"], ["r"], batch_axis=1, time_axis=0),
            oh.make_node("ReduceSum", ["r", "last"], ["y"], keepdims=0),
        ],
        [
            oh.make_tensor_value_info("ids", INT64, ["T", "B"]),
            oh.make_tensor_value_info("lens", INT64, ["N"]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["T", "B"])],
        [_weights("emb", 100, 8), _ints("last", [2])],
        "tagger",
    )


def bidirectional_ids() -> onnx.ModelProto:
    """A backward direction that reverses the token ids themselves, batch-major.

    The lengths come as int32 on a dim of their own and are cast to int64, as exporters
    write it; both directions index one embedding, and a MatMul mixes them.
    """
    return _model(
        [
            oh.make_node("Cast", ["lengths"], ["lens"], to=INT64),
            oh.make_node("Gather", ["emb", "ids"], ["fw"], name="forward_embed"),
            oh.make_node(
                "ReverseSequence", ["ids", "lens"], ["rid"], batch_axis=0, time_axis=1
            ),
            oh.make_node("Gather", ["emb", "rid"], ["bw"], name="backward_embed"),
            oh.make_node("Concat", ["fw", "bw"], ["both"], axis=-1),
            oh.make_node("MatMul", ["both", "proj"], ["y"]),
        ],
        [
            oh.make_tensor_value_info("ids", INT64, ["batch", "seq"]),
            oh.make_tensor_value_info("lengths", INT32, ["num_lengths"]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["batch", "seq", 3])],
        [_weights("emb", 50, 6), _weights("proj", 12, 3)],
        "bidirectional",
    )


def int32_ids_through_cast() -> onnx.ModelProto:
    """tf2onnx's way: int32 ids cast to int64, flattened, embedded, reshaped back."""
    return _model(
        [
            oh.make_node("Cast", ["ids"], ["ids64"], to=INT64),
            oh.make_node("Shape", ["ids"], ["ids_shape"]),
            oh.make_node("Reshape", ["ids64", "flat"], ["flat_ids"]),
            oh.make_node("Gather", ["emb", "flat_ids"], ["flat_e"], name="embed"),
            oh.make_node("Concat", ["ids_shape", "width"], ["e_shape"], axis=0),
            oh.make_node("Reshape", ["flat_e", "e_shape"], ["e"]),
            oh.make_node("Cast", ["lengths"], ["lens"], to=INT64),
            oh.make_node("ReverseSequence", ["e", "lens"], ["y"], batch_axis=0, time_axis=1),
        ],
        [
            oh.make_tensor_value_info("ids", INT32, ["batch", "time"]),
            oh.make_tensor_value_info("lengths", INT32, ["batch"]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["batch", "time", 4])],
        [_weights("emb", 30, 4), _ints("flat", [-1]), _ints("width", [4])],
        "int32_ids_through_cast",
    )


def conv_front_end() -> onnx.ModelProto:
    """Audio [B, 1, T] -> Conv (kernel 5, stride 2) -> Relu -> [T', B, C] -> reversed."""
    return _model(
        [
            oh.make_node("Conv", ["audio", "kernel"], ["c"], strides=[2], name="frontend"),
            oh.make_node("Relu", ["c"], ["a"]),
            oh.make_node("Transpose", ["a"], ["t"], perm=[2, 0, 1]),
            oh.make_node("ReverseSequence", ["t", "lens"], ["y"], batch_axis=1, time_axis=0),
        ],
        [
            oh.make_tensor_value_info("audio", FLOAT, ["B", 1, "samples"]),
            oh.make_tensor_value_info("lens", INT64, ["L"]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["frames", "B", 4])],
        [_weights("kernel", 4, 1, 5)],
        "conv_front_end",
    )


def reflect_pad() -> onnx.ModelProto:
    """A reflect Pad of 2 along time (it needs 3 steps), then the reversal."""
    return _model(
        [
            oh.make_node("Pad", ["x", "pads"], ["p"], mode="reflect", name="pad"),
            oh.make_node("ReverseSequence", ["p", "lens"], ["y"], batch_axis=0, time_axis=1),
        ],
        [
            oh.make_tensor_value_info("x", FLOAT, ["B", "T"]),
            oh.make_tensor_value_info("lens", INT64, ["B"]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["B", "T4"])],
        [_ints("pads", [0, 2, 0, 2])],
        "reflect_pad",
    )


def computed_features() -> onnx.ModelProto:
    """Float features through a MatMul before the reversal, beside a reversed input.

    ``features`` reaches the reversal only through arithmetic (NaN there would turn the
    output into NaN), ``skip`` reaches it unchanged (special floats prove something).
    """
    return _model(
        [
            oh.make_node("MatMul", ["features", "w"], ["h"]),
            oh.make_node("Concat", ["h", "skip"], ["x"], axis=-1),
            oh.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0),
        ],
        [
            oh.make_tensor_value_info("features", FLOAT, ["T", "B", 6]),
            oh.make_tensor_value_info("skip", FLOAT, ["T", "B", 2]),
            oh.make_tensor_value_info("lens", INT64, ["B"]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["T", "B", 5])],
        [_weights("w", 6, 3)],
        "computed_features",
    )


def broadcast_of_two_dims() -> onnx.ModelProto:
    """data = a[T1, B] + b[T2, B], lengths T1 for every batch entry (tf.reverse-like).

    Only T1 = T2 or one of them 1 runs; with T1 = 1 and T2 = 4 the lengths (1) are no
    full reversal of the data's 4 steps.
    """
    return _model(
        [
            oh.make_node("Add", ["a", "b"], ["x"]),
            oh.make_node("Shape", ["a"], ["shape_a"]),
            oh.make_node("Gather", ["shape_a", "zero"], ["t1"], axis=0),
            oh.make_node("Shape", ["x"], ["shape_x"]),
            oh.make_node("Gather", ["shape_x", "one"], ["batch"], axis=0),
            oh.make_node("Unsqueeze", ["batch", "axis0"], ["batch_shape"]),
            oh.make_node("Expand", ["t1", "batch_shape"], ["lens"]),
            oh.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0),
        ],
        [
            oh.make_tensor_value_info("a", FLOAT, ["T1", "B"]),
            oh.make_tensor_value_info("b", FLOAT, ["T2", "B"]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["TY", "B"])],
        [_ints("zero", 0), _ints("one", 1), _ints("axis0", [0])],
        "broadcast_of_two_dims",
    )


def two_time_lengths() -> onnx.ModelProto:
    """One lengths input feeding two reversals: of x [T, B, 2] and of its first 3 steps."""
    return _model(
        [
            oh.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0),
            oh.make_node("Slice", ["x", "start", "stop", "axis0"], ["head"]),
            oh.make_node(
                "ReverseSequence", ["head", "lens"], ["z"], batch_axis=1, time_axis=0
            ),
        ],
        [
            oh.make_tensor_value_info("x", FLOAT, ["T", "B", 2]),
            oh.make_tensor_value_info("lens", INT64, ["B"]),
        ],
        [
            oh.make_tensor_value_info("y", FLOAT, ["T", "B", 2]),
            oh.make_tensor_value_info("z", FLOAT, ["H", "B", 2]),
        ],
        [_ints("start", [0]), _ints("stop", [3]), _ints("axis0", [0])],
        "two_time_lengths",
    )


def negative_id_wrap() -> onnx.ModelProto:
    """tf2onnx's Keras embedding: ids < 0 wrap to ids + N, a select by multiply-add.

    ``Where(ids < 0, ids + N, ids)`` written as ``Cast(c) * (ids + N) + Cast(!c) * ids``
    (tf2onnx's SelectV2): the ids reach the Gather through arithmetic alone. The
    reversal is of the ids themselves, before the wrap.
    """
    return _model(
        [
            oh.make_node("ReverseSequence", ["ids", "lens"], ["r"], batch_axis=0, time_axis=1),
            oh.make_node("Cast", ["r"], ["r_float"], to=FLOAT),
            oh.make_node("Less", ["r_float", "zero"], ["negative"]),
            oh.make_node("Not", ["negative"], ["positive"]),
            oh.make_node("Cast", ["negative"], ["negative_int"], to=INT32),
            oh.make_node("Cast", ["positive"], ["positive_int"], to=INT32),
            oh.make_node("Add", ["r", "rows"], ["wrapped"]),
            oh.make_node("Mul", ["negative_int", "wrapped"], ["when_negative"]),
            oh.make_node("Mul", ["r", "positive_int"], ["when_positive"]),
            oh.make_node("Add", ["when_negative", "when_positive"], ["index"]),
            oh.make_node("Gather", ["emb", "index"], ["e"], name="embed"),
            oh.make_node("ReduceSum", ["e", "last"], ["y"], keepdims=0),
        ],
        [
            oh.make_tensor_value_info("ids", INT32, ["batch", "time"]),
            oh.make_tensor_value_info("lens", INT64, ["batch"]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["batch", "time"])],
        [
            _weights("emb", 49, 6),
            _ints("last", [2]),
            onh.from_array(np.asarray(49, np.int32), "rows"),
            onh.from_array(np.asarray(0.0, np.float32), "zero"),
        ],
        "negative_id_wrap",
    )


CORPUS = {
    "embedding_tagger": embedding_tagger,
    "bidirectional_ids": bidirectional_ids,
    "int32_ids_through_cast": int32_ids_through_cast,
    "conv_front_end": conv_front_end,
    "reflect_pad": reflect_pad,
    "computed_features": computed_features,
    "broadcast_of_two_dims": broadcast_of_two_dims,
    "two_time_lengths": two_time_lengths,
    "negative_id_wrap": negative_id_wrap,
}


def tf_reverse() -> onnx.ModelProto:
    """What tf2onnx emits for tf.reverse on axis 1: lengths from Shape/Gather/Expand."""
    nodes = [
        oh.make_node("Shape", ["x"], ["shape"]),
        oh.make_node("Constant", [], ["one"], value=oh.make_tensor("v", INT64, [], [1])),
        oh.make_node("Gather", ["shape", "one"], ["time"]),
        oh.make_node("Constant", [], ["zero"], value=oh.make_tensor("v", INT64, [1], [0])),
        oh.make_node("Gather", ["shape", "zero"], ["batch"]),
        oh.make_node("Expand", ["time", "batch"], ["lens"]),
        oh.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=0, time_axis=1),
    ]
    graph = oh.make_graph(
        nodes,
        "g",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", "t", 3])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["b", "t", 3])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
