"""onnx2torch on a CUDA device: the converted module, its constants and its inputs there.

A backend of its own (``onnx2torch-cuda``), not onnx2torch with a device variable:
torch's CUDA kernels move other element types than its CPU ones (advanced indexing,
which onnx2torch's Gather and GatherND are, has no uint16, uint32 or uint64 on CUDA;
``torch.gather``, its GatherElements, has them there and not on the CPU), and each
module costs a launch and, for some converters, host round trips (a Reshape reads its
shape element by element), so what runs exactly and what is cheapest differ. Its probe
records both, for ``target="onnx2torch-cuda"``.

Its data is **resident**: a timed runner (``prepare_repeated``) copies its inputs to
the device once and, called again with the same arrays, runs the module on those and
synchronises the device, as a pipeline whose tensors live there does; its floor is the
device's own copy (an Identity), not numpy's copy on the host.
"""

from __future__ import annotations

import importlib.metadata
import os

import numpy as np
import onnx

from revseq.backends import onnx2torch
from revseq.backends._adapter import Adapter, input_names

DISTRIBUTION = "onnx2torch"
DEVICE = "cuda"
DEVICE_VARIABLE = "REVSEQ_CUDA_DEVICE"


def device_name() -> str:
    """The torch device: ``REVSEQ_CUDA_DEVICE`` (``cuda:1``, say), else ``cuda``."""
    return os.environ.get(DEVICE_VARIABLE, "").strip() or DEVICE


def version() -> str:
    """onnx2torch's version, with torch's and the device's."""
    import torch

    name = onnx2torch.device_label(torch.device(device_name()))
    return f"{importlib.metadata.version(DISTRIBUTION)} (torch {torch.__version__}, {name})"


def missing_requirement() -> str | None:
    """Why CUDA cannot run here (a CPU build of torch, no GPU), or None."""
    problem = onnx2torch.device_problem(device_name())
    return None if problem is None else f"onnx2torch-cuda: {problem}"


def prepare(model: onnx.ModelProto):
    """The module on the device; each call moves its inputs there and its outputs back."""
    return onnx2torch.prepare(model, device=device_name())


def prepare_repeated(model: onnx.ModelProto):
    """A timed runner: the inputs stay on the device between calls with the same arrays.

    The first call with a set of arrays copies them there, runs the module and brings
    its outputs back; a later call with the very same arrays (held, so that no other
    array takes their identity; a timing loop's, which it does not change) runs the
    module on the device's copies, synchronises the device, and returns those first
    outputs. A call with other arrays starts again.
    """
    import torch

    where = torch.device(device_name())
    module = onnx2torch.convert(model).to(where)
    names = input_names(model)
    last = _Resident()

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        arrays = [feeds[n] for n in names]
        with torch.no_grad():
            if last.holds(arrays):
                module(*last.args)
                onnx2torch.synchronise(where)
                return last.outputs
            args = [onnx2torch.to_torch(a).to(where) for a in arrays]
            outputs = onnx2torch.on_host(module(*args))
        last.arrays, last.args, last.outputs = arrays, args, outputs
        return outputs

    return run


class _Resident:
    """A timed runner's last new arrays, their copies on the device, its outputs then."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.args: list = []
        self.outputs: list[np.ndarray] = []

    def holds(self, arrays: list[np.ndarray]) -> bool:
        return bool(self.arrays) and all(
            a is b for a, b in zip(arrays, self.arrays, strict=True)
        )


ADAPTER = Adapter(
    prepare=prepare,
    distribution=DISTRIBUTION,
    extra="onnx2torch",
    imports=("onnx2torch", "torch"),
    version=version,
    missing_requirement=missing_requirement,
    prepare_repeated=prepare_repeated,
    resident=True,
)
