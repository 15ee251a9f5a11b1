"""onnx2torch: the model converted to a ``torch.fx`` module, run by torch on the CPU.

On a CUDA device it is another backend, ``onnx2torch-cuda`` (its kernels move other
types, :mod:`revseq.backends.onnx2torch_cuda`), which builds on the helpers here.

This is onnx2torch as users install it: without revseq's ReverseSequence converter
(:mod:`revseq.backends.onnx2torch.converter`), whose module is imported here only to let
onnx2torch import where torchvision cannot (``make_importable``).
"""

from __future__ import annotations

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, input_names
from revseq.errors import one_line

DISTRIBUTION = "onnx2torch"


def device_problem(name: str) -> str | None:
    """Why torch cannot use device ``name`` here, or None.

    A malformed name, or a device this torch cannot reach (CUDA on a CPU build).
    """
    import torch

    try:
        torch.empty(1, device=torch.device(name))
    except Exception as e:  # torch raises RuntimeError or ValueError, by the cause
        return f"torch cannot use device {name!r} ({one_line(e)})"
    return None


def device_label(where) -> str:
    """What a torch device is, for a report: a GPU's name, else the device's type."""
    import torch

    return torch.cuda.get_device_name(where) if where.type == "cuda" else where.type


def synchronise(where) -> None:
    """Wait until the torch device ``where`` has finished its work (a no-op off CUDA)."""
    import torch

    if where.type == "cuda":
        torch.cuda.synchronize(where)


def to_torch(array: np.ndarray):
    """A torch tensor with the array's bytes (bfloat16 through a 16-bit view)."""
    import torch

    if array.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(array).view(np.uint16)).view(
            torch.bfloat16
        )
    return torch.from_numpy(np.ascontiguousarray(array))


def to_numpy(tensor) -> np.ndarray:
    """The tensor's bytes as numpy (bfloat16 as ml_dtypes.bfloat16)."""
    import torch

    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def convert(model: onnx.ModelProto):
    """The ``torch.fx.GraphModule`` onnx2torch makes of ``model``."""
    from revseq.backends.onnx2torch.converter import make_importable

    make_importable()  # registers nothing: revseq's converter is registered on request
    from onnx2torch import convert as onnx2torch_convert

    return onnx2torch_convert(model)


def prepare(model: onnx.ModelProto, *, device: str = "cpu"):
    """The module on torch ``device``; each call moves its inputs there, outputs back."""
    import torch

    where = torch.device(device)
    module = convert(model).to(where)
    names = input_names(model)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with torch.no_grad():
            args = [to_torch(feeds[n]).to(where) for n in names]
            return on_host(module(*args))

    return run


def on_host(outputs) -> list[np.ndarray]:
    """A module's outputs (one output comes as a tensor) as numpy arrays on the host."""
    listed = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return [to_numpy(o.cpu()) for o in listed]


ADAPTER = Adapter(
    prepare=prepare,
    distribution=DISTRIBUTION,
    extra="onnx2torch",
    imports=("onnx2torch", "torch"),
)
