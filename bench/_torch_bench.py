"""``python -m bench.bench --backend onnx2torch --device cuda``: torch on a device.

On a GPU the data lives on the device: a model there is called with tensors already on
it, and its time is what a caller waits for, the device synchronised after each call (so
onnx2torch's Python and any host round trip its converted ops make are in it, as they
are for a user). The floor is a copy of the data on the device (``clone``). Beside it,
two hand-written torch versions of the op, what a user who writes the op in torch gets:
``torch gather`` (``where(t < L, L-1-t, t)`` then ``torch.gather`` with that index
expanded over the features) and ``torch rows`` (the same steps as row numbers of the
data viewed as rows of features, then ``index_select``). Every output is checked against
the numpy reference, bit for bit, before it is timed. The same rounds, medians and
passes as the other pages (``placed_medians``, ``median_of_passes``).
"""

from __future__ import annotations

__all__ = [
    "DEVICE_SUITE",
    "DeviceTimer",
    "PAGE_INTRO",
    "device_context",
    "format_device",
    "hand_written",
    "own_target",
    "synchronised",
    "unusable_device",
]

import dataclasses
import importlib.metadata
import statistics
from collections.abc import Callable

import numpy as np
import onnx

import revseq
from bench import _backend_bench as _bench_backend
from bench._executorch_bench import EXECUTORCH, executorch_variants
from revseq import backends
from revseq.backends import onnx2torch
from revseq.errors import one_line
from revseq.measure._cases import Case, native_model
from revseq.measure._timing import (
    PLACEMENTS,
    Models,
    Timed,
    Unusable,
    time_variants,
)
from revseq.ops.forms import FORMS
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import TARGETS

DEVICE_SUITE: tuple[Case, ...] = (
    *_bench_backend.BACKEND_SUITE,
    Case((64, 256, 1024), 1, 0, "float32"),
)
"""The backend suite and the 64 MiB shape a GPU user's baseline was measured on."""

PAGE_INTRO = """\
onnx2torch's converted modules run by torch on the device named, the data resident
there. Each cell is a variant's median time per call, the device synchronised after it,
over a **copy of the data on the device** (`clone`) in the same rounds; node counts in
brackets. `torch gather` and `torch rows` are the op written directly in torch (an index
`where(t < L, L-1-t, t)`, then `torch.gather` with it expanded over the features, or
`index_select` of the data's rows): what a user gets without ONNX. `converter` is the
model that keeps the op, converted with revseq's ReverseSequence converter
(`revseq.backends.onnx2torch.converter`), and `converter compiled` that module compiled with
`torch.compile(fullgraph=True)` (inductor; dynamic where dims are symbolic);
`torch gather compiled` the hand-written gather compiled alike. On the CPU, where
executorch is installed, the `ExecuTorch` columns are programs exported with the row's
symbolic dims, lowered with the XNNPACK delegate and run by ExecuTorch's runtime (its
Python binding, numpy in and out): `ExecuTorch converter` the converter's module (its
`index_select` runs on the portable kernels: XNNPACK takes no gather), `ExecuTorch
torch gather` the hand-written gather, `ExecuTorch one-hot` each entry's steps
multiplied by a 0/1 matrix computed from the lengths in float32 (`bmm`), the one form
XNNPACK takes whole (with static dims: its reshape takes one symbolic dim), exact on
finite float32 data without -0.0 only (the page's data is such). `default` is the
output with no target, `own target` the output for the device's own target
(`target="onnx2torch-cuda"` on a CUDA device: its forms chosen by its probe there;
elsewhere `target="onnx2torch"`), `onnx2torch target` the output for
`target="onnx2torch"` (probed on the CPU), the form columns each form as emitted for the
own target, `gather alone` the own target's output for the same lengths given as a constant,
static dims. Float32 time-major data, lengths at run time, dims declared (`static`),
time and batch symbolic (`time+batch`) or all symbolic (`all`). Every output was equal
to the numpy reference, bit for bit, before it was timed; a variant that was not says so
in its cell. Each row is the median of its passes, each with every module made anew.
"""

HAND_WRITTEN = ("torch gather", "torch rows")
CPU_TARGET = "onnx2torch target"
CONVERTER = "converter"
COMPILED = ("converter compiled", "torch gather compiled")
_ON_ET = (EXECUTORCH[0], EXECUTORCH[2])  # each also over ExecuTorch's own gather
_COLUMNS = (
    *HAND_WRITTEN,
    CONVERTER,
    *COMPILED,
    *EXECUTORCH,
    "default",
    "own target",
    CPU_TARGET,
    *FORMS,
    "gather alone",
)


def own_target(device: str) -> str:
    """The target of onnx2torch on ``device``: its own profile where one was probed."""
    import torch

    if torch.device(device).type == "cuda" and "onnx2torch-cuda" in TARGETS:
        return "onnx2torch-cuda"
    return "onnx2torch"


def device_models(
    device: str, case: Case, dims: str, lens: np.ndarray
) -> dict[str, onnx.ModelProto | str]:
    """The variants a row times: the default, the own target, its forms, its gather alone.

    Where the own target is a device's (``own_target``), ``target="onnx2torch"`` too.
    """
    own = own_target(device)
    models = _bench_backend.backend_models(own, case, dims, lens)
    # onnx2torch has no converter for ReverseSequence: revseq's converts it (CONVERTER).
    models[CONVERTER] = models.pop("native")
    if own != "onnx2torch":
        native = native_model(case, dims=dims)
        models[CPU_TARGET] = revseq.inline(native, target="onnx2torch")
    return models


def unusable_device(device: str) -> str | None:
    """Why onnx2torch cannot run on torch device ``device`` here; None if it can."""
    return backends.unavailable("onnx2torch") or onnx2torch.device_problem(device)


def device_context(device: str) -> str:
    """Versions and the device, for the page's stamp."""
    import torch

    where = torch.device(device)
    name = onnx2torch.device_label(where)
    return (
        f"torch {torch.__version__}, "
        f"onnx2torch {importlib.metadata.version(onnx2torch.DISTRIBUTION)}, "
        f"device {device} ({name})"
    )


def _source_steps(x, lens, case: Case):
    """Each (time, batch) position's source step, ``where(t < L, L-1-t, t)``.

    Shaped as the data's two leading axes (time-major ``[T, B]``, batch-major ``[B, T]``).
    """
    import torch

    steps = torch.arange(x.shape[case.time_axis], device=x.device)
    if case.time_axis == 0:
        steps, lens = steps[:, None], lens[None, :]
    else:
        steps, lens = steps[None, :], lens[:, None]
    return torch.where(steps < lens, lens - 1 - steps, steps)


def hand_written(case: Case) -> dict[str, Callable]:
    """The op written directly in torch, for the case's layout: each takes (x, lens)."""
    import torch

    if {case.batch_axis, case.time_axis} != {0, 1}:
        raise ValueError(f"hand-written forms take the two ONNX layouts, not {case.label}")

    def gather(x, lens):
        steps = _source_steps(x, lens, case)
        index = steps.reshape(steps.shape + (1,) * (x.dim() - 2)).expand(x.shape)
        return torch.gather(x, case.time_axis, index)

    def rows(x, lens):
        steps = _source_steps(x, lens, case)
        if case.time_axis == 0:  # row t * B + b holds step t of entry b
            source = steps * x.shape[1] + torch.arange(x.shape[1], device=x.device)
        else:  # row b * T + t
            source = steps + x.shape[1] * torch.arange(x.shape[0], device=x.device)[:, None]
        flat = x.reshape(x.shape[0] * x.shape[1], -1)
        return flat.index_select(0, source.reshape(-1)).reshape(x.shape)

    return {"torch gather": gather, "torch rows": rows}


def synchronised(device) -> Callable[[object], object]:
    """A function of a result that returns it once ``device`` has finished its work."""
    return lambda result: (onnx2torch.synchronise(device), result)[1]


def _time_row(
    case: Case,
    feeds: dict[str, np.ndarray],
    models: Models,
    device: str,
    *,
    rounds: int,
    budget_s: float,
) -> Timed:
    """One pass over one row: every variant checked bit for bit, then timed interleaved."""
    import torch

    where = torch.device(device)
    done = synchronised(where)
    on_device = {name: onnx2torch.to_torch(a).to(where) for name, a in feeds.items()}
    expected = reverse_sequence(
        feeds["x"], feeds["lens"], batch_axis=case.batch_axis, time_axis=case.time_axis
    ).tobytes()
    x = on_device["x"]

    def exact(call: Callable[[], object]) -> None:
        with torch.no_grad():
            got = onnx2torch.to_numpy(call().cpu())
        if got.tobytes() != expected:
            raise Unusable("wrong values")

    variants: dict[str, list[Callable[[], object]]] = {
        "device copy": [lambda: done(torch.clone(x))]
    }
    written_notes: dict[str, str] = {}
    for name, function in hand_written(case).items():
        call = lambda f=function: done(f(x, on_device["lens"]))  # noqa: E731
        try:
            exact(call)
        except Unusable as e:
            written_notes[name] = str(e)
            continue
        variants[name] = [call]

    if isinstance(models.get(CONVERTER), onnx.ModelProto):
        converter = models[CONVERTER]
        models = {k: v for k, v in models.items() if k != CONVERTER}
        try:
            compiled = _converter_variants(converter, case, on_device, done, exact)
        except Unusable as e:
            written_notes[CONVERTER] = str(e)
        else:
            variants.update(compiled)
        if where.type == "cpu" and not backends.unavailable("executorch"):
            gather = hand_written(case)["torch gather"]
            programs, refused = executorch_variants(converter, case, feeds, exact, gather)
            variants.update(programs)
            written_notes.update(refused)

    def prepare(model: onnx.ModelProto) -> list[Callable[[], object]]:
        args = [on_device[n] for n in backends.input_names(model)]
        try:
            modules = [onnx2torch.convert(model).to(where) for _ in range(PLACEMENTS)]
            calls = [lambda m=m, a=args: done(m(*a)) for m in modules]
            for call in calls:
                exact(call)
        except Unusable:
            raise
        except Exception as e:  # onnx2torch's converters and torch raise their own types
            raise Unusable(one_line(e, typed=True)) from e
        return calls

    with torch.no_grad():
        result, notes, nodes = time_variants(
            variants, models, prepare, rounds=rounds, budget_s=budget_s
        )
    return result, {**written_notes, **notes}, nodes


def _converter_variants(
    model: onnx.ModelProto,
    case: Case,
    on_device: dict,
    done: Callable[[object], object],
    exact: Callable[[Callable[[], object]], None],
) -> dict[str, list[Callable[[], object]]]:
    """The op converted by revseq's converter, eager and compiled, and torch gather compiled.

    Compiled with ``torch.compile(fullgraph=True)``, dynamic where the model's dims are
    symbolic; each variant checked bit for bit.
    """
    import torch

    from revseq.backends.onnx2torch import converter

    dynamic = any(
        d.HasField("dim_param")
        for i in model.graph.input
        for d in i.type.tensor_type.shape.dim
    )
    where = on_device["x"].device
    args = [on_device[n] for n in backends.input_names(model)]
    torch._dynamo.reset()  # a fresh cache per row: no recompile limit reached over rows
    variants: dict[str, list[Callable[[], object]]] = {CONVERTER: [], COMPILED[0]: []}
    try:
        for _ in range(PLACEMENTS):
            module = converter.convert(model).to(where)
            variants[CONVERTER].append(lambda m=module: done(m(*args)))
            fast = torch.compile(module, fullgraph=True, dynamic=dynamic)
            variants[COMPILED[0]].append(lambda m=fast: done(m(*args)))
        gather = torch.compile(
            hand_written(case)["torch gather"], fullgraph=True, dynamic=dynamic
        )
        variants[COMPILED[1]] = [lambda: done(gather(on_device["x"], on_device["lens"]))]
        for calls in variants.values():
            for call in calls:
                exact(call)
    except Unusable:
        raise
    except Exception as e:  # torch's compiler raises its own types
        raise Unusable(one_line(e, typed=True)) from e
    return variants


@dataclasses.dataclass(frozen=True)
class DeviceTimer:
    """The GPU page: onnx2torch's modules on a torch device, over a copy on the device."""

    device: str
    rounds: int
    budget_s: float

    def models(self, case: Case, dims: str, lens: np.ndarray) -> Models:
        """The variants of ``device_models``."""
        return device_models(self.device, case, dims, lens)

    def time(self, case: Case, feeds: dict[str, np.ndarray], models: Models) -> Timed:
        """One pass: each variant checked bit for bit, then timed (``_time_row``)."""
        return _time_row(
            case, feeds, models, self.device, rounds=self.rounds, budget_s=self.budget_s
        )


def _over(row: dict[str, object], name: str, base: str = "device copy") -> float | None:
    result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
    if name not in result or base not in result:
        return None
    return result[name][1] / result[base][1]


def format_device(label: str, rows: list[dict[str, object]]) -> str:
    """The table (x the device copy, node counts in brackets) and its geomeans."""
    lines = [
        f"{label}: median ms of the device copy and of the default, then each variant x "
        "the copy (nodes)\n",
        *_bench_backend.table_head(
            ["shape", "dims", "MiB", "copy ms", "default ms", *_COLUMNS]
        ),
    ]
    for row in rows:
        case: Case = row["case"]  # type: ignore[assignment]
        result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
        cells = _bench_backend.ratio_cells(
            row, _COLUMNS, lambda name, row=row: _over(row, name)
        )
        default_ms = f"{result['default'][0] * 1e3:.3f}" if "default" in result else "-"
        copy_ms = f"{result['device copy'][0] * 1e3:.3f}"
        lines.append(
            f"| {case.label} | {row['dims']} | {case.nbytes / 2**20:.2f} | {copy_ms} | "
            f"{default_ms} | " + " | ".join(cells) + " |"
        )
    lines.append("")
    for dims in dict.fromkeys(r["dims"] for r in rows):
        selected = [r for r in rows if r["dims"] == dims]
        for name in ("default", "own target", CPU_TARGET, CONVERTER, COMPILED[0], *_ON_ET):
            parts = []
            bases = ("device copy", "torch gather", "torch rows")
            for base in (*bases, EXECUTORCH[1]) if name in _ON_ET else bases:
                over = [_over(r, name, base) for r in selected]
                ratios = [ratio for ratio in over if ratio is not None]
                if ratios:
                    parts.append(
                        f"{statistics.geometric_mean(ratios):.2f}x the {base} "
                        f"(worst {max(ratios):.2f}x)"
                    )
            if parts:
                lines.append(f"{name}, {dims} dims: geomean " + ", ".join(parts) + "  ")
    return "\n".join(lines)
