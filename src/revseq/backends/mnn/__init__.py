"""MNN: converted with MNN's converter module, run through its ``nn`` Module API.

The converter is called as ``_tools.mnnconvert`` directly: the ``mnnconvert`` command
wrapper installs a logging SDK and posts usage data to a remote server. MNN's Python API
takes float32/64, int8, uint8 and int32 tensors: int64 inputs are fed as int32, as MNN's
converter makes them, and bool inputs and outputs travel as int32 through a Cast in the
model (0 and 1 each way: no value changes); other types are refused at run time, which a
profile records as "moves no such type". A module is loaded for each set of input
shapes: one module run at a smaller shape after a larger one has been seen to give
wrong values (tf2onnx's masked GRU at [3, 7] then [1, 1]). Empty inputs go through the
module loaded last: a module loaded afresh cannot read an empty output.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, input_names, write_model


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


_INT32 = onnx.TensorProto.INT32
_BOOL = onnx.TensorProto.BOOL


def _elem(info: onnx.ValueInfoProto) -> int:
    return info.type.tensor_type.elem_type


def _bools_as_int32(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[bool]]:
    """``model`` taking and giving int32 where it takes and gives bool, and which outputs.

    A Cast to bool after each such input and one to int32 before each such output.
    """
    bools_in = [i.name for i in model.graph.input if _elem(i) == _BOOL]
    bools_out = [_elem(o) == _BOOL for o in model.graph.output]
    if not bools_in and not any(bools_out):
        return model, bools_out
    wrapped = onnx.ModelProto()
    wrapped.CopyFrom(model)
    graph = wrapped.graph
    casts = []
    for info in graph.input:
        if info.name in bools_in:
            outer = f"{info.name}/as_int32"
            for node in graph.node:
                node.input[:] = [outer if n == info.name else n for n in node.input]
            casts.append(onnx.helper.make_node("Cast", [info.name], [outer], to=_BOOL))
            info.type.tensor_type.elem_type = _INT32
    for i, cast in enumerate(casts):  # first, in the inputs' order
        graph.node.insert(i, cast)
    for info, is_bool in zip(graph.output, bools_out, strict=True):
        if is_bool:
            inner = info.name
            info.name = f"{inner}/as_int32"
            info.type.tensor_type.elem_type = _INT32
            graph.node.append(onnx.helper.make_node("Cast", [inner], [info.name], to=_INT32))
    return wrapped, bools_out


def prepare(model: onnx.ModelProto):
    """Convert ``model`` to an MNN file; return a function of the inputs.

    The file is loaded as a module once per set of input shapes (empty inputs take the
    last one), the folder holding it kept as long as the function.
    """
    with _silenced():  # importing MNN prints the CPU's features
        import _tools
        import MNN.expr as F
        from MNN import nn

    model, bools_out = _bools_as_int32(model)
    names = input_names(model)
    outputs = [o.name for o in model.graph.output]
    folder = tempfile.TemporaryDirectory()
    source = write_model(model, folder.name)
    target = os.path.join(folder.name, "model.mnn")
    with _silenced():
        _tools.mnnconvert(
            ["mnnconvert", "-f", "ONNX", "--modelFile", source, "--MNNModel", target]
        )
    if not os.path.exists(target):
        raise RuntimeError("MNN's converter wrote no model")
    modules: dict[tuple, object] = {}

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        # MNN's converter turns int64 graph inputs into int32 ones: feed them so (a
        # value outside int32 then shows up as a wrong result, as it would in MNN).
        arrays = [
            np.ascontiguousarray(feeds[n]).astype(np.int32)
            if feeds[n].dtype in (np.int64, np.bool_)
            else np.ascontiguousarray(feeds[n])
            for n in names
        ]
        shapes = tuple(a.shape for a in arrays)
        module = modules.get(shapes)
        if module is None and modules and any(a.size == 0 for a in arrays):
            module = next(reversed(modules.values()))
        if module is None:
            module = modules[shapes] = nn.load_module_from_file(target, names, outputs)
        inputs = [F.const(a, list(a.shape), F.NCHW, _dtype(a)) for a in arrays]
        with _silenced():
            results = module.forward(inputs)
        results = results if isinstance(results, list) else [results]
        arrays = [np.array(r.read()) for r in results]
        if len(arrays) != len(bools_out):  # a failed forward: the adapter wrapper says so
            return arrays
        return [a != 0 if is_bool else a for a, is_bool in zip(arrays, bools_out, strict=True)]

    run.folder = folder  # type: ignore[attr-defined]  # removed with the function
    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="mnn",
    extra="mnn",
    imports=("MNN", "_tools"),
)
