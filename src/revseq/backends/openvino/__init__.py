"""OpenVINO, CPU plugin: a control that has the op (any axes, any integer lengths).

Precision is pinned to f32 so that the CPU plugin does not run float models in bf16 or
f16 on hardware that has them: a bit-exact comparison needs the declared types.
"""

from __future__ import annotations

import tempfile

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, input_names, write_model


def prepare(model: onnx.ModelProto):
    """Convert or compile ``model``; return a function of the inputs by name."""
    import openvino as ov

    core = ov.Core()
    with tempfile.TemporaryDirectory() as folder:
        ov_model = core.read_model(write_model(model, folder))
    compiled = core.compile_model(ov_model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    names = input_names(model)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        results = compiled([feeds[n] for n in names])
        return [np.array(results[output]) for output in compiled.outputs]

    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="openvino",
    extra="openvino",
    imports=("openvino",),
)
