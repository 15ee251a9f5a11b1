"""ReverseSequence for onnx2torch: a converter that keeps the op as one torch module.

onnx2torch has no converter for ReverseSequence (ONNX's, or revseq's generalised one in
the ``revseq`` domain: any axes, int32 lengths). With this one registered, a model that
still holds the op converts to a module that reverses with torch's own ops (``arange``,
``where``, ``index_select`` or ``gather``) and reads no tensor's values in Python, so
``torch.compile`` with ``fullgraph=True`` and ``torch.export`` take it with symbolic
dims, the lengths' dim a symbol of its own included, and ExecuTorch runs what
``torch.export`` makes of it. A model inlined by revseq converts too, but onnx2torch's
Range, Squeeze, Reshape and Expand read shapes as values, which neither compiling nor
exporting can trace.

Use :func:`convert` in place of ``onnx2torch.convert``, or call :func:`register` once
before it. Lengths are clamped to ``[0, T]`` as revseq's decompositions clamp them (ONNX
leaves invalid lengths unspecified), so the module and an inlined model agree everywhere.

Needs the ``onnx2torch`` extra (``pip install "onnx-revseq[onnx2torch]"``).
"""

from __future__ import annotations

__all__ = ["ReverseSequence", "convert", "make_importable", "register"]

import contextlib
import math
import sys
import types

import onnx
import torch
from torch import nn

from revseq.ops.vocabulary import REVSEQ_DOMAIN


def make_importable() -> None:
    """Let onnx2torch import where torchvision cannot.

    onnx2torch imports torchvision at import time, for its NonMaxSuppression and RoiAlign
    converters only; PyPI has no CPU build of torchvision that loads beside torch's CPU
    build. Where torchvision cannot be imported, a stand-in module is registered whose
    functions raise if one of those two converters is ever used: no other needs it.
    """
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


make_importable()

import onnx2torch  # noqa: E402
from onnx2torch.node_converters.registry import add_converter  # noqa: E402
from onnx2torch.utils.common import (  # noqa: E402
    OnnxToTorchModule,
    OperationConverterResult,
    onnx_mapping_from_node,
)

# Gathered through a signed view of their bits: torch's CPU gather quiets a signalling
# NaN of float16 and bfloat16, and has no kernel for the wider unsigned types. Only
# these: ExecuTorch takes no such view (``aten.view.dtype`` is not core ATen).
_THROUGH_BITS = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.uint16: torch.int16,
    torch.uint32: torch.int32,
    torch.uint64: torch.int64,
}

# Where ReverseSequence is defined: ONNX's opsets 10 and 28 (bfloat16), revseq's 1.
_VERSIONS = (("", 10), ("", 28), (REVSEQ_DOMAIN, 1))


class ReverseSequence(nn.Module, OnnxToTorchModule):
    """``ReverseSequence(data, sequence_lens)`` along ``batch_axis`` and ``time_axis``.

    ONNX allows the axes 0 and 1, revseq's domain any two distinct axes. The source
    step of each (time, batch) position is ``where(t < L, L - 1 - t, t)``, built as
    ``[B, T]``. Where batch and time are the two leading axes (ONNX's layouts), whole
    rows of the data viewed as ``[T*B, features]`` are taken with ``index_select``: an
    index as small as the lengths allow, and on ExecuTorch's portable kernels 8 to 13
    times faster than its element-wise ``gather`` from 2 MiB of data up (docs/torch.md).
    Under ``torch.compile`` (not exporting), and for other axes, one ``gather`` along
    time with the index broadcast to the data's shape as a view, which inductor fuses
    into its copy.
    """

    def __init__(self, batch_axis: int = 1, time_axis: int = 0):
        super().__init__()
        self.batch_axis = batch_axis
        self.time_axis = time_axis

    def forward(self, data: torch.Tensor, sequence_lens: torch.Tensor) -> torch.Tensor:
        """The data with each batch entry's first ``sequence_lens[b]`` steps reversed."""
        batch_axis, time_axis = self.batch_axis % data.dim(), self.time_axis % data.dim()
        if batch_axis == time_axis:
            raise ValueError(f"batch_axis and time_axis name the same axis, {batch_axis}")
        batch, steps = data.shape[batch_axis], data.shape[time_axis]
        # Taking the lengths at arange(batch) ties their count to the data's batch
        # without a guard, so an export may give the lengths' dim a symbol of its own.
        positions = torch.arange(batch, device=data.device)
        lengths = sequence_lens.index_select(0, positions).to(torch.int64)
        lengths = lengths.clamp(min=0, max=steps).unsqueeze(1)
        time = torch.arange(steps, device=data.device)
        index = torch.where(time < lengths, lengths - 1 - time, time)  # [batch, steps]
        bits = _THROUGH_BITS.get(data.dtype)
        moved = data if bits is None else data.view(bits)
        fused = torch.compiler.is_compiling() and not torch.compiler.is_exporting()
        if {batch_axis, time_axis} == {0, 1} and not fused:
            result = _take_rows(moved, index, positions, time_major=time_axis == 0)
        else:
            if time_axis < batch_axis:
                index = index.transpose(0, 1)
            view = [1] * data.dim()
            view[batch_axis], view[time_axis] = batch, steps
            result = torch.gather(moved, time_axis, index.reshape(view).expand(data.shape))
        return result if bits is None else result.view(data.dtype)

    def extra_repr(self) -> str:
        """The axes, as ``print(module)`` shows them."""
        return f"batch_axis={self.batch_axis}, time_axis={self.time_axis}"


def _take_rows(
    data: torch.Tensor, index: torch.Tensor, positions: torch.Tensor, *, time_major: bool
) -> torch.Tensor:
    """The data's rows (one per time step and batch entry) in the order ``index`` says.

    ``index`` is ``[batch, steps]``; the row of (step t, entry b) is ``t * B + b``
    time-major, ``b * T + t`` batch-major.
    """
    batch, steps = index.shape
    if time_major:
        rows = index * batch + positions.unsqueeze(1)  # [batch, steps]
        rows = rows.transpose(0, 1)
    else:
        rows = index + positions.unsqueeze(1) * steps
    features = math.prod(data.shape[2:])
    flat = data.reshape(data.shape[0] * data.shape[1], features)
    return flat.index_select(0, rows.reshape(-1)).reshape(data.shape)


def _convert_node(node, graph) -> OperationConverterResult:
    del graph
    attributes = node.attributes
    module = ReverseSequence(
        batch_axis=attributes.get("batch_axis", 1), time_axis=attributes.get("time_axis", 0)
    )
    mapping = onnx_mapping_from_node(node)
    return OperationConverterResult(torch_module=module, onnx_mapping=mapping)


_registered = False


def register() -> None:
    """Teach onnx2torch to convert ReverseSequence, ONNX's and revseq's; idempotent."""
    global _registered  # noqa: PLW0603 (onnx2torch's registry is itself process-wide)
    if _registered:
        return
    for domain, version in _VERSIONS:
        # onnx2torch itself, or another package, may convert it already.
        with contextlib.suppress(ValueError):
            add_converter("ReverseSequence", version, domain=domain)(_convert_node)
    _registered = True


def convert(model: onnx.ModelProto | str) -> torch.fx.GraphModule:
    """onnx2torch's conversion of ``model`` (or a path to one), ReverseSequence included."""
    register()
    if isinstance(model, str):
        model = onnx.load(model)
    return onnx2torch.convert(model)
