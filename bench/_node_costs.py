"""``--node-costs``: what each module of onnx2torch's conversion costs on a torch device."""

from __future__ import annotations

__all__ = ["NODE_COSTS_INTRO", "format_node_costs", "node_costs"]

import statistics
import time
from collections.abc import Sequence

import numpy as np

import revseq
from bench._torch_bench import own_target, synchronised
from revseq import backends
from revseq.backends import onnx2torch
from revseq.measure._cases import Case, input_arrays, native_model

NODE_COSTS_INTRO = """\
### What each module costs (`--node-costs`)

Each module of the default's and the own target's graph (a `Constant` too) timed alone,
the device synchronised before and after it: its Python, its launch and any host round
trip its converter makes. The synchronisations add to every module, so their sum
exceeds the whole call beside it (synchronised once). Medians of 50 calls.
"""

_WARM_CALLS = 10


def node_costs(
    device: str, cases: Sequence[Case], dims_kinds: Sequence[str], *, calls: int = 50
) -> list[dict[str, object]]:
    """What each module of the default's and the own target's graph costs on ``device``.

    Every module onnx2torch calls (a ``Constant`` too) is timed alone, the device
    synchronised before and after it, so its time holds its Python, its launch and any
    host round trip its converter makes (a Reshape reads its shape tensor element by
    element). The synchronisations add to every module, so the modules' sum exceeds a
    whole call, which is timed beside it, synchronised once. Medians over ``calls``
    runs after a warm-up. One row per case, dims and variant: seconds per module by
    the ONNX op type it runs, their sum and the whole call.
    """
    import torch
    import torch.fx

    where = torch.device(device)
    done = synchronised(where)
    rng = np.random.default_rng(0)

    class Timed(torch.fx.Interpreter):
        def __init__(self, module, op_types: dict[str, str]) -> None:
            super().__init__(module)
            self.op_types = op_types
            self.seconds: dict[str, list[float]] = {}

        def run_node(self, node):
            if node.op != "call_module":
                return super().run_node(node)
            done(None)
            start = time.perf_counter()
            result = done(super().run_node(node))
            self.seconds.setdefault(node.target, []).append(time.perf_counter() - start)
            return result

    rows = []
    for case in cases:
        feeds = input_arrays(case, rng)
        on_device = {n: onnx2torch.to_torch(a).to(where) for n, a in feeds.items()}
        for dims in dims_kinds:
            native = native_model(case, dims=dims)
            timed_outputs = {
                "default": revseq.inline(native),
                "own target": revseq.inline(native, target=own_target(device)),
            }
            for variant, model in timed_outputs.items():
                module = onnx2torch.convert(model).to(where)
                args = [on_device[n] for n in backends.input_names(model)]
                timed = Timed(module, {n.name: n.op_type for n in model.graph.node})
                whole = []
                with torch.no_grad():
                    for call in range(_WARM_CALLS + calls):
                        timed.run(*args)
                        start = time.perf_counter()
                        done(module(*args))
                        if call >= _WARM_CALLS:
                            whole.append(time.perf_counter() - start)
                by_type: dict[str, list[float]] = {}
                for name, seconds in timed.seconds.items():
                    median = statistics.median(seconds[_WARM_CALLS:])
                    by_type.setdefault(timed.op_types[name], []).append(median)
                rows.append(
                    {
                        "case": case,
                        "dims": dims,
                        "variant": variant,
                        "modules": by_type,
                        "call": statistics.median(whole),
                    }
                )
    return rows


def format_node_costs(rows: list[dict[str, object]]) -> str:
    """One line per output: its modules by op type, dearest first (count, total us)."""
    lines = [
        "| shape | dims | output | modules | their sum, us | whole call, us | "
        "by op type (modules) their us |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        case: Case = row["case"]  # type: ignore[assignment]
        modules: dict[str, list[float]] = row["modules"]  # type: ignore[assignment]
        total = sum(sum(seconds) for seconds in modules.values())
        count = sum(len(seconds) for seconds in modules.values())
        kinds = sorted(modules.items(), key=lambda item: -sum(item[1]))
        per_type = ", ".join(
            f"{op_type} ({len(seconds)}) {sum(seconds) * 1e6:.0f}"
            for op_type, seconds in kinds
        )
        lines.append(
            f"| {case.label} | {row['dims']} | {row['variant']} | {count} | "
            f"{total * 1e6:.0f} | {row['call'] * 1e6:.0f} | {per_type} |"  # type: ignore[operator]
        )
    return "\n".join(lines)
