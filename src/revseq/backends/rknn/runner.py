"""RKNN-Toolkit2's simulator: the model built for a Rockchip NPU, run on this machine.

Served in the environment ``REVSEQ_RKNN_PYTHON`` names (the toolkit pins numpy 1, onnx
1.18 and protobuf 4). RKNN builds a model for fixed input shapes: it is built again for
each new set of shapes it is run on, its inputs' dims fixed to the sizes given.
Quantisation is off: the NPU then stores floats as float16, which its profile says.
The toolkit hands every float output over as float32: a float16 output is read back as
float16 (exact for every float16 value; a signalling NaN has come back quiet by then).
"""

from __future__ import annotations

import collections
import os
import tempfile

import numpy as np

PLATFORM = os.environ.get("REVSEQ_RKNN_PLATFORM", "rk3588")
_BUILT_KEPT = 4  # each build holds a simulator session


def _at_shapes(model_bytes: bytes, names: list[str], shapes) -> bytes:
    """The model with its inputs' dims fixed to ``shapes`` (RKNN builds for fixed ones)."""
    import onnx

    model = onnx.load_from_string(model_bytes)
    sizes = dict(zip(names, shapes, strict=True))
    for value in model.graph.input:
        if value.name in sizes:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, sizes[value.name], strict=True):
                dim.Clear()
                dim.dim_value = size
    return model.SerializeToString()


def _last_line(error: Exception) -> str:
    """The toolkit's message: its errors carry a traceback, the message last."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _build(model_bytes: bytes, names: list[str], shapes: tuple[tuple[int, ...], ...]):
    from rknn.api import RKNN

    rknn = RKNN(verbose=False)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as f:
            f.write(_at_shapes(model_bytes, names, shapes))
        rknn.config(target_platform=PLATFORM)
        steps = (
            ("load_onnx", lambda: rknn.load_onnx(path)),
            ("build", lambda: rknn.build(do_quantization=False)),
            ("init_runtime", rknn.init_runtime),
        )
        for step, call in steps:
            try:
                status = call()
            except ValueError as e:
                rknn.release()
                raise RuntimeError(f"RKNN {step}: {_last_line(e)}") from None
            if status != 0:
                rknn.release()
                raise RuntimeError(f"RKNN {step} failed (status {status}; its log says why)")
    return rknn


def prepare(model_bytes: bytes):
    """A function that runs the model on inputs by name, built for their shapes."""
    import onnx

    model = onnx.load_from_string(model_bytes)
    initializers = {t.name for t in model.graph.initializer}
    read = {name for node in model.graph.node for name in node.input}
    # RKNN drops the inputs no node reads: the built model takes the others.
    names = [i.name for i in model.graph.input if i.name in read - initializers]
    half = onnx.TensorProto.FLOAT16
    halves = [o.type.tensor_type.elem_type == half for o in model.graph.output]
    built: collections.OrderedDict = collections.OrderedDict()

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        arrays = [np.ascontiguousarray(feeds[name]) for name in names]
        shapes = tuple(a.shape for a in arrays)
        if shapes not in built:
            built[shapes] = _build(model_bytes, names, shapes)
            while len(built) > _BUILT_KEPT:
                built.popitem(last=False)[1].release()
        built.move_to_end(shapes)
        try:
            outputs = built[shapes].inference(inputs=arrays, data_format="nchw")
        except ValueError as e:
            raise RuntimeError(f"RKNN inference: {_last_line(e)}") from None
        if outputs is None:
            raise RuntimeError("RKNN inference returned nothing (its log says why)")
        return [
            np.asarray(o).astype(np.float16) if half and o.dtype == np.float32 else o
            for o, half in zip(outputs, halves, strict=True)
        ]

    return run
