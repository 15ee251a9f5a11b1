"""The torch page's ExecuTorch columns: programs run by ExecuTorch's runtime on the CPU.

The converter's module, the hand-written gather and the one form XNNPACK takes whole
(``one_hot``: a batched product with a 0/1 matrix, exact on finite float32 data without
-0.0 only), each exported with the row's dims, lowered with the XNNPACK delegate
(``executorch.program_runner``) and checked bit for bit before it is timed.
"""

from __future__ import annotations

__all__ = ["EXECUTORCH", "executorch_variants", "one_hot"]

from collections.abc import Callable

import numpy as np
import onnx

from revseq import backends
from revseq.backends import onnx2torch
from revseq.errors import one_line
from revseq.measure._cases import Case
from revseq.measure._timing import Unusable

EXECUTORCH = ("ExecuTorch converter", "ExecuTorch torch gather", "ExecuTorch one-hot")


def one_hot(case: Case) -> Callable:
    """The op as a batched product with a 0/1 matrix, for the case's layout: (x, lens).

    Row t of entry b's ``[T, T]`` matrix is 1 at ``src(t)``, computed in float32 with
    clamp, sub, mul, add, abs and relu: every op XNNPACK takes. Exact on finite float32
    data without -0.0 only (``0 * inf`` is NaN, ``-0.0 + 0.0`` is ``+0.0``).
    """
    import torch

    def product(x, lens):
        entries = x.transpose(0, 1) if case.time_axis == 0 else x  # [B, T, ...]
        batch, steps = entries.shape[0], entries.shape[1]
        grid = torch.arange(steps, dtype=torch.float32, device=x.device)
        column = lens.to(torch.float32).clamp(0, steps).unsqueeze(1)  # [B, 1]
        inside = (column - grid).clamp(0, 1)  # 1 where t < L
        source = grid + inside * (column - 1 - 2 * grid)  # [B, T]
        picks = torch.relu(1 - (source.unsqueeze(2) - grid.view(1, 1, steps)).abs())
        flat = entries.reshape(batch, steps, -1)
        moved = torch.bmm(picks, flat).reshape(entries.shape)
        return moved.transpose(0, 1) if case.time_axis == 0 else moved

    return product


def _as_module(function: Callable):
    """A function of (x, lens) as the torch module ``torch.export`` takes."""
    import torch

    class Function(torch.nn.Module):
        def forward(self, x, lens):
            return function(x, lens)

    return Function()


def executorch_variants(
    model: onnx.ModelProto,
    case: Case,
    feeds: dict[str, np.ndarray],
    exact: Callable[[Callable[[], object]], None],
    gather: Callable,
) -> tuple[dict[str, list[Callable[[], object]]], dict[str, str]]:
    """The converter's module, the hand-written ``gather`` and the one-hot on ExecuTorch.

    Each exported with ``model``'s dims bounded at the row's sizes and lowered with
    XNNPACK (``executorch.program_runner``), checked bit for bit; a variant that fails or
    differs gets a note instead.
    """
    from revseq.backends import executorch
    from revseq.backends.onnx2torch import converter

    modules = {
        EXECUTORCH[0]: converter.convert(model),
        EXECUTORCH[1]: _as_module(gather),
        EXECUTORCH[2]: _as_module(one_hot(case)),
    }
    variants: dict[str, list[Callable[[], object]]] = {}
    notes: dict[str, str] = {}
    for label, module in modules.items():
        runner = executorch.program_runner(module, model, growth=1)
        call = lambda r=runner: onnx2torch.to_torch(r(feeds)[0])  # noqa: E731
        try:
            exact(call)
        except Unusable as e:
            notes[label] = str(e)
            continue
        except backends.BackendError as e:  # the export or the lowering refused it
            notes[label] = e.detail.split(". ")[0]  # its first sentence
            continue
        except RuntimeError as e:  # ExecuTorch's runtime failed to run it
            notes[label] = one_line(e, typed=True)
            continue
        variants[label] = [call]
    return variants, notes
