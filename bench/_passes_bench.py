"""Pass speed, and the nodes index sharing saves: part of ``python -m bench.bench``.

revseq.inline and revseq.restore are timed on long chains and large models against
onnx-ir's own round trip. See :mod:`bench.bench`.
"""

from __future__ import annotations

__all__ = [
    "PassTiming",
    "chain_model",
    "format_passes",
    "large_model",
    "sharing_counts",
    "time_passes",
]

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence

import onnx
import onnx_ir as ir

import revseq
from revseq.measure._timing import time_once
from revseq.passes import InlineReverseSequencePass


def chain_model(count: int, *, relus: int = 1) -> ir.Model:
    """``count`` ReverseSequence nodes, ``relus`` Relu nodes after each; dynamic shapes."""
    nodes = []
    previous = "x"
    for i in range(count):
        nodes.append(onnx.helper.make_node("ReverseSequence", [previous, "lens"], [f"r{i}"]))
        previous = f"r{i}"
        for j in range(relus):
            nodes.append(onnx.helper.make_node("Relu", [previous], [f"a{i}_{j}"]))
            previous = f"a{i}_{j}"
    graph = onnx.helper.make_graph(
        nodes,
        "chain",
        [
            onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["T", "B", 4]),
            onnx.helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, ["B"]),
        ],
        [onnx.helper.make_tensor_value_info(previous, onnx.TensorProto.FLOAT, ["T", "B", 4])],
    )
    proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    return ir.from_proto(proto)


@dataclasses.dataclass(frozen=True)
class PassTiming:
    """Seconds for one model: onnx-ir's round trip, each pass alone, each public call."""

    label: str
    nodes: int
    round_trip: float
    inline_pass: float
    inline_api: float
    inline_round_trip: float
    restore_pass: float
    restore_api: float
    restored: int


def _over_budget(api: float, round_trip: float, pass_s: float) -> float:
    """A public call's time over its budget: 1.5x onnx-ir's round trip, plus the pass."""
    return api / (1.5 * round_trip + pass_s)


def large_model(count: int = 10, total: int = 100_000) -> ir.Model:
    """About ``total`` nodes holding ``count`` ReverseSequence nodes (Relu between)."""
    return chain_model(count, relus=(total - count) // count)


def _time_direction(
    proto: onnx.ModelProto,
    make_pass: Callable[[], ir.passes.PassBase],
    api: Callable[[onnx.ModelProto], object],
    repeats: int,
) -> tuple[float, float, float, onnx.ModelProto]:
    """(round trip s, pass s, public call s, the call's output) for one direction.

    Each the median of ``repeats`` runs, interleaved, each pass on a fresh copy.
    """
    times: list[tuple[float, float, float]] = []
    output: object = None
    for _ in range(repeats):
        round_trip = time_once(lambda: ir.to_proto(ir.from_proto(proto)))
        fresh = ir.from_proto(proto)
        pass_s = time_once(lambda: make_pass()(fresh))  # noqa: B023
        start = time.perf_counter()
        output = api(proto)
        times.append((round_trip, pass_s, time.perf_counter() - start))
    assert isinstance(output, onnx.ModelProto)
    round_trip, pass_s, api_s = (
        statistics.median(column) for column in zip(*times, strict=True)
    )
    return round_trip, pass_s, api_s, output


def time_passes(label: str, model: ir.Model, *, repeats: int = 3) -> PassTiming:
    """Time the passes on ``model`` and the public API on its ModelProto."""
    from revseq.passes import RestoreReverseSequencePass

    round_trip, inline_pass, inline_api, inlined = _time_direction(
        ir.to_proto(model), InlineReverseSequencePass, revseq.inline, repeats
    )
    inline_round_trip, restore_pass, restore_api, restored = _time_direction(
        inlined, RestoreReverseSequencePass, revseq.restore, repeats
    )
    return PassTiming(
        label=label,
        nodes=model.graph.num_nodes(),
        round_trip=round_trip,
        inline_pass=inline_pass,
        inline_api=inline_api,
        inline_round_trip=inline_round_trip,
        restore_pass=restore_pass,
        restore_api=restore_api,
        restored=sum(n.op_type == "ReverseSequence" for n in restored.graph.node),
    )


def sharing_counts() -> list[tuple[str, int, int, int]]:
    """(model, nodes before inlining, after without sharing, after with sharing).

    For the bundled models that reverse more than once with one lengths input.
    """
    from revseq.models import FOLDER

    rows = []
    for name in ("bidirectional_rnn.onnx", "control_flow.onnx"):
        proto = onnx.load(FOLDER / name)
        counts = []
        for share in (False, True):
            model = ir.from_proto(proto)
            InlineReverseSequencePass(share=share)(model)
            counts.append(sum(1 for _ in ir.traversal.RecursiveGraphIterator(model.graph)))
        before = sum(
            1 for _ in ir.traversal.RecursiveGraphIterator(ir.from_proto(proto).graph)
        )
        rows.append((name, before, counts[0], counts[1]))
    return rows


def format_passes(timings: Sequence[PassTiming]) -> str:
    lines = [
        "| model | nodes | round trip s | inline pass s | revseq.inline s | x budget "
        "| round trip of output s | restore pass s | revseq.restore s | x budget "
        "| restored |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in timings:
        inline_x = _over_budget(t.inline_api, t.round_trip, t.inline_pass)
        restore_x = _over_budget(t.restore_api, t.inline_round_trip, t.restore_pass)
        lines.append(
            f"| {t.label} | {t.nodes:,} | {t.round_trip:.3f} | {t.inline_pass:.3f} "
            f"| {t.inline_api:.3f} | {inline_x:.2f} | {t.inline_round_trip:.3f} "
            f"| {t.restore_pass:.3f} | {t.restore_api:.3f} | {restore_x:.2f} "
            f"| {t.restored} |"
        )
    return "\n".join(lines)
