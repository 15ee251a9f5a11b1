"""``python -m revseq.bench --backend NAME``: the same forms timed on an installed backend.

revseq's output runs where ReverseSequence is missing, so there is no native kernel to
compare with: the floor is a copy of the data, the slower of numpy's copy and the
backend's own Identity of the same tensor (its per-run overhead included). Each variant
runs interleaved with the others in this process, and ratios are paired medians, as for
onnxruntime.
"""

from __future__ import annotations

__all__ = ["BACKEND_SUITE", "format_backend", "run_backend"]

import statistics
from collections.abc import Sequence

import numpy as np
import onnx

import revseq
from revseq import backends
from revseq.bench import (
    Case,
    copy_model,
    fed,
    input_arrays,
    native_model,
    node_count,
    numpy_copy,
    paired_medians,
)
from revseq.ops.errors import one_line
from revseq.ops.forms import FORMS
from revseq.ops.targets import TARGETS

BACKEND_SUITE: tuple[Case, ...] = (
    Case((2000, 16), 1, 0, "float32"),
    Case((64, 32, 256), 1, 0, "float32"),
    Case((256, 64, 256), 1, 0, "float32"),
)
"""Time-major float32, a small tensor, 2 MiB and 16 MiB: what sequence models hold."""


def _models(
    name: str, case: Case, dims: str, lens: np.ndarray
) -> dict[str, onnx.ModelProto | str]:
    """Each variant's model, or why it has none.

    The default, the backend's own target, and each named form emitted for that target
    (for "any" where the backend has no profile).
    """
    native = native_model(case, dims=dims)
    models: dict[str, onnx.ModelProto | str] = {"default": revseq.inline(native)}
    target = name if name in TARGETS else "any"
    for label, strategy in (("own target", "auto"), *((f, f) for f in FORMS)):
        try:
            models[label] = revseq.inline(native, strategy=strategy, target=target)
        except revseq.StrategyError:
            models[label] = "refused"
    models["gather alone"] = revseq.inline(native_model(case, lens))
    models["native"] = native
    return models


def run_backend(
    name: str, cases: Sequence[Case], dims_kinds: Sequence[str], rounds: int, budget_s: float
) -> list[dict[str, object]]:
    """Time each case and dims on backend ``name``; one row per (case, dims)."""
    backend = backends.get(name)
    native_op = bool(TARGETS[name].native) if name in TARGETS else True
    rng = np.random.default_rng(0)
    rows = []
    for case in cases:
        feeds = input_arrays(case, rng)
        data = {"x": feeds["x"]}
        identity = backend.prepare(copy_model(case))
        for dims in dims_kinds:
            variants = {"Identity": lambda r=identity, d=data: r(d)}
            notes: dict[str, str] = {}
            nodes: dict[str, int] = {}
            for label, model in _models(name, case, dims, feeds["lens"]).items():
                if isinstance(model, str):
                    notes[label] = model
                    continue
                its_feeds = fed(model, feeds)
                try:
                    runner = backend.prepare(model)
                    runner(its_feeds)
                except backends.BackendError as e:
                    lacks_op = label == "native" and not native_op
                    notes[label] = "no ReverseSequence" if lacks_op else one_line(e)
                    continue
                nodes[label] = node_count(model)
                variants[label] = lambda r=runner, f=its_feeds: r(f)
            variants["memcpy"] = numpy_copy(feeds["x"])
            result = paired_medians(variants, rounds=rounds, budget_s=budget_s)
            rows.append(
                {"case": case, "dims": dims, "result": result, "notes": notes, "nodes": nodes}
            )
    return rows


_COLUMNS = ("default", "own target", *FORMS, "gather alone", "native")


def _floor(row: dict[str, object]) -> tuple[float, float, str]:
    """(seconds, ratio to Identity, name) of the slower copy: the floor."""
    result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
    if result["memcpy"][1] > 1.0:
        return result["memcpy"][0], result["memcpy"][1], "memcpy"
    return result["Identity"][0], 1.0, "Identity"


def format_backend(label: str, rows: list[dict[str, object]]) -> str:
    """The table (x the copy floor, node counts in brackets) and its summary."""
    lines = [
        f"{label}: median ms of the floor, then each variant x the floor (nodes); the "
        "named forms as emitted for the backend's own target\n",
        "| shape | dims | MiB | floor ms | " + " | ".join(_COLUMNS) + " |",
        "|---|---|---|---|" + "---|" * len(_COLUMNS),
    ]
    for row in rows:
        case: Case = row["case"]  # type: ignore[assignment]
        result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
        notes: dict[str, str] = row["notes"]  # type: ignore[assignment]
        nodes: dict[str, int] = row["nodes"]  # type: ignore[assignment]
        seconds, floor, which = _floor(row)
        cells = []
        for name in _COLUMNS:
            if name in result:
                cells.append(f"{result[name][1] / floor:.2f}x ({nodes[name]})")
            else:
                cells.append(notes.get(name, "-"))
        lines.append(
            f"| {case.label} | {row['dims']} | {case.nbytes / 2**20:.2f} | "
            f"{seconds * 1e3:.3f} ({which}) | " + " | ".join(cells) + " |"
        )
    lines.append("")
    for dims in dict.fromkeys(r["dims"] for r in rows):
        for name in ("default", "own target"):
            ratios = [
                r["result"][name][1] / _floor(r)[1]  # type: ignore[index]
                for r in rows
                if r["dims"] == dims and name in r["result"]  # type: ignore[operator]
            ]
            if ratios:
                lines.append(
                    f"{name}, {dims} dims: geomean {statistics.geometric_mean(ratios):.2f}x "
                    f"the floor, worst {max(ratios):.2f}x  "
                )
    return "\n".join(lines)
