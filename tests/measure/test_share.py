"""The share page: what its variants compute, what they count, and how a row reads."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import onnx
import pytest
from helpers import assert_identical, run_ort

import revseq
from bench import share

_DENSE = pathlib.Path(__file__).parents[1] / "fixtures" / "tf_reverse_sequence_dense.onnx"


@pytest.mark.parametrize("batch", [1, 4])
def test_the_gathers_alone_compute_what_the_inlined_model_computes_on_its_inputs(batch):
    """Each gather's index given as the constant it computes on these inputs: the same
    outputs bit for bit, and no index arithmetic left."""
    inlined = revseq.inline(onnx.load(_DENSE))
    feeds = {
        "x": np.arange(batch * 27, dtype=np.float32).reshape(batch, 9, 3),
        "lens": np.array([5, 0, 9, 1][:batch], dtype=np.int32),
    }
    alone = share.gathers_alone(inlined, feeds)
    onnx.checker.check_model(alone)
    expected = run_ort(inlined, feeds, optimize=False)
    for got, want in zip(run_ort(alone, feeds, optimize=False), expected, strict=True):
        assert_identical(got, want)
    ops = [n.op_type for n in alone.graph.node]
    assert "Range" not in ops and "Where" not in ops and "Gather" in ops
    # The default's index for this model: the lengths clamped, a row of a constant
    # table each (T is static), the row offsets counted from the lengths.
    assert share.graph_nodes(alone.graph) == share.graph_nodes(inlined.graph) - 11


def test_a_model_whose_reversals_sit_in_subgraphs_has_no_gathers_to_give():
    """Its main graph holds no decomposition: the model is timed as it is."""
    inlined = revseq.inline(onnx.load(_DENSE))
    body = inlined.graph
    outer = onnx.helper.make_graph(
        [onnx.helper.make_node("If", ["c"], ["o"], then_branch=body, else_branch=body)],
        "outer",
        [onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [onnx.helper.make_tensor_value_info("o", onnx.TensorProto.FLOAT, None)],
    )
    model = onnx.helper.make_model(outer, opset_imports=inlined.opset_import)
    assert share.gathers_alone(model, {"c": np.array(True)}) is model


def test_a_child_that_fails_says_its_last_words(monkeypatch):
    import subprocess
    import types

    done = types.SimpleNamespace(
        returncode=1, stdout="", stderr="Traceback\nValueError: boom\n"
    )
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: done)
    args = types.SimpleNamespace(rounds=3, budget=1.0, before=None)
    cells = share._row_in_a_child("m.onnx", "onnxruntime", args)
    assert cells == {"error": "the process ended with status 1: ValueError: boom"}


def test_nodes_are_counted_in_subgraphs_too_constants_aside():
    from revseq.ops.reference import reverse_sequence_model

    body = onnx.load(_DENSE).graph
    model = reverse_sequence_model(["T", "B", 3], onnx.TensorProto.FLOAT)
    node = onnx.helper.make_node("If", ["c"], ["o"], then_branch=body, else_branch=body)
    model.graph.node.append(node)
    model.graph.node.append(onnx.helper.make_node("Constant", [], ["k"], value_int=1))
    assert share.graph_nodes(model.graph) == 1 + 1 + 2 * len(body.node)


def test_a_row_times_each_variant_and_the_earlier_revseq_s_output(monkeypatch):
    """``--before`` with this very revseq: the same model, so the same nodes."""
    cells = share.time_model(
        onnx.load(_DENSE), "onnxruntime", rounds=3, budget_s=0.2, before=sys.executable
    )
    assert cells.keys() == {"identity", "before", "inlined", "gathers", "native", "per_node"}
    nodes = {key: cells[key].rsplit(", ", 1)[-1] for key in ("before", "inlined")}
    assert nodes["before"] == nodes["inlined"] == f"{share.graph_nodes(_inlined())})"
    table = share.page([("dense", "onnxruntime", cells)], before=True)
    header, _, row = table.splitlines()
    assert header.count("|") == row.count("|") == 9
    assert "inlined before" in header and "inlined before" not in share.page([], before=False)


def _inlined() -> onnx.GraphProto:
    return revseq.inline(onnx.load(_DENSE)).graph


def test_an_earlier_revseq_that_fails_is_said_in_its_cell_and_the_rest_is_timed():
    cells = share.time_model(
        onnx.load(_DENSE), "onnxruntime", rounds=3, budget_s=0.2, before=sys.executable + "-no"
    )
    assert cells.keys() == {"identity", "before", "inlined", "gathers", "native", "per_node"}
    assert cells["before"].startswith("not written: the earlier revseq's ")
    assert "does not run" in cells["before"]


def test_a_page_s_stamp_says_an_interpreter_given_as_its_metavar():
    from bench.pages import stamped_command

    argv = ["--before", "/somewhere/bin/python", "--before-label", "revseq of May", "-x"]
    assert stamped_command("python -m bench.share", argv, placeholders=["--before"]) == (
        "python -m bench.share --before PYTHON --before-label 'revseq of May' -x"
    )


def test_a_variant_a_runtime_refuses_is_said_in_its_cell_and_the_rest_is_timed(monkeypatch):
    """A runtime may refuse the gathers alone (their index a constant of two dims, which
    x2paddle's Gather refuses) and run the inlined model: the row is still timed."""
    from revseq import backends

    real = backends.get("onnxruntime")

    class NoConstantIndex:
        def prepare(self, model, **kwargs):
            if any(i.name.endswith("/given") for i in model.graph.initializer):
                raise backends.BackendError("stand-in", "convert", "a constant index")
            return real.prepare(model, **kwargs)

    monkeypatch.setattr(share.backends, "get", lambda name: NoConstantIndex())
    cells = share.time_model(onnx.load(_DENSE), "onnxruntime", rounds=3, budget_s=0.2)
    assert cells["gathers"] == "not run: stand-in: convert failed: a constant index"
    assert cells["per_node"] == "-"
    assert cells["inlined"].endswith(f", {share.graph_nodes(_inlined())})")
    assert "error" not in cells
