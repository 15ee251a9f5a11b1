"""What a new user meets first: help, synopsis forms, the targets table, message wording."""

from __future__ import annotations

import pathlib

import onnx
import pytest
from real_models import embedding_tagger

import revseq
from revseq.cli import main
from revseq.ops.reference import reverse_sequence_model

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _run(capsys, *args) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:  # --help
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_target_takes_several_names_at_once_as_when_repeated(tmp_path, capsys):
    onnx.save(embedding_tagger(), tmp_path / "m.onnx")
    at_once, repeated = tmp_path / "a.onnx", tmp_path / "b.onnx"
    assert _run(capsys, "inline", tmp_path / "m.onnx", "-o", at_once, "-q",
                "--target", "tvm", "tract")[0] == 0  # fmt: skip
    assert _run(capsys, "inline", tmp_path / "m.onnx", "-o", repeated, "-q",
                "--target", "tvm", "--target", "tract")[0] == 0  # fmt: skip
    assert at_once.read_bytes() == repeated.read_bytes()
    expected = revseq.inline(embedding_tagger(), target=("tvm", "tract"))
    assert onnx.load(at_once).graph == expected.graph


def test_the_targets_table_fits_a_terminal(capsys):
    code, out, _ = _run(capsys, "targets")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "portable" in out and "|" not in out


@pytest.mark.parametrize("command", ["probe", "inline", "check", "restore", "demo"])
def test_help_shows_no_default_for_a_flag(capsys, command):
    _, out, _ = _run(capsys, command, "--help")
    assert "(default: True)" not in out and "(default: False)" not in out


@pytest.mark.parametrize("command", [(), ("inline",), ("check",)])
def test_help_has_examples(capsys, command):
    code, out, _ = _run(capsys, *command, "--help")
    assert code == 0
    assert "examples:" in out and "revseq " in out.split("examples:")[1]


def test_an_unknown_target_says_what_a_target_is(tmp_path, capsys):
    onnx.save(embedding_tagger(), tmp_path / "m.onnx")
    code, _, err = _run(capsys, "inline", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx",
                        "--target", "tvmm")  # fmt: skip
    assert code == 2
    assert "did you mean 'tvm'" in err and "nor an ONNX op type" in err
    assert "collection" not in err


def test_a_check_against_a_restored_model_speaks_of_nodes_not_decompositions():
    model = embedding_tagger()
    restored = revseq.restore(revseq.inline(model))
    assert "ReverseSequence" in {n.op_type for n in restored.graph.node}
    report = revseq.check(model, restored)
    assert report.ok
    assert "decomposition" not in report.message
    assert "1 ReverseSequence node(s) of the reference checked alone" in report.message


def test_a_refusal_gives_its_reason_once():
    model = reverse_sequence_model(["T", "B", 8], onnx.TensorProto.FLOAT)  # all fail alike
    with pytest.raises(revseq.StrategyError) as caught:
        revseq.inline(model, target="webnn")
    message = str(caught.value)
    reason = "a run-time index needs Range or ConstantOfShape+CumSum, which the target lacks"
    assert message.count(reason) == 1 and "int64" not in message, message


def test_a_probe_that_ran_no_form_with_symbolic_dims_says_so():
    model = reverse_sequence_model(["T", "B", 8], onnx.TensorProto.INT32)
    with pytest.raises(revseq.StrategyError) as caught:
        revseq.inline(model, target="x2paddle")
    message = str(caught.value)
    assert "no form ran exactly there with symbolic dims when it was probed" in message
    assert message.endswith("declare static input shapes") and "int64" not in message


def test_the_readme_names_the_extras_its_examples_need_and_the_test_time():
    readme = (ROOT / "README.md").read_text()
    assert 'pip install "revseq[torch]"' in readme
    assert 'pip install "revseq[onnx2torch]"' in readme
    assert "minutes on two cores" in readme
    assert "`webnn`, `qnn`" in readme and "static dims only" in readme


def test_per_node_check_names_one_thing_everywhere():
    """``--per-node`` checks one model's nodes; ``check REF CAND`` runs nodes alone."""
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    entry = glossary.split("**per-node check**", 1)[1].split("\n\n", 1)[0]
    assert "--per-node" in entry and "REF CAND" not in entry
    alone = glossary.split("**run alone**", 1)[1].split("\n\n", 1)[0]
    assert "revseq check REF CAND" in alone
    for page in (ROOT / "README.md", *(ROOT / "docs").glob("*.md")):
        text = page.read_text()
        for line in text.splitlines():
            if "per-node" in line.lower() and page.name != "glossary.md":
                assert "--per-node" in line or "per-node check" not in line, (page, line)
