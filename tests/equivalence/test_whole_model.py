"""The whole model on the user's runtime: a verdict within tolerance, and the blame.

Where the outputs differ, the check names the first tensor inside that differs and the
node that wrote it: one of revseq's decompositions, or one of the model's own nodes.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import installed_or_skip

import revseq
from revseq.cli import main
from revseq.ops.reference import reverse_sequence_model

helper = onnx.helper
BACKENDS = [
    "onnxruntime",
    pytest.param("tract", marks=pytest.mark.backend),
    pytest.param("opencv", marks=pytest.mark.backend),
]


def _model() -> onnx.ModelProto:
    """A Relu of the model's own, the reversal, and a Mul of its own after it."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["a"], name="pre"),
            helper.make_node(
                "ReverseSequence", ["a", "lens"], ["r"], name="rs", batch_axis=1, time_axis=0
            ),
            helper.make_node("Mul", ["r", "two"], ["y"], name="scale"),
        ],
        "relu_reverse_scale",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["T", "B", 3]),
            helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, ["B"]),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["T", "B", 3])],
        [helper.make_tensor("two", onnx.TensorProto.FLOAT, [], [2.0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _planted_in_the_decomposition(inlined: onnx.ModelProto) -> onnx.ModelProto:
    """A wrong node of revseq's: the first Sub of the index with its inputs swapped."""
    bad = onnx.ModelProto()
    bad.CopyFrom(inlined)
    sub = next(n for n in bad.graph.node if n.op_type == "Sub")
    sub.input[0], sub.input[1] = sub.input[1], sub.input[0]
    return bad


def _planted_in_the_model(inlined: onnx.ModelProto) -> onnx.ModelProto:
    """A wrong node of the model's own: its Relu made a Sigmoid."""
    bad = onnx.ModelProto()
    bad.CopyFrom(inlined)
    next(n for n in bad.graph.node if n.name == "pre").op_type = "Sigmoid"
    return bad


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_within_tolerance_are_ok(backend):
    installed_or_skip(backend)
    model = _model()
    report = revseq.check(model, revseq.inline(model), backend=backend, whole_model=True)
    assert report.ok and report.verdict == "OK", report
    assert "within rtol=1e-05, atol=1e-06" in report.message


@pytest.mark.parametrize(
    ("plant", "blamed"),
    [
        (
            _planted_in_the_decomposition,
            "first differing tensor 'r', written by revseq's decomposition of "
            "ReverseSequence 'rs'",
        ),
        (_planted_in_the_model, "first differing tensor 'a', written by the model's own Relu"),
    ],
    ids=["revseq", "model"],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_differing_tensor_is_blamed_on_who_wrote_it(backend, plant, blamed):
    installed_or_skip(backend)
    model = _model()
    report = revseq.check(
        model, plant(revseq.inline(model)), backend=backend, whole_model=True
    )
    assert not report.ok
    assert blamed in report.message, report.message
    assert "reference " in report.message and "candidate " in report.message


def test_a_loop_whose_body_holds_a_decomposition_is_said_so():
    from revseq.equivalence.blame import _writer

    body = helper.make_graph(
        [helper.make_node("ReverseSequence", ["x", "lens"], ["y"])], "body", [], []
    )
    loop = helper.make_node("Loop", ["n", ""], ["out"], name="loop", body=body)
    assert _writer(loop) == (
        "the model's own Loop 'loop', whose body holds revseq's decomposition(s)"
    )


def test_the_command_exits_1_and_names_the_tensor(tmp_path, capsys):
    model = _model()
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(_planted_in_the_decomposition(revseq.inline(model)), tmp_path / "bad.onnx")
    code = main(["check", str(tmp_path / "m.onnx"), str(tmp_path / "bad.onnx"), "-q",
                 "--backend", "onnxruntime", "--whole-model"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("DIFFERENT: output 'y' differs") and "tensor 'r'" in out, out


@pytest.mark.backend
def test_a_runtime_that_refuses_an_op_is_told_whose_op_it_is():
    installed_or_skip("ncnn")
    model = reverse_sequence_model([6, 4, 3], onnx.TensorProto.FLOAT)
    with pytest.raises(revseq.RevseqError) as caught:
        revseq.check(model, revseq.inline(model), backend="ncnn", whole_model=True)
    message = str(caught.value)
    assert "the runtime names Gather (written by revseq)" in message, message
    assert len(message.splitlines()) == 1


def test_values_are_compared_bit_for_bit_without_a_tolerance():
    from revseq.equivalence._runners import Engine
    from revseq.equivalence.blame import first_differing_tensor

    model = _model()
    feeds = {
        "x": np.arange(24, dtype=np.float32).reshape(4, 2, 3) - 12,
        "lens": np.array([4, 2]),
    }
    bad = _planted_in_the_model(revseq.inline(model))
    said = str(first_differing_tensor(model, bad, feeds, Engine(None), None))
    assert said.startswith("first differing tensor 'a', written by the model's own Relu")
