"""Helpers the test modules share: make a one-node model, run it, compare outputs bit for
bit, list ops."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest

from revseq import backends
from revseq.backends import onnxruntime as ort_adapter
from revseq.ops.reference import reference_evaluator, reverse_sequence_model
from revseq.ops.vocabulary import ELEMENT_TYPES

TESTS = pathlib.Path(__file__).resolve().parent
"""The tests' folder: its sub-folders follow the package's."""
ROOT = TESTS.parent
"""The checkout."""
FIXTURES = TESTS / "fixtures"
"""The models the tests run on (each made by a script beside it)."""


def revseq(
    *args: str | os.PathLike, cwd: pathlib.Path | None = None
) -> subprocess.CompletedProcess:
    """Run ``python -m revseq`` with ``args``; never raises on a non-zero exit."""
    return subprocess.run(
        [sys.executable, "-m", "revseq", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2, one ``revseq: error:`` line on stderr holding each needle, no traceback."""
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("revseq: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def run_ort(model: onnx.ModelProto, feeds: dict, *, optimize: bool) -> list[np.ndarray]:
    """Run in onnxruntime CPU, one thread, graph optimisations all on or all off."""
    return ort_adapter.prepare(model, optimize=optimize)(feeds)


def run_reference(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """Run in onnx's ReferenceEvaluator (for the types onnxruntime lacks)."""
    return reference_evaluator(model).run(None, feeds)


def assert_identical(got: np.ndarray, expected: np.ndarray) -> None:
    """Same shape and dtype and the same bytes (NaN payloads, -0.0); strings by value."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape
    if expected.dtype == object:
        assert got.tolist() == expected.tolist()
    else:
        assert got.dtype == expected.dtype
        assert got.tobytes() == expected.tobytes()


def all_op_types(model: onnx.ModelProto) -> list[str]:
    """Op types of every node: main graph, subgraphs at any depth, functions."""
    found: list[str] = []

    def visit(nodes) -> None:
        for node in nodes:
            found.append(node.op_type)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g.node)
                for graph in attr.graphs:
                    visit(graph.node)

    visit(model.graph.node)
    for function in model.functions:
        visit(function.node)
    return found


def constants_of(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """The main graph's constants by name: its Constant nodes' values and initializers."""
    found = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            found[node.output[0]] = onnx.helper.get_attribute_value(node.attribute[0])
    return found


def model_of(
    dims,
    dtype: str,
    batch_axis: int,
    time_axis: int,
    *,
    domain: str = "",
    lens_type: int = onnx.TensorProto.INT64,
    own_lens_dim: bool = False,
) -> onnx.ModelProto:
    """A one-node model; ``own_lens_dim``: the lengths declared with a symbol of their own
    (``N``), as exporters declare them, where the batch dim is symbolic."""
    batch = dims[batch_axis % len(dims)]
    lens_dim = "N" if own_lens_dim and not isinstance(batch, int) else ...
    return reverse_sequence_model(
        dims, ELEMENT_TYPES[dtype], batch_axis=batch_axis, time_axis=time_axis, domain=domain,
        lens_elem=lens_type, lens_dim=lens_dim, opset=18, ir_version=9, name="rs",
    )  # fmt: skip


def time_shorter_than_lengths_model() -> onnx.ModelProto:
    """A ReverseSequence whose constant lengths (up to 6) exceed its constant time dim (2).

    Its data is computed from the input (an Expand of its mean): no drawn input size
    makes it valid, so the native op refuses the lengths on every run.
    """
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], keepdims=0),
        helper.make_node("Expand", ["mean", "shape"], ["data"]),
        helper.make_node(
            "ReverseSequence", ["data", "lens"], ["y"], batch_axis=1, time_axis=0
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "constant_time",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3, 1])],
        initializer=[
            numpy_helper.from_array(np.array([6, 1, 0], np.int64), "lens"),
            numpy_helper.from_array(np.array([2, 3, 1], np.int64), "shape"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


onnx2torch_here = pytest.mark.skipif(
    not backends.installed("onnx2torch"), reason="onnx2torch is not installed"
)
"""A test that converts with onnx2torch (torch on the CPU)."""


def full_lengths_model(dims, batch_axis: int, time_axis: int, opset: int) -> onnx.ModelProto:
    """``tf.reverse`` as tf2onnx exports it: lengths expanded from the data's time dim."""
    nodes = [
        onnx.helper.make_node("Shape", ["x"], ["shape"]),
        onnx.helper.make_node("Gather", ["shape", "t"], ["time_len"]),
        onnx.helper.make_node("Gather", ["shape", "b"], ["batch"]),
        onnx.helper.make_node("Expand", ["time_len", "batch"], ["lens"]),
        onnx.helper.make_node(
            "ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis
        ),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "full",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, dims)],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, dims)],
        initializer=[
            onnx.helper.make_tensor("t", onnx.TensorProto.INT64, [], [time_axis]),
            onnx.helper.make_tensor("b", onnx.TensorProto.INT64, [1], [batch_axis]),
        ],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])


def installed_or_skip(backend: str) -> None:
    """Skip the test, saying why, where ``backend`` cannot run here."""
    reason = backends.unavailable(backend)
    if reason is not None:
        pytest.skip(reason)


class HoldsFloat16:
    """onnxruntime as an NPU that holds float32 as float16 (RKNN): data rounded going in."""

    name = "onnxruntime"
    label = "onnxruntime holding float32 as float16"
    resident = False

    def __init__(self):
        self.storage = {"float32": "float16"}
        self.real = backends.get("onnxruntime")

    def prepare(self, model, *, repeated=False):
        from revseq.equivalence.inputs.values import held

        runner = self.real.prepare(model, repeated=repeated)
        return lambda feeds: runner(held(feeds, self.storage))

    def rounding(self, dtype, rank):
        return self.real.rounding(dtype, rank)
