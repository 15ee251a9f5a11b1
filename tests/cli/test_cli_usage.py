"""What a new user meets first: help, synopsis forms, the targets table, message wording."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import helpers
import numpy as np
import onnx
import pytest
from real_models import embedding_tagger, tf_reverse

import revseq
from revseq.cli import main
from revseq.ops.reference import reverse_sequence_model
from revseq.ops.targets import PORTABLE, TARGETS

ROOT = helpers.ROOT


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


def test_the_targets_table_fits_a_terminal_and_marks_the_default(capsys):
    code, out, _ = _run(capsys, "targets")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "|" not in out
    rows = [line.split() for line in out.split("\n\n")[0].splitlines()[1:]]
    marked = [row[0] for row in rows if row[0].endswith("*")]
    assert marked == [f"{PORTABLE}*"] and "* the default" in out


def test_the_targets_json_holds_what_the_table_lists_in_the_same_words(capsys):
    _, table, _ = _run(capsys, "targets")
    code, text, _ = _run(capsys, "targets", "--json")
    assert code == 0
    listed = json.loads(text)
    rows = [line.split() for line in table.split("\n\n")[0].splitlines()[1:]]
    assert [row[0].rstrip("*") for row in rows] == list(listed) == list(revseq.TARGETS)
    assert [row[1] for row in rows] == [p["source"] for p in listed.values()]
    assert [n for n, p in listed.items() if p["default"]] == [PORTABLE]
    assert listed["any"]["static_ops"] is None  # any op, not none


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    """``revseq targets | head -1``: no traceback, no error line, exit 0."""
    for args in (["targets"], ["targets", "--json"], ["inline", "--help"]):
        shell = f"{sys.executable} -m revseq {' '.join(args)} | head -1; "
        shell += 'echo "status ${PIPESTATUS[0]}"'
        done = subprocess.run(
            ["bash", "-c", shell], capture_output=True, text=True, check=True
        )
        assert done.stdout.splitlines()[-1] == "status 0", (args, done.stdout)
        assert done.stderr == "", (args, done.stderr)


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
    reason = (
        "a run-time index needs Range+Squeeze (lacks Range) or ConstantOfShape+CumSum "
        "(lacks ConstantOfShape)"
    )
    assert message.count(reason) == 1 and "int64" not in message, message


_DEFAULT_OPS = [
    "Add",
    "Cast",
    "Gather",
    "Less",
    "Mul",
    "Range",
    "Reshape",
    "Shape",
    "Sub",
    "Unsqueeze",
    "Where",
    "Relu",
]


def test_a_refusal_of_op_types_names_the_one_that_is_missing(tmp_path, capsys):
    """Twelve op types, Range among them and Squeeze not: the message says Squeeze."""
    model = ROOT / "models" / "batch_major.onnx"
    out = tmp_path / "out.onnx"
    code, _, err = _run(capsys, "inline", model, "-o", out, "-q", "--target", *_DEFAULT_OPS)
    assert code == 2 and not out.exists()
    assert "Range+Squeeze (lacks Squeeze)" in err, err
    assert (
        _run(capsys, "inline", model, "-o", out, "--target", *_DEFAULT_OPS, "Squeeze")[0] == 0
    )


def test_a_probe_that_ran_no_form_with_symbolic_dims_says_so():
    model = reverse_sequence_model(["T", "B", 8], onnx.TensorProto.INT32)
    with pytest.raises(revseq.StrategyError) as caught:
        revseq.inline(model, target="x2paddle")
    message = str(caught.value)
    assert "no form ran exactly there with symbolic dims when it was probed" in message
    assert message.endswith(
        "declare static input shapes (--overwrite-input-shape NAME:[D0,D1], or input_shapes=)"
    )
    assert "int64" not in message


def test_the_readme_names_the_extras_its_examples_need_and_the_test_time():
    readme = (ROOT / "README.md").read_text()
    assert 'pip install "onnx-revseq[torch]"' in readme
    assert 'pip install "onnx-revseq[onnx2torch]"' in readme
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


def test_whole_models_that_agree_within_tolerance_exit_0_and_say_the_tolerance(
    tmp_path, capsys
):
    model, inlined = tmp_path / "m.onnx", tmp_path / "i.onnx"
    onnx.save(tf_reverse(), model)
    assert _run(capsys, "inline", model, "-o", inlined, "-q")[0] == 0
    code, out, err = _run(capsys, "check", model, inlined, "-q", "--backend", "onnxruntime",
                          "--whole-model")  # fmt: skip
    assert code == 0, (out, err)
    verdict = out.splitlines()[0]
    assert verdict.startswith("OK: ") and "within rtol=1e-05, atol=1e-06" in verdict
    assert "bit-identical" not in verdict and "INCONCLUSIVE" not in out
    # What it fed the input (floats in [0, 1], as polygraphy draws them), and what it
    # proved first in onnxruntime: each decomposition alone, bit for bit.
    assert "input x: generated in [0, 1], as polygraphy draws floats" in out, out
    assert "node OK" in out and "on onnxruntime" in out, out
    assert "largest error: " in out, out


def test_models_that_take_different_inputs_are_named_by_their_files(tmp_path, capsys):
    ref, cand = tmp_path / "ref.onnx", tmp_path / "cand.onnx"
    onnx.save(reverse_sequence_model(["T", "B", 3], onnx.TensorProto.FLOAT), ref)
    onnx.save(tf_reverse(), cand)
    code, _, err = _run(capsys, "check", ref, cand, "-q")
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{ref} takes ['x', 'lens'], {cand} takes ['x']" in err, err


def test_the_glossary_defines_every_form_the_readme_names():
    from revseq.ops.forms import FORMS

    readme = (ROOT / "README.md").read_text()
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    forms = {*FORMS, "reverse_all", "slices", "one_hot"}
    named = {name for name in forms if f"`{name}`" in readme}
    for name in named:
        assert f"**{name}**" in glossary or f"`{name}`" in glossary, name
    assert "**slices**" in glossary and "**one_hot**" in glossary


def test_a_refusal_names_every_form_it_tried_slices_included():
    model = reverse_sequence_model([4, 6, 2, 3, 2], onnx.TensorProto.FLOAT, batch_axis=0,
                                   time_axis=1, lens=np.array([0, 1, 6, 3]))  # fmt: skip
    profile = dataclasses.replace(
        TARGETS["ncnn"], static_ops=TARGETS["ncnn"].static_ops - {"Reshape"}
    )
    with pytest.raises(revseq.StrategyError) as caught:
        revseq.inline(model, target=profile)
    message = str(caught.value)
    for form in ("gather_rows", "gather_nd", "gather_elements", "slices"):
        assert f"strategy {form!r}" in message, message
