"""Whole Keras models as tf2onnx writes them (``tests/fixtures/make_tf_models.py``).

Each inlines, checks with no flag and restores every reversal; on each runtime that is
installed, the whole inlined model runs within tolerance of onnxruntime's output of the
original, or the one-line error says whose op failed: a node or op type the runtime
names, or the model's own ops (it fails alike with every reversal made an Identity).
"""

from __future__ import annotations

import helpers
import onnx
import pytest
from helpers import installed_or_skip

import revseq

FIXTURES = helpers.FIXTURES
MODELS = {
    "tf_crnn_reader": {"image": [1, 40, 16, 1]},
    "tf_bilstm_tagger": {"ids": [1, 12]},
    "tf_go_backwards": {"x": [1, 10, 4]},
    "tf_bird_flip": {"mel": [1, 32, 20]},
    "tf_reverse_sequence_dense": {"x": [1, 9, 3], "lens": [1]},
}

# What each runtime does with each whole inlined model: "ok", or the words its one-line
# error must hold (whose op failed).
OUTCOMES = {
    "opencv": {  # buf.shape() == m.shape(): a node found by bisection
        "tf_crnn_reader": "own ops, first at Unsqueeze 'model/dense_1/Tensordot/stack_Unsq",
        "tf_bilstm_tagger": "own ops, first at Unsqueeze 'model_1/dense_2/Tensordot/stack",
        "tf_go_backwards": "ok",
        "tf_bird_flip": "ok",
        "tf_reverse_sequence_dense": "ok",
    },
    "tract": {
        "tf_crnn_reader": "Reshape 'model/reshape/Reshape' (the model's own)",
        "tf_bilstm_tagger": "(the model's own)",
        "tf_go_backwards": "Expand 'model_2/lstm_2/zeros' (the model's own)",
        "tf_bird_flip": "ok",
        "tf_reverse_sequence_dense": "Reshape 'Tensordot' (the model's own)",
    },
    "onnx2torch": {
        "tf_crnn_reader": "LSTM (the model's own)",
        "tf_bilstm_tagger": "Loop (the model's own)",
        "tf_go_backwards": "LSTM (the model's own)",
        "tf_bird_flip": "ok",
        "tf_reverse_sequence_dense": "ok",
    },
    "openvino": {
        "tf_crnn_reader": "ok",
        "tf_bilstm_tagger": "Loop (the model's own)",
        "tf_go_backwards": "ok",
        "tf_bird_flip": "ok",
        "tf_reverse_sequence_dense": "ok",
    },
    "mnn": dict.fromkeys(MODELS, "ok"),
    "tvm": {
        "tf_crnn_reader": "LSTM (the model's own)",
        "tf_bilstm_tagger": "Loop (the model's own)",
        "tf_go_backwards": "LSTM (the model's own)",
        "tf_bird_flip": "ok",
        "tf_reverse_sequence_dense": "every reversal made an Identity too",
    },
}


# Runtimes that build for fixed shapes: their own target at batch 1; RKNN compared within
# float16's precision (it holds float32 as float16).
FIXED = {
    "rknn": {
        "tf_crnn_reader": "ok",
        "tf_bilstm_tagger": "Loop 'model_1/bidirectional_1/forward_lstm_1/PartitionedCall/",
        "tf_go_backwards": "ok",
        "tf_bird_flip": "ok",
        "tf_reverse_sequence_dense": "ok",
    },
    "litert": {  # onnx2tf writes no Loop: a custom ONNX_LOOP LiteRT lacks
        "tf_crnn_reader": "ok",
        "tf_bilstm_tagger": "unresolved custom op: ONNX_LOOP",
        "tf_go_backwards": "ok",  # its LSTM's state reset before each run
        "tf_bird_flip": "ok",
        "tf_reverse_sequence_dense": "ok",
    },
    "x2paddle": {
        "tf_crnn_reader": "LSTM (the model's own)",
        "tf_bilstm_tagger": "every reversal made an Identity too",
        "tf_go_backwards": "ok",
        "tf_bird_flip": "ok",
        "tf_reverse_sequence_dense": "ok",
    },
}


def _load(name: str) -> onnx.ModelProto:
    return onnx.load(FIXTURES / f"{name}.onnx")


def _reversals(graph: onnx.GraphProto) -> int:
    count = 0
    for node in graph.node:
        count += node.op_type == "ReverseSequence"
        for attribute in node.attribute:
            for body in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                count += _reversals(body)
    return count


@pytest.mark.parametrize("name", MODELS)
def test_inline_check_and_restore_every_reversal(name):
    model = _load(name)
    reversals = _reversals(model.graph)
    assert reversals >= 1
    inlined = revseq.inline(model)
    assert _reversals(inlined.graph) == 0
    report = revseq.check(model, inlined)
    assert report.ok and report.exercised, report
    restored = revseq.restore(inlined)
    assert _reversals(restored.graph) == reversals
    assert revseq.check(model, restored).ok


@pytest.mark.backend
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("backend", [*OUTCOMES, *FIXED])
def test_the_whole_model_runs_on_the_runtime_or_says_whose_op_failed(backend, name):
    """The default, or for a runtime that builds for fixed shapes its own target there."""
    installed_or_skip(backend)
    model = _load(name)
    if backend in FIXED:
        inlined = revseq.inline(model, target=backend, input_shapes=MODELS[name])
        tolerance = {"rtol": 1e-2, "atol": 1e-3} if backend == "rknn" else {}
        _runs_or_says_whose(model, inlined, backend, FIXED[backend][name], **tolerance)
    else:
        _runs_or_says_whose(model, revseq.inline(model), backend, OUTCOMES[backend][name])


def _runs_or_says_whose(model, inlined, backend: str, expected: str, **tolerance) -> None:
    """The whole model runs within tolerance ("ok"), or the one-line error says whose."""
    if expected == "ok":
        report = revseq.check(model, inlined, backend=backend, whole_model=True, **tolerance)
        assert report.ok, report
        return
    with pytest.raises(revseq.RevseqError) as caught:
        revseq.check(model, inlined, backend=backend, whole_model=True, **tolerance)
    message = str(caught.value)
    assert expected in message and len(message.splitlines()) == 1, message


@pytest.mark.parametrize("name", ["tf_crnn_reader", "tf_bird_flip", "tf_go_backwards"])
def test_ncnn_target_at_fixed_shapes_writes_each_flip_as_one_slice(name):
    """Shapes computed by Shape, Gather and Concat fold once the inputs are fixed.

    tf2onnx's Tensordot Reshapes leave the CRNN's reversals of unknown rank until then.
    """
    model = _load(name)
    inlined = revseq.inline(model, target="ncnn", input_shapes=MODELS[name])
    reversed_ = {n.name for n in model.graph.node if n.op_type == "ReverseSequence"}
    slices = [n for n in inlined.graph.node if n.name in reversed_]
    assert len(slices) == _reversals(model.graph)
    assert {n.op_type for n in slices} == {"Slice"}
    assert revseq.check(model, inlined).ok


def test_ncnn_target_writes_a_time_major_flip_with_the_batch_leading():
    """pnnx takes a leading axis of size 1 for the batch: the flip's view puts it first.

    Only the flips read by a Transpose (whose Transposes pnnx cancels against
    tf2onnx's own) or an LSTM, so that ncnn's LSTM reads the blob of the rank it
    expects: the CRNN's first two; its third (read by a Concat) and other targets',
    one Slice.
    """
    model = _load("tf_crnn_reader")
    shapes = MODELS["tf_crnn_reader"]
    reversed_ = {n.name for n in model.graph.node if n.op_type == "ReverseSequence"}
    for target, transposes in (("ncnn", 4), ("x2paddle", 0), ("onnxruntime", 0)):
        inlined = revseq.inline(model, target=target, input_shapes=shapes)
        written = [
            n
            for n in inlined.graph.node
            if n.op_type == "Transpose" and n.name.rsplit("/", 1)[0] in reversed_
        ]
        assert len(written) == transposes, target
        assert revseq.check(model, inlined).ok


@pytest.mark.backend
@pytest.mark.parametrize("name", ["tf_crnn_reader", "tf_bird_flip", "tf_go_backwards"])
def test_ncnn_at_fixed_shapes_runs_the_flips_or_blames_the_models_own_ops(name):
    """ncnn's target writes each full flip as a step -1 Slice (ncnn's Flip)."""
    installed_or_skip("ncnn")
    model = _load(name)
    inlined = revseq.inline(model, target="ncnn", input_shapes=MODELS[name])
    report = revseq.check(model, inlined, backend="ncnn", whole_model=True)
    if name != "tf_go_backwards":
        assert report.ok, report
    else:  # pnnx's LSTM gives the wrong shape, with or without the reversal
        assert not report.ok
        assert "every reversal made an Identity differs there too" in report.message


@pytest.mark.backend
def test_ncnn_takes_lengths_given_at_run_time_with_its_finite_target():
    installed_or_skip("ncnn")
    model = _load("tf_reverse_sequence_dense")
    shapes = MODELS["tf_reverse_sequence_dense"]
    inlined = revseq.inline(model, target="ncnn-finite", input_shapes=shapes)
    report = revseq.check(model, inlined, backend="ncnn", whole_model=True)
    assert report.ok, report
