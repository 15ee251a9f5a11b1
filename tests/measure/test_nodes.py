"""The nodes page: what it counts, what it marks, and its one-line refusals."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import revseq
from bench import nodes
from revseq.ops.reference import reverse_sequence


@pytest.mark.parametrize(
    "case",
    [*nodes.CASES, *nodes.EXPORTED_CASES, *nodes.STATIC_TIME_CASES],
    ids=lambda c: c.label() + (" exported" if c.own_lengths else ""),
)
def test_each_case_model_reverses_each_tensor_by_the_shared_lengths(case):
    model = nodes.reversals_model(case, 2)
    onnx.checker.check_model(model, full_check=True)
    reversals = [n for n in model.graph.node if n.op_type == "ReverseSequence"]
    lengths = "lens64" if case.own_lengths else "lens"
    assert [r.input[1] for r in reversals] == [lengths, lengths]
    assert len({r.input[0] for r in reversals}) == 2
    time_axis, batch_axis = case.axes
    dims = [d if isinstance(d, int) else 3 for d in case.dims]
    x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
    lens_type = np.int32 if case.own_lengths else np.int64
    lens = np.array([0, 1, dims[time_axis]][: dims[batch_axis]], dtype=lens_type)
    got = revseq.inline(model)
    y0, y1 = ReferenceEvaluator(got).run(None, {"x": x, "lens": lens})
    expected = reverse_sequence(-x, lens, batch_axis=batch_axis, time_axis=time_axis)
    assert y0.tobytes() == expected.tobytes() and y1.tobytes() == expected.tobytes()


def test_count_leaves_out_constants_and_the_model_s_own_nodes():
    case = nodes.NodeCase(rank=2, time_major=False, static=True)
    model = nodes.reversals_model(case, 1)
    inlined = revseq.inline(model, target="any")
    written = [n.op_type for n in inlined.graph.node if n.op_type not in ("Constant", "Neg")]
    assert nodes.count_nodes(model, "any") == len(written) > 0


def test_a_target_without_a_form_is_counted_as_refused():
    case = nodes.NodeCase(rank=3, time_major=True, static=False)
    assert nodes.count_nodes(nodes.reversals_model(case, 1), "x2paddle").startswith("refused")


def test_cells_over_the_bars_are_bold(monkeypatch):
    counts = {1: nodes.MOST_NODES + 1, 2: 2 * (nodes.MOST_NODES + 1)}
    monkeypatch.setattr(nodes, "CASES", nodes.CASES[:1])
    monkeypatch.setattr(nodes, "count_nodes", lambda model, target: counts[_reversals(model)])
    one, two = nodes.nodes_table([("default", None)])
    assert one.splitlines()[-1] == f"| default | **{nodes.MOST_NODES + 1}** |"
    assert two.splitlines()[-1].endswith("(2.00)** |")
    counts = {1: nodes.MOST_NODES, 2: nodes.MOST_NODES}
    one, two = nodes.nodes_table([("default", None)])
    assert "**" not in one + two


def _reversals(model: onnx.ModelProto) -> int:
    return sum(n.op_type == "ReverseSequence" for n in model.graph.node)


def test_the_page_is_stamped_with_its_command(tmp_path, capsys):
    page = tmp_path / "nodes.md"
    assert nodes.main(["--target", "default", "--target", "any", "--write", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("# Nodes per reversal\n")
    assert "| default |" in text and "| any |" in text and "| tract |" not in text
    assert "`python -m bench.nodes --target default --target any --write" in text
    # one, two, as exported, exported with a static T
    assert capsys.readouterr().out.count("| default |") == 4
    assert "## One reversal, lengths as exporters declare them: nodes" in text
    assert "| target | [9,B] | [B,9] | [9,B,4] |" in text


def test_an_unknown_target_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        nodes.main(["--target", "nosuch"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == "python -m bench.nodes: error: no target named nosuch"


def test_an_earlier_revseq_s_counts_come_first_where_they_moved(monkeypatch):
    case = nodes.EXPORTED_CASES[0]
    earlier = nodes.earlier_counts(sys.executable, [("default", None)], [case])
    assert earlier == {
        (case, 1, None): nodes.count_nodes(nodes.reversals_model(case, 1), None),
        (case, 2, None): nodes.count_nodes(nodes.reversals_model(case, 2), None),
    }
    one, two = nodes.nodes_table([("default", None)], [case], before=earlier)
    assert "→" not in one + two  # the same revseq: nothing moved
    monkeypatch.setattr(nodes, "count_nodes", lambda model, target: 10 * _reversals(model))
    moved = {(case, 1, None): 30, (case, 2, None): "refused: no form"}
    one, two = nodes.nodes_table([("default", None)], [case], before=moved)
    assert one.splitlines()[-1] == "| default | 30 → 10 |"
    assert two.splitlines()[-1] == "| default | refused → **20 (2.00)** |"
