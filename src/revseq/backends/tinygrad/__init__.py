"""tinygrad: its ``OnnxRunner`` on the CPU device (which compiles kernels with clang).

Checks run each call on a fresh runner; timings (``prepare_repeated``) run the model as
tinygrad's own ONNX benchmark does, under ``TinyJit``, which replays the kernels it
captured instead of scheduling every op again in Python.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, write_model


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


def prepare_repeated(model: onnx.ModelProto):
    """``prepare`` for a runner called again and again: one jitted runner per input shapes.

    Each set of input shapes gets its own ``OnnxRunner`` (which binds shape-derived
    values at its first call) under ``TinyJit`` (which captures the kernels at its second
    call and replays them after). A model that launches no kernel (an Identity) has
    nothing to capture and runs on its runner alone.
    """
    os.environ.setdefault("DEV", "CPU")
    from tinygrad import Tensor, TinyJit
    from tinygrad.engine.jit import JitError
    from tinygrad.nn.onnx import OnnxRunner

    folder = tempfile.TemporaryDirectory()
    path = write_model(model, folder.name)
    OnnxRunner(path)
    outputs = [o.name for o in model.graph.output]
    by_shapes: dict[tuple, object] = {}

    def jitted():
        runner = OnnxRunner(path)

        def step(**inputs):
            results = runner(inputs)
            return tuple(results[name].realize() for name in outputs)

        jit = TinyJit(step)

        def call(feeds: dict[str, np.ndarray]):
            tensors = {name: Tensor(value) for name, value in feeds.items()}
            if call.plain:
                return step(**tensors)
            try:
                return jit(**tensors)
            except JitError:  # nothing to capture: no kernel ran
                call.plain = True
                return step(**tensors)

        call.plain = False
        return call

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        key = tuple((name, value.shape, value.dtype.str) for name, value in feeds.items())
        if key not in by_shapes:
            by_shapes[key] = jitted()
        return [result.numpy() for result in by_shapes[key](dict(feeds))]

    run.folder = folder  # type: ignore[attr-defined]
    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="tinygrad",
    extra="tinygrad",
    imports=("tinygrad",),
    missing_requirement=missing_requirement,
    prepare_repeated=prepare_repeated,
)
