"""onnxruntime, CPU execution provider: the control (it has the op), one thread."""

from __future__ import annotations

import numpy as np
import onnx

from revseq.backends._adapter import Adapter


def prepare(model: onnx.ModelProto, *, optimize: bool = True):
    """A session with graph optimisations all on (or all off)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    # Fatal only: a failing kernel is logged at error level, then raised with the same
    # words (the user's one-line error), so error level printed it twice.
    options.log_severity_level = 4
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if optimize
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return session.run(None, feeds)

    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="onnxruntime",
    extra="onnxruntime",
    imports=("onnxruntime",),
)
