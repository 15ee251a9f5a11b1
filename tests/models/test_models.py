"""The bundled sample models: reproducible, valid, small, runnable."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import revseq
from revseq.models import FOLDER

BUILD = FOLDER / "build.py"
NAMES = [
    "batch_major.onnx",
    "bidirectional_rnn.onnx",
    "control_flow.onnx",
    "generalized_axes.onnx",
    "opset10.onnx",
]


def _build_module():
    spec = importlib.util.spec_from_file_location("models_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_reproduces_the_committed_files(tmp_path: pathlib.Path):
    written = _build_module().build(tmp_path)
    assert sorted(p.name for p in written) == NAMES
    for path in written:
        assert path.read_bytes() == (FOLDER / path.name).read_bytes(), path.name


@pytest.mark.parametrize("name", NAMES)
def test_sample_model_is_valid_small_and_inlines_exactly(name):
    path = FOLDER / name
    assert path.stat().st_size < 1 << 20
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    if name != "generalized_axes.onnx":  # onnxruntime has no kernel for the revseq domain
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    report = revseq.check(model, revseq.inline(model), trials=2)
    assert report.ok, report


def test_bidirectional_model_reverses_padded_sequences():
    model = onnx.load(FOLDER / "bidirectional_rnn.onnx")
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("ReverseSequence") == 2 and ops.count("RNN") == 2
    session = ort.InferenceSession(str(FOLDER / "bidirectional_rnn.onnx"))
    x = np.random.default_rng(0).standard_normal((6, 2, 4)).astype(np.float32)
    (y,) = session.run(None, {"x": x, "lengths": np.array([6, 3])})
    assert y.shape == (6, 2, 6)
