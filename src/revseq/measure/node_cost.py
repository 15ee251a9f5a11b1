"""What one node costs a run on a backend, beside its copy floor (``Profile.node_cost``).

A form's ratio to the copy floor says what its gather costs on data of 0.1 MiB and
more; on a small model each node's own cost is most of what a reversal costs
(docs/share.md). Two models pass the data of the smallest cost case through one op
(the floor's) and compute a chain of int64 arithmetic on the lengths beside it, as the
index arithmetic does: one of ``CHAIN`` links, one of twice as many. What the longer
chain costs more, over its extra links, is a node's cost: the data's pass, the extra
output and the runner's own overhead cancel. A compiler that fuses the chain into one
kernel pays little per node, and so it does for the forms' index arithmetic.
"""

from __future__ import annotations

__all__ = ["CHAIN", "chain_model", "node_cost"]

import numpy as np
import onnx
from onnx import TensorProto, helper

from revseq import backends
from revseq.measure._cases import Case, input_arrays
from revseq.measure.costs import COST_CASES, floor_ratios

CHAIN = 16
"""The links of the shorter chain; the longer has twice as many."""


def chain_model(case: Case, links: int) -> onnx.ModelProto:
    """The case's data through a Neg, and ``links`` int64 nodes over the lengths beside it.

    The links add the lengths, then subtract one, in turn: no link undoes the one before
    it (an optimiser may fold an Add of a constant into a Sub of it) and no value
    overflows.
    """
    batch = case.shape[case.batch_axis]
    nodes = [helper.make_node("Neg", ["x"], ["y"])]
    last = "lens"
    for i in range(links):
        other = "lens" if i % 2 == 0 else "one"
        nodes.append(helper.make_node(("Add", "Sub")[i % 2], [last, other], [f"link{i}"]))
        last = f"link{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, case.shape),
            helper.make_tensor_value_info("lens", TensorProto.INT64, [batch]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, case.shape),
            helper.make_tensor_value_info(last, TensorProto.INT64, [batch]),
        ],
        [helper.make_tensor("one", TensorProto.INT64, [1], [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def node_cost(
    name: str, *, rounds: int = 60, budget_s: float = 2.0, passes: int = 1
) -> float | None:
    """One node's cost on backend ``name``, x its copy floor of ``NODE_COST_BYTES``.

    The median of ``passes`` passes of fresh runners, each of interleaved rounds; None
    where either chain does not run there. Never below 0 (a fused chain may time a
    hair faster when longer).
    """
    case = COST_CASES[0]
    feeds = input_arrays(case, np.random.default_rng(0))
    models = {"short": chain_model(case, CHAIN), "long": chain_model(case, 2 * CHAIN)}
    try:
        ratios, _ = floor_ratios(
            backends.get(name), case, feeds, models,
            rounds=rounds, budget_s=budget_s, passes=passes, reversals=False,
        )  # fmt: skip
    except backends.BackendError:  # the floor itself does not run
        return None
    if not models.keys() <= ratios.keys():
        return None
    return round(max(0.0, (ratios["long"] - ratios["short"]) / CHAIN), 4)
