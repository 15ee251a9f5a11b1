"""A corpus of bad input files, written on demand by :func:`write_corpus`.

Each entry names a file (or a folder, or a missing path) and the keyword the error
message must contain. ``FILE_LEVEL`` entries are refused when loading; the others load
and are refused by the passes (an invalid node, an opset without the op).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np
import onnx
import onnx.helper as oh

TP = onnx.TensorProto


@dataclasses.dataclass(frozen=True)
class BadInput:
    """One corpus entry: where it is, what the message must say, when it is caught."""

    path: pathlib.Path
    keyword: str
    file_level: bool


def _model(
    node: onnx.NodeProto | None = None,
    *,
    dims=("T", "B", 3),
    lens_dims=("B",),
    opset: int = 17,
    domain: str | None = None,
    initializers=(),
) -> onnx.ModelProto:
    node = node or oh.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rs")
    graph = oh.make_graph(
        [node],
        "g",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, list(dims)),
            oh.make_tensor_value_info("lens", TP.INT64, list(lens_dims)),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, list(dims))],
        list(initializers),
    )
    imports = [oh.make_opsetid("", opset)] + ([oh.make_opsetid(domain, 1)] if domain else [])
    return oh.make_model(graph, opset_imports=imports, ir_version=8)


def _rs(*inputs: str, **attrs: int) -> onnx.NodeProto:
    return oh.make_node("ReverseSequence", list(inputs), ["y"], name="rs", **attrs)


def _external(folder: pathlib.Path, name: str, location: str, write: bool) -> pathlib.Path:
    """A model whose weight 'w' points at ``location``; the file is made if ``write``."""
    weights = onnx.numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    weights.ClearField("raw_data")
    weights.data_location = TP.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        weights.external_data.add(key=key, value=value)
    model = _model(
        oh.make_node("Add", ["x", "w"], ["y"]),
        dims=(4,),
        lens_dims=(1,),
        initializers=[weights],
    )
    if write:
        (folder / location).write_bytes(np.arange(4, dtype=np.float32).tobytes())
    path = folder / name
    path.write_bytes(model.SerializeToString())
    return path


def write_corpus(folder: pathlib.Path) -> dict[str, BadInput]:
    """Write every bad input into ``folder``; returns them by name."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus: dict[str, BadInput] = {}

    def file(name: str, content: bytes, keyword: str) -> None:
        path = folder / name
        path.write_bytes(content)
        corpus[name] = BadInput(path, keyword, True)

    def model(name: str, proto: onnx.ModelProto, keyword: str, file_level=False) -> None:
        path = folder / name
        path.write_bytes(proto.SerializeToString())
        corpus[name] = BadInput(path, keyword, file_level)

    good = _model().SerializeToString()
    file("empty.onnx", b"", "empty")
    file("random.onnx", np.random.default_rng(0).bytes(4096), "not an ONNX model")
    file("truncated.onnx", good[: len(good) // 2], "not an ONNX model")
    file(
        "tensor.onnx",
        onnx.numpy_helper.from_array(np.zeros(3)).SerializeToString(),
        "not an ONNX model",
    )
    file("graph.onnx", _model().graph.SerializeToString(), "not an ONNX model")
    file("text.onnx", b"this is not a model\n", "not an ONNX model")
    checker_fails = _model()
    checker_fails.graph.node[0].input[0] = "undefined"
    model("checker.onnx", checker_fails, "checker", file_level=True)
    (folder / "folder.onnx").mkdir(exist_ok=True)
    corpus["folder.onnx"] = BadInput(folder / "folder.onnx", "folder", True)
    corpus["missing.onnx"] = BadInput(folder / "missing.onnx", "no such file", True)

    model("equal_axes.onnx", _model(_rs("x", "lens", batch_axis=0, time_axis=0)), "differ")
    model("axis_2.onnx", _model(_rs("x", "lens", batch_axis=2, time_axis=0)), "0 or 1")
    # onnx's checker already refuses a wrong input count for the ONNX domain...
    model("one_input.onnx", _model(_rs("x")), "input size 1", file_level=True)
    model(
        "three_inputs.onnx", _model(_rs("x", "lens", "lens")), "input size 3", file_level=True
    )
    # ...but not for the revseq domain, which has no schema: revseq's validation does.
    model(
        "revseq_one_input.onnx",
        _model(
            oh.make_node("ReverseSequence", ["x"], ["y"], name="rs", domain="revseq"),
            domain="revseq",
        ),
        "expects 2 inputs",
    )
    model("rank_1.onnx", _model(dims=(4,), lens_dims=(4,)), "rank >= 2")
    model("opset_9.onnx", _model(opset=9), "domain_version of 9", file_level=True)
    model("batch_mismatch.onnx", _model(dims=(5, 4, 3), lens_dims=(3,)), "batch axis")
    model(
        "revseq_axis_range.onnx",
        _model(
            oh.make_node(
                "ReverseSequence",
                ["x", "lens"],
                ["y"],
                name="rs",
                domain="revseq",
                batch_axis=5,
                time_axis=0,
            ),
            domain="revseq",
        ),
        "out of range",
    )

    outside = folder.parent / f"{folder.name}_outside.data"
    outside.write_bytes(b"\0" * 16)
    for name, location, write, keyword in (
        ("escape.onnx", f"../{outside.name}", False, "escapes"),
        ("absolute.onnx", str(outside), False, "absolute"),
        ("no_data.onnx", "missing.data", False, "missing"),
        ("symlink.onnx", "link.data", False, "outside"),
    ):
        if name == "symlink.onnx" and not (folder / "link.data").exists():
            os.symlink(outside, folder / "link.data")
        corpus[name] = BadInput(_external(folder, name, location, write), keyword, True)
    return corpus
