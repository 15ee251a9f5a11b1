"""tinygrad: its ``OnnxRunner`` on the CPU device (which compiles kernels with clang)."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx

from revseq.backends._adapter import write_model

DISTRIBUTION = "tinygrad"
EXTRA = "tinygrad"
IMPORTS = ("tinygrad",)


def prepare(model: onnx.ModelProto):
    """Convert or compile ``model``; return a function of the inputs by name."""
    os.environ.setdefault("DEV", "CPU")
    from tinygrad.nn.onnx import OnnxRunner

    with tempfile.TemporaryDirectory() as folder:
        runner = OnnxRunner(write_model(model, folder))
    outputs = [o.name for o in model.graph.output]

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        # OnnxRunner binds each symbolic dim at the first call and refuses other sizes
        # later; a dynamic-shape model must run at every size, so the binding is reset.
        runner.variable_dims.clear()
        results = runner(dict(feeds))
        return [results[name].numpy() for name in outputs]

    return run
