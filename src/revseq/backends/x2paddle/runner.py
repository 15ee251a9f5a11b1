"""x2paddle: the model converted to a Paddle inference model, run by PaddlePaddle.

Served in the environment ``REVSEQ_X2PADDLE_PYTHON`` names (x2paddle 1.6 reads
``onnx.version``, which onnx 1.18 and later lack: it needs onnx 1.17). The converter
writes Python code and parameters, then a static inference model, which
``paddle.jit.load`` runs with the inputs in the model's order (those a node reads: the
converter drops the others). Its feedback to a remote
server is off.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np


def prepare(model_bytes: bytes):
    """Convert the model; returns a function of the inputs by name."""
    import onnx
    import paddle
    from x2paddle.convert import onnx2paddle

    model = onnx.load_from_string(model_bytes)
    initializers = {t.name for t in model.graph.initializer}
    read = {name for node in model.graph.node for name in node.input}
    # x2paddle drops the inputs no node reads: the Paddle model takes the others.
    names = [i.name for i in model.graph.input if i.name in read - initializers]
    # Each conversion names its parameters afresh: a second model with a Constant of
    # the same name is refused in one process otherwise.
    with (
        tempfile.TemporaryDirectory(prefix="revseq-x2paddle-") as folder,
        paddle.utils.unique_name.guard(),
    ):
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as f:
            f.write(model_bytes)
        onnx2paddle(path, os.path.join(folder, "paddle"), disable_feedback=True)
        saved = os.path.join(folder, "paddle", "inference_model", "model")
        if not os.path.exists(saved + ".json") and not os.path.exists(saved + ".pdmodel"):
            raise RuntimeError("x2paddle wrote no inference model (its log says why)")
        layer = paddle.jit.load(saved)
    layer.eval()

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        outputs = layer(*(paddle.to_tensor(np.ascontiguousarray(feeds[n])) for n in names))
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        return [o.numpy() for o in outputs]

    return run
