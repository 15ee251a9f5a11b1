"""A node's cost on a backend: two chains of int64 arithmetic beside the data's pass."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import run_ort

from revseq import backends
from revseq.measure import floor
from revseq.measure import node_cost as node_cost_module
from revseq.measure.costs import COST_CASES
from revseq.measure.node_cost import CHAIN, chain_model, node_cost
from revseq.ops.targets.cost import NODE_COST_BYTES


def test_a_node_is_weighed_against_the_smallest_data_the_forms_are_timed_on():
    assert min(case.nbytes for case in COST_CASES) == COST_CASES[0].nbytes == NODE_COST_BYTES


@pytest.mark.parametrize("links", [CHAIN, 2 * CHAIN])
def test_a_chain_adds_the_lengths_and_subtracts_one_in_turn(links):
    """No link undoes the one before it, and the data passes through one Neg."""
    model = chain_model(COST_CASES[0], links)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["Neg", *(["Add", "Sub"] * (links // 2))]
    x = np.ones(COST_CASES[0].shape, dtype=np.float32)
    lens = np.arange(COST_CASES[0].shape[1], dtype=np.int64)
    y, last = run_ort(model, {"x": x, "lens": lens}, optimize=True)
    assert y.tobytes() == (-x).tobytes()
    assert last.tolist() == (lens * (1 + links // 2) - links // 2).tolist()


def test_a_node_on_onnxruntime_costs_a_small_share_of_copying_a_tenth_of_a_mebibyte():
    """Values are noisy, not asserted tightly: above 0, well below the copy itself."""
    cost = node_cost("onnxruntime", rounds=30, budget_s=1.0)
    assert cost is not None and 0 <= cost < 0.5


def test_a_backend_that_runs_no_chain_has_no_node_cost(monkeypatch):
    """Its copy floor runs, the chains do not: None, not a figure of one of them."""
    real = backends.get("onnxruntime")

    class NoChains:
        resident = False

        def prepare(self, model, **kwargs):
            if len(model.graph.output) > 1:
                raise backends.BackendError("nochains", "convert", "no int64 arithmetic here")
            return real.prepare(model, **kwargs)

    monkeypatch.setattr(node_cost_module.backends, "get", lambda name: NoChains())
    assert node_cost("onnxruntime", rounds=5, budget_s=0.2) is None


def test_a_node_costs_what_the_longer_chain_costs_more_over_its_extra_links(monkeypatch):
    """Ratios of 1.5 and 1.9 to a floor that numpy's copy does not exceed: 0.4 over 16
    links. Where numpy's copy is the slower (1.25x the backend's), ratios count over it."""
    figures = {"Identity": (1e-5, 1.0), "short": (1.5e-5, 1.5), "long": (1.9e-5, 1.9)}

    def timed(backend, identities, feeds, models, **kwargs):
        assert set(models) == {"short", "long"}
        return dict(figures), {}, {}

    monkeypatch.setattr(floor, "time_on_floor", timed)
    monkeypatch.setattr(floor, "floor_runners", lambda *a: ("Identity", []))
    assert node_cost("onnxruntime") == 0.025
    figures["memcpy"] = (1.25e-5, 1.25)
    assert node_cost("onnxruntime") == 0.02
    figures["long"] = (1.4e-5, 1.4)  # a fused chain a hair faster when longer
    assert node_cost("onnxruntime") == 0.0
