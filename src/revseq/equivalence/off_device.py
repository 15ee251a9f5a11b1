"""Which placements on an execution-provider backend defeat inlining.

On an execution provider for a GPU, a node without a kernel falls back to the CPU, with copies
between host and GPU at every crossing. A small CPU prefix over the lengths and shapes is
harmless (onnxruntime keeps shape arithmetic on the CPU by design, and the lengths arrive
from the host anyway). What defeats inlining is a ``MemcpyToHost`` (a value the GPU made
going back to the host) and a CPU node that makes more than a time or batch vector (or
a shape, as long as the rank): the index, or the data itself, computed on the CPU and
uploaded.
"""

from __future__ import annotations

__all__ = ["harmful_nodes", "harmless_size"]

from collections.abc import Sequence

import numpy as np
import onnx

from revseq.backends import CPU, Placement, node_key
from revseq.equivalence._runners import capture
from revseq.equivalence.inputs import Inputs


def harmless_size(shape: Sequence[int], time_axis: int, batch_axis: int) -> int:
    """The most elements a CPU node may make for data of ``shape``.

    The longest of the time and batch vectors and the shape itself (onnxruntime
    computes shapes on the CPU).
    """
    return max(shape[time_axis], shape[batch_axis], len(shape))


def harmful_nodes(
    model: onnx.ModelProto, placement: Placement, feeds: Inputs, *, limit: int
) -> list[str]:
    """The nodes of ``model`` whose placement takes the work off the device.

    Args:
        model: The model as the backend ran it.
        placement: Where the backend placed its nodes.
        feeds: Inputs the model runs on; the CPU nodes' outputs are measured on them (in
            onnxruntime, which computes the same shapes).
        limit: The most elements a CPU node may make (``harmless_size``).

    Returns:
        One line per harmful node: its op type, name and why.
    """
    found = [
        f"{op_type} {name!r} (a copy back to the host)"
        for nodes in placement.values()
        for op_type, name in nodes
        if op_type == "MemcpyToHost"
    ]
    on_cpu = {name for _, name in placement.get(CPU, [])}
    producers = {
        key: n
        for position, n in enumerate(model.graph.node)
        if (key := node_key(n, position)) in on_cpu
    }
    outputs = sorted({o for n in producers.values() for o in n.output if o})
    values = capture(model, feeds, outputs) if outputs else {}
    for name, node in producers.items():
        sizes = [int(np.asarray(values[o]).size) for o in node.output if o in values]
        if sizes and max(sizes) > limit:
            found.append(
                f"{node.op_type} {name!r} (on the CPU, makes {max(sizes)} elements; a time "
                f"or batch vector or a shape has at most {limit})"
            )
    return found
