"""Where an execution-provider backend ran each node, as its adapter reports it.

On onnxruntime-web's WebGPU EP a node without a kernel falls back to the CPU. An
adapter for such a backend returns runners whose ``placement`` maps each provider to
the nodes placed on it; the check judges which placements defeat inlining
(:mod:`revseq.equivalence.off_device`).
"""

from __future__ import annotations

__all__ = ["CPU", "Placement", "node_key"]

import onnx

Placement = dict[str, list[tuple[str, str]]]
"""Execution provider -> the (op type, node name) pairs onnxruntime placed on it."""

CPU = "CPUExecutionProvider"


def node_key(node: onnx.NodeProto, position: int) -> str:
    """How a placement names a node: its name, or ``#`` and its position in the graph."""
    return node.name or f"#{position}"
