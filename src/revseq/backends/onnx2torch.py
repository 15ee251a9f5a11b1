"""onnx2torch: the model converted to a ``torch.fx`` module, run by torch.

The module runs on the CPU unless ``REVSEQ_TORCH_DEVICE`` names another torch device
(``cuda``, ``cuda:1``): then the module, its inputs and its constants live there, and
only the outputs come back to the host to be compared. The test suite's onnx2torch cases
run on a GPU so; ``python -m revseq.bench --backend onnx2torch --device cuda`` times it.

onnx2torch imports torchvision at import time, for its NonMaxSuppression and RoiAlign
converters only; PyPI has no CPU build of torchvision that loads beside torch's CPU build
here. Where torchvision cannot be imported, a stand-in module is registered whose
functions raise if one of those two converters is ever used: no other converter needs it.
"""

from __future__ import annotations

import os
import sys
import types

import numpy as np
import onnx

from revseq.backends._adapter import input_names
from revseq.ops.errors import one_line

DISTRIBUTION = "onnx2torch"
EXTRA = "onnx2torch"
IMPORTS = ("onnx2torch", "torch")
DEVICE_VARIABLE = "REVSEQ_TORCH_DEVICE"


def device_name() -> str:
    """The torch device the modules run on (``REVSEQ_TORCH_DEVICE``, else ``cpu``)."""
    return os.environ.get(DEVICE_VARIABLE, "").strip() or "cpu"


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


def missing_requirement() -> str | None:
    """Why the device ``REVSEQ_TORCH_DEVICE`` names cannot run here, or None."""
    name = device_name()
    problem = None if name == "cpu" else device_problem(name)
    return None if problem is None else f"{DEVICE_VARIABLE}={name}: {problem}"


def _torchvision_stand_in() -> None:
    try:
        import torchvision  # noqa: F401
    except Exception:  # missing, or a build that does not match torch

        def unavailable(*args: object, **kwargs: object) -> None:
            raise RuntimeError("torchvision is not available (NonMaxSuppression, RoiAlign)")

        ops = types.ModuleType("torchvision.ops")
        ops.nms = ops.box_convert = ops.roi_align = unavailable  # type: ignore[attr-defined]
        stand_in = types.ModuleType("torchvision")
        stand_in.ops = ops  # type: ignore[attr-defined]
        sys.modules["torchvision"] = stand_in
        sys.modules["torchvision.ops"] = ops


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
    _torchvision_stand_in()
    from onnx2torch import convert as onnx2torch_convert

    return onnx2torch_convert(model)


def prepare(model: onnx.ModelProto):
    """Convert or compile ``model``; return a function of the inputs by name."""
    import torch

    device = torch.device(device_name())
    module = convert(model).to(device)
    names = input_names(model)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with torch.no_grad():
            outputs = module(*[to_torch(feeds[n]).to(device) for n in names])
        if not isinstance(outputs, (tuple, list)):
            outputs = [outputs]
        return [to_numpy(o.cpu()) for o in outputs]

    return run
