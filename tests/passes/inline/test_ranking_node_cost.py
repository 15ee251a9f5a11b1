"""The planner weighs each node a form writes beside its gather (``Profile.node_cost``):
the fewer nodes, the more so the smaller the data; and reads each gather's cost at the
data's size (synthetic costs, no backend needed).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir
import pytest
from helpers import run_ort
from profile_cases import EVERY_OP, gather_of, one_node, probed

import revseq
from revseq.ops.reference import reverse_sequence
from revseq.ops.signature import Signature
from revseq.ops.targets import TARGETS, combine
from revseq.ops.targets.cost import NODE_COST_BYTES, Cost
from revseq.passes.inline.ranking import weighed, weighs_nodes

# With symbolic dims, GatherND writes 21 nodes for this node, GatherElements 16.
SYMBOLIC = one_node(["T", "B", 3])
NODES = {"gather_nd": 21, "gather_elements": 16}


def _reverses_exactly(model, dims, lens, *, batch_axis, time_axis):
    """``model`` reverses float32 data of ``dims`` by ``lens`` bit for bit on onnxruntime,
    its graph optimisations off and on."""
    x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
    want = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    for optimize in (False, True):
        got = run_ort(model, {"x": x, "lens": lens}, optimize=optimize)[0]
        assert got.tobytes() == want.tobytes()


def _symbolic(name, node_cost, nd=2.0, elements=2.5):
    """A synthetic profile: GatherND the cheaper gather, GatherElements the fewer nodes."""
    costs = {"time+batch": {"gather_nd": Cost(nd, 21), "gather_elements": Cost(elements, 16)}}
    profile = probed(name, dynamic_ops=EVERY_OP, gather_elements=frozenset({"float32"}))
    return dataclasses.replace(profile, costs=costs, node_cost=node_cost)


@pytest.mark.parametrize(
    ("node_cost", "gather"),
    [
        (None, "GatherND"),
        (0.01, "GatherND"),
        (0.09, "GatherElements"),
        (0.3, "GatherElements"),
    ],
)
def test_a_costly_node_tips_symbolic_dims_to_the_form_of_fewer_nodes(node_cost, gather):
    """2.0 + 21 c against 2.5 + 16 c: GatherND while c is small, GatherElements once
    five nodes cost about the gathers' difference: at 0.09 the sums are 3.89 and 3.94,
    a tie (within 10%, the ratios' noise), which goes to fewer nodes."""
    out = revseq.inline(SYMBOLIC, target=_symbolic("alpha", node_cost))
    assert gather_of(out) == gather
    lens = np.array([0, 1, 6, 3], dtype=np.int64)
    _reverses_exactly(out, [6, 4, 3], lens, batch_axis=1, time_axis=0)


def test_the_default_weighs_each_member_and_takes_the_worst():
    """One member whose nodes are dear is enough: the form's worst cost counts."""
    cheap_nodes = _symbolic("alpha", 0.001)
    dear_nodes = _symbolic("beta", 0.3, nd=1.5, elements=1.9)
    assert gather_of(revseq.inline(SYMBOLIC, target=combine([cheap_nodes]))) == "GatherND"
    both = combine([cheap_nodes, dear_nodes])
    assert gather_of(revseq.inline(SYMBOLIC, target=both)) == "GatherElements"
    # A member that never timed a node adds its ratio alone.
    untimed = dataclasses.replace(dear_nodes, node_cost=None)
    assert gather_of(revseq.inline(SYMBOLIC, target=combine([cheap_nodes, untimed]))) == (
        "GatherND"
    )


def test_a_tie_goes_to_fewer_nodes_only_where_no_member_pays_beyond_the_noise_for_it():
    """Worst costs 4.0 (GatherND) and 4.2 (GatherElements, 5 nodes fewer) on alpha, a
    tie of the worst; but beta runs GatherElements at 3x its GatherND: no tie."""
    alpha = _symbolic("alpha", 0.1, nd=1.9, elements=2.6)
    beta = _symbolic("beta", 0.0, nd=1.0, elements=3.0)
    assert gather_of(revseq.inline(SYMBOLIC, target=combine([alpha, beta]))) == "GatherND"
    even = _symbolic("beta", 0.0, nd=1.0, elements=1.05)
    assert gather_of(revseq.inline(SYMBOLIC, target=combine([alpha, even]))) == (
        "GatherElements"
    )


def _onnxruntime(node_cost):
    """onnxruntime's profile with synthetic static costs: the row form the cheaper."""
    profile = TARGETS["onnxruntime"]
    static = {"gather_rows": Cost(1.9, 5), "gather_nd": Cost(2.3, 4),
              "gather_elements": Cost(8.0, 5)}  # fmt: skip
    costs = {**(profile.costs or {}), "static": static}
    return dataclasses.replace(profile, costs=costs, node_cost=node_cost)


@pytest.mark.parametrize(("dims", "small"), [([3, 9, 4], True), ([64, 512, 64], False)])
def test_static_data_weighs_a_node_by_how_small_the_data_is(dims, small):
    """Batch-major: GatherND writes a node fewer than the row form. At 432 bytes that
    node outweighs its dearer gather; at 8 MiB it is a rounding error."""
    model = one_node(dims, batch_axis=0, time_axis=1)
    assert gather_of(revseq.inline(model, target=_onnxruntime(None))) == "Gather"
    weighed_out = revseq.inline(model, target=_onnxruntime(0.03))
    assert gather_of(weighed_out) == ("GatherND" if small else "Gather")
    lens = (np.arange(dims[0]) * 5 % (dims[1] + 1)).astype(np.int64)
    _reverses_exactly(weighed_out, dims, lens, batch_axis=0, time_axis=1)


def _sig(dims, dtype=np.float32):
    return Signature(
        batch_axis=1,
        time_axis=0,
        rank=len(dims),
        dims=tuple(d if isinstance(d, int) else None for d in dims),
        dtype=ir.DataType.from_numpy(np.dtype(dtype)),
        lens_dtype=ir.DataType.INT64,
        lens=None,
        opset=18,
    )


def test_weighed_keeps_names_without_costs_after_and_the_order_without_node_costs():
    profile = _symbolic("alpha", 0.3)
    sig = _sig(["T", "B", 3])
    assert weighs_nodes(sig, profile)
    assert weighed(sig, profile, {"gather_rows": 12, **NODES}) == (
        "gather_elements", "gather_nd", "gather_rows",
    )  # fmt: skip
    untimed = dataclasses.replace(profile, node_cost=None)
    assert not weighs_nodes(sig, untimed)
    assert not weighs_nodes(sig, dataclasses.replace(profile, costs=None))


def test_the_weight_of_a_node_grows_as_the_data_shrinks():
    """At NODE_COST_BYTES a node weighs its node cost; at a tenth of it, ten times as
    much; at symbolic dims as at NODE_COST_BYTES; empty data weighs as one byte, and
    strings as symbolic dims."""
    from revseq.passes.inline.ranking import _node_weight

    elements = NODE_COST_BYTES // 4
    assert _node_weight(_sig([elements, 1, 1])) == 1.0
    assert _node_weight(_sig([elements // 10, 1, 1])) == pytest.approx(10.0)
    assert _node_weight(_sig([elements, 1, 1], np.float64)) == 0.5
    assert _node_weight(_sig(["T", "B", 3])) == 1.0
    assert _node_weight(_sig([0, 4, 3])) == NODE_COST_BYTES
    strings = dataclasses.replace(_sig([2, 4, 3]), dtype=ir.DataType.STRING)
    assert _node_weight(strings) == 1.0  # a string's size is not its elements'


def _crossing(node_cost=None):
    """onnxruntime's profile with static costs that cross: the row form cheaper on
    0.1 MiB, GatherND on 16 MiB (as tract and MNN timed theirs); GatherND's mean the
    dearer."""
    profile = TARGETS["onnxruntime"]
    sizes = (NODE_COST_BYTES, 1 << 21, 1 << 24)
    rows = Cost(2.0, 5, tuple(zip(sizes, (1.5, 2.0, 2.6), strict=True)))
    nd = Cost(2.4, 4, tuple(zip(sizes, (3.5, 2.1, 1.8), strict=True)))
    static = {"gather_rows": rows, "gather_nd": nd, "gather_elements": Cost(9.0, 5)}
    return dataclasses.replace(profile, costs={**(profile.costs or {}), "static": static},
                               node_cost=node_cost)  # fmt: skip


@pytest.mark.parametrize("node_cost", [None, 0.001])
@pytest.mark.parametrize(
    ("dims", "gather"),
    [([16, 200, 8], "Gather"), ([64, 256, 256], "GatherND"), ([16, 64, 32], "Gather")],
)
def test_static_data_takes_the_form_cheapest_at_its_own_size(node_cost, dims, gather):
    """0.1 MiB: the row form (1.5x against 3.5x); 16 MiB: GatherND (1.8x against 2.6x),
    though its mean over the sizes is the dearer; 128 KiB, between the first two sizes:
    still the row form. With or without a node cost."""
    model = one_node(dims, batch_axis=0, time_axis=1)
    out = revseq.inline(model, target=_crossing(node_cost))
    assert gather_of(out) == gather
    lens = (np.arange(dims[0]) * 7 % (dims[1] + 1)).astype(np.int64)
    _reverses_exactly(out, dims, lens, batch_axis=0, time_axis=1)


def test_symbolic_dims_read_the_mean_over_the_sizes():
    """Its size unknown, the node takes the form of the lower mean (the row form)."""
    profile = _crossing(0.001)
    costs = {**(profile.costs or {}), "time+batch": profile.costs["static"]}
    profile = dataclasses.replace(profile, costs=costs)
    sig = _sig(["T", "B", 3])
    assert weighed(sig, profile, {"gather_nd": 5, "gather_rows": 5})[0] == "gather_rows"
    static = _sig([256, 64, 256])
    assert weighed(static, profile, {"gather_nd": 5, "gather_rows": 5})[0] == "gather_nd"
