"""OpenCV's DNN module (``cv2.dnn``): the model read as a Net, run on the CPU.

OpenCV has no ReverseSequence layer. It runs in the worker process alone: importing
cv2 beside onnxruntime in one process has crashed. Each input is set by name and every
declared output asked for by name; what OpenCV does to element types (it keeps 64-bit
integer data in 32 bits, returns float16 as float32) is its profile's business, and the
check shows it as a difference where it happens.
"""

from __future__ import annotations

import tempfile

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, input_names, write_model


def prepare(model: onnx.ModelProto):
    """Read ``model`` as an OpenCV Net; return a function of the inputs by name."""
    import cv2

    with tempfile.TemporaryDirectory() as folder:
        net = cv2.dnn.readNetFromONNX(write_model(model, folder))
    names = input_names(model)
    outputs = [o.name for o in model.graph.output]

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        for name in names:
            net.setInput(np.ascontiguousarray(feeds[name]), name)
        results = net.forward(outputs)
        return [np.asarray(r) for r in results]

    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="opencv-python-headless",
    extra="opencv",
    imports=("cv2",),
    own_process=True,
)
