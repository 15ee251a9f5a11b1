"""Sonos tract, through its Python bindings: loaded, typed, optimised, run."""

from __future__ import annotations

import tempfile

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, input_names, write_model


def prepare(model: onnx.ModelProto):
    """Convert or compile ``model``; return a function of the inputs by name."""
    import tract

    with tempfile.TemporaryDirectory() as folder:
        inference_model = tract.onnx().load(write_model(model, folder))
    runnable = inference_model.into_model().into_runnable()
    names = input_names(model)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        results = runnable.run([np.ascontiguousarray(feeds[n]) for n in names])
        return [r.to_numpy() for r in results]

    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="tract",
    extra="tract",
    imports=("tract",),
)
