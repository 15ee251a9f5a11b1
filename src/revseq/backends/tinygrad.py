"""tinygrad: its ``OnnxRunner`` on the CPU device (which compiles kernels with clang)."""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import onnx

from revseq.backends._adapter import write_model

DISTRIBUTION = "tinygrad"
EXTRA = "tinygrad"
IMPORTS = ("tinygrad",)


def missing_requirement() -> str | None:
    """Tinygrad's CPU device compiles every kernel, its own start-up ones too, with clang."""
    if shutil.which("clang") is None:
        return (
            "backend 'tinygrad' cannot run here: its CPU device compiles kernels with "
            "clang, which is not on the PATH (apt-get install clang)"
        )
    return None


def prepare(model: onnx.ModelProto):
    """Convert or compile ``model``; return a function of the inputs by name."""
    os.environ.setdefault("DEV", "CPU")
    from tinygrad.nn.onnx import OnnxRunner

    folder = tempfile.TemporaryDirectory()
    path = write_model(model, folder.name)
    OnnxRunner(path)  # parse once now, so that a model it refuses fails at "convert"
    outputs = [o.name for o in model.graph.output]

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        # An OnnxRunner binds symbolic dims and shape-derived values at its first call
        # and reuses them; a dynamic-shape model must run at every size, so each call
        # gets a fresh one (tinygrad caches compiled kernels itself).
        runner = OnnxRunner(path)
        results = runner(dict(feeds))
        return [results[name].numpy() for name in outputs]

    run.folder = folder  # type: ignore[attr-defined]  # the model file lives as long as run
    return run
