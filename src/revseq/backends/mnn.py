"""MNN: converted with MNN's converter module, run through its ``nn`` Module API.

The converter is called as ``_tools.mnnconvert`` directly: the ``mnnconvert`` command
wrapper installs a logging SDK and posts usage data to a remote server (BACKENDS.md).
MNN's Python API takes float32/64, int8, uint8 and int32 tensors (int64 inputs are fed as
int32, as MNN's converter makes them); other types are refused at run time, which a
profile records as "moves no such type".
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

import numpy as np
import onnx

from revseq.backends._adapter import input_names, write_model

DISTRIBUTION = "mnn"
EXTRA = "mnn"
IMPORTS = ("MNN", "_tools")


def _dtype(array: np.ndarray):
    import MNN.expr as F

    types = {
        np.dtype(np.float32): F.float,
        np.dtype(np.float64): F.double,
        np.dtype(np.int32): F.int,
        np.dtype(np.int64): F.int64,
        np.dtype(np.uint8): F.uint8,
        np.dtype(np.int8): F.int8,
    }
    if array.dtype not in types:
        raise TypeError(f"MNN's Python API takes no {array.dtype} tensors")
    return types[array.dtype]


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """Send what MNN's C++ code prints on stdout and stderr to /dev/null meanwhile."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def prepare(model: onnx.ModelProto):
    """Convert ``model`` to an MNN file and load it; return a function of the inputs."""
    with _silenced():  # importing MNN prints the CPU's features
        import _tools
        import MNN.expr as F
        from MNN import nn

    names = input_names(model)
    outputs = [o.name for o in model.graph.output]
    with tempfile.TemporaryDirectory() as folder:
        source = write_model(model, folder)
        target = os.path.join(folder, "model.mnn")
        with _silenced():
            _tools.mnnconvert(
                ["mnnconvert", "-f", "ONNX", "--modelFile", source, "--MNNModel", target]
            )
        if not os.path.exists(target):
            raise RuntimeError("MNN's converter wrote no model")
        module = nn.load_module_from_file(target, names, outputs)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        # MNN's converter turns int64 graph inputs into int32 ones: feed them so (a
        # value outside int32 then shows up as a wrong result, as it would in MNN).
        arrays = [
            np.ascontiguousarray(feeds[n]).astype(np.int32)
            if feeds[n].dtype == np.int64
            else np.ascontiguousarray(feeds[n])
            for n in names
        ]
        inputs = [F.const(a, list(a.shape), F.NCHW, _dtype(a)) for a in arrays]
        with _silenced():
            results = module.forward(inputs)
        results = results if isinstance(results, list) else [results]
        return [np.array(r.read()) for r in results]

    return run
