"""Tencent's ncnn, the model converted by pnnx (its ONNX path), run by ncnn's Python API.

pnnx converts for fixed input shapes, so a model is converted again for each new set of
shapes it is run on. pnnx's own onnxruntime reads IR versions up to 13: the model is
saved with the lowest IR version its opsets allow. pnnx turns int64 inputs into
int32 (fed as int32: the values must fit), and ncnn's ``Mat`` holds 32-bit elements:
float32 and int32 inputs only, other types refused at run time, which a profile records
as "moves no such type". Outputs come back as float32 bits: a declared int32 or int64
output is read as the int32 it holds. Mats of 3 and 4 dims are filled and read channel
by channel: ncnn pads each channel to 16 bytes. Storage and arithmetic in float16 are off.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import tempfile

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, input_names, lowest_ir

_PNNX_TYPES = {np.dtype(t): name for t, name in ((np.float32, "f32"), (np.int32, "i32"))}
_PNNX_TYPES[np.dtype(np.int64)] = "i64"  # declared so; pnnx makes it int32
_KEPT = 4  # converted nets kept, per model


def version() -> str:
    """The versions of ncnn and of pnnx."""
    return f"{importlib.metadata.version('ncnn')} (pnnx {importlib.metadata.version('pnnx')})"


def _pnnx() -> str:
    """The path of the pnnx executable, found without importing pnnx (it imports torch)."""
    spec = importlib.util.find_spec("pnnx")
    assert spec is not None and spec.submodule_search_locations, "checked by IMPORTS"
    return os.path.join(next(iter(spec.submodule_search_locations)), "pnnx")


def _convert(model: onnx.ModelProto, arrays: list[np.ndarray], folder: str):
    import ncnn

    path = os.path.join(folder, "model.onnx")
    onnx.save(lowest_ir(model), path)
    shapes = ",".join(
        f"[{','.join(str(d) for d in a.shape)}]{_PNNX_TYPES[a.dtype]}" for a in arrays
    )
    done = subprocess.run(
        [_pnnx(), path, f"inputshape={shapes}", "fp16=0"],
        check=False,
        capture_output=True,
        text=True,
        cwd=folder,
    )
    param = os.path.join(folder, "model.ncnn.param")
    if done.returncode != 0 or not os.path.exists(param):
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {done.returncode}"
        raise RuntimeError(f"pnnx failed: {why[:300]}")
    net = ncnn.Net()
    for option in ("use_fp16_storage", "use_fp16_arithmetic", "use_fp16_packed"):
        setattr(net.opt, option, False)
    with open(param) as f:
        text = f.read()
    layers = [line.split()[0] for line in text.splitlines()[2:] if line.strip()]
    lacking = sorted({t for t in layers if ncnn.layer_to_index(t) < 0})
    if lacking:
        raise RuntimeError(f"{_LACKS}{', '.join(lacking)}")
    if net.load_param(param) != 0 or net.load_model(os.path.join(folder, "model.ncnn.bin")):
        raise RuntimeError("ncnn could not load pnnx's model")
    return net


_LACKS = "pnnx wrote layers ncnn lacks: "

_PNNX_LAYERS = {
    "pnnx.Expression": frozenset({"Add", "Sub", "Mul", "Div", "Neg", "Mod"}),
    "torch.arange": frozenset({"Range"}),
    "torch.lt": frozenset({"Less"}),
    "torch.ones": frozenset({"ConstantOfShape"}),
    "torch.squeeze": frozenset({"Squeeze"}),
    "torch.sum": frozenset({"ReduceSum"}),
    "torch.where": frozenset({"Where"}),
    "Tensor.reshape": frozenset({"Reshape"}),
    "Tensor.to": frozenset({"Cast"}),
}
"""The ONNX op types each of pnnx's layers stands for (its arithmetic on shapes and
indices is one expression); a layer named as an ONNX op is that op."""


def lacking_named(failure: str) -> frozenset[str] | None:
    """The ONNX op types of the layers pnnx wrote that ncnn lacks, as the failure says.

    None where it names none, or one not known here (then it says nothing of which).
    """
    _, found, listed = failure.partition(_LACKS)
    if not found:
        return None
    named: set[str] = set()
    for layer in (name.strip() for name in listed.split(",")):
        if layer in _PNNX_LAYERS:
            named |= _PNNX_LAYERS[layer]
        elif layer.isidentifier() and onnx.defs.has(layer):
            named.add(layer)
        else:
            return None
    return frozenset(named)


def _mat(array: np.ndarray):
    """A Mat holding a copy of ``array``, its channels padded as ncnn's layers read them.

    A Mat made from a numpy array of 3 or 4 dims keeps its channels unpadded, which a
    layer then reads at the padded stride (wrong values, without an error); one made
    from a 1-D array crashed ncnn's first layer to read it.
    """
    import ncnn

    if array.ndim > 4:
        raise TypeError(f"ncnn's Mat holds at most 4 dims, not {array.ndim}")
    bits = array.view(np.float32) if array.dtype == np.int32 else array
    if array.ndim <= 2:
        mat = ncnn.Mat(*reversed(array.shape or (1,)))  # w[, h]
        np.array(mat, copy=False)[...] = bits.reshape(array.shape or (1,))
        return mat
    channels, *inner = array.shape
    mat = ncnn.Mat(*reversed(inner), channels)  # w, h[, d], c
    for channel in range(channels):
        np.array(mat.channel(channel), copy=False)[...] = bits[channel]
    return mat


def _array(mat) -> np.ndarray:
    """A Mat as numpy, channel by channel.

    ncnn pads each channel of the Mats its layers make to 16 bytes (``cstep``), which
    a plain conversion reads as data.
    """
    if mat.dims < 3:
        return np.array(mat)
    return np.stack([np.array(mat.channel(i)) for i in range(mat.c)])


def prepare(model: onnx.ModelProto):
    """Convert ``model`` with pnnx for each set of input shapes; run it with ncnn."""
    names = input_names(model)  # pnnx names them in0, in1, ... in this order
    declared = [o.type.tensor_type.elem_type for o in model.graph.output]
    nets: dict[tuple, tuple] = {}
    folder = tempfile.TemporaryDirectory(prefix="revseq-ncnn-")

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        given = [np.ascontiguousarray(feeds[name]) for name in names]
        for array in given:
            if array.dtype not in _PNNX_TYPES:
                raise TypeError(f"ncnn's Mat takes float32 and int32 only, not {array.dtype}")
        # pnnx is told the declared types; it makes int64 inputs int32, fed as such.
        arrays = [a.astype(np.int32) if a.dtype == np.int64 else a for a in given]
        key = tuple((a.shape, a.dtype.str) for a in given)
        if key not in nets:
            while len(nets) >= _KEPT:
                nets.pop(next(iter(nets)))
            sub = os.path.join(folder.name, str(len(os.listdir(folder.name))))
            os.makedirs(sub)
            nets[key] = _convert(model, given, sub)
        net = nets[key]
        extractor = net.create_extractor()
        for index, array in enumerate(arrays):
            extractor.input(f"in{index}", _mat(array))
        outputs = []
        for index, elem in enumerate(declared):
            status, mat = extractor.extract(f"out{index}")
            if status != 0:
                raise RuntimeError(f"ncnn extract of output {index} failed (status {status})")
            out = _array(mat)
            if elem in (onnx.TensorProto.INT32, onnx.TensorProto.INT64):
                out = out.view(np.int32)
            outputs.append(out)
        return outputs

    run.folder = folder  # type: ignore[attr-defined]  # removed with the runner
    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="ncnn",
    extra="ncnn",
    imports=("ncnn", "pnnx"),
    version=version,
    survives_failures=True,
    lacking_named=lacking_named,
)
