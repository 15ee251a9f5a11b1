"""The ``revseq`` command line, run as a subprocess the way users run it."""

from __future__ import annotations

import json
import os
import pathlib

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import assert_one_line_error, revseq, time_shorter_than_lengths_model

FLOAT = onnx.TensorProto.FLOAT
INT64 = onnx.TensorProto.INT64


def _model(batch_axis: int = 1, time_axis: int = 0) -> onnx.ModelProto:
    node = oh.make_node(
        "ReverseSequence",
        ["x", "lens"],
        ["y"],
        batch_axis=batch_axis,
        time_axis=time_axis,
        name="rs",
    )
    dims = ["T", "B", 3] if time_axis == 0 else ["B", "T", 3]
    graph = oh.make_graph(
        [node, oh.make_node("Relu", ["y"], ["z"], name="relu")],
        "g",
        [
            oh.make_tensor_value_info("x", FLOAT, dims),
            oh.make_tensor_value_info("lens", INT64, ["B"]),
        ],
        [oh.make_tensor_value_info("z", FLOAT, dims)],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


@pytest.fixture
def model_path(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "model.onnx"
    onnx.save(_model(), path)
    return path


def test_inline_writes_a_model_without_reverse_sequence(model_path, tmp_path):
    out = tmp_path / "out.onnx"
    before = model_path.read_bytes()
    result = revseq("inline", model_path, "-o", out, "--check")
    assert result.returncode == 0, result.stderr
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert "ReverseSequence" not in [n.op_type for n in written.graph.node]
    assert model_path.read_bytes() == before
    assert "inline:" in result.stderr


@pytest.mark.parametrize("strategy", ["gather_elements", "gather_nd", "gather_rows"])
def test_inline_strategies_and_function_form(model_path, tmp_path, strategy):
    out = tmp_path / "out.onnx"
    result = revseq(
        "inline", model_path, "-o", out, "--strategy", strategy, "--as-function", "-q"
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    written = onnx.load(out)
    assert [f.domain for f in written.functions] == ["revseq.inline"]
    assert revseq("check", model_path, out, "-q").returncode == 0


def test_inline_target_profile_and_missing_op(model_path, tmp_path):
    out = tmp_path / "out.onnx"
    assert revseq("inline", model_path, "-o", out, "--target", "webgpu").returncode == 0
    result = revseq("inline", model_path, "-o", out, "--target", "nnapi")
    assert_one_line_error(result, "model.onnx")


def test_check_exit_codes(model_path, tmp_path):
    same = revseq("check", model_path, model_path, "--trials", "2", "--seed", "3")
    assert same.returncode == 0, same.stderr
    assert "OK" in same.stdout
    other = tmp_path / "other.onnx"
    onnx.save(_model(batch_axis=0, time_axis=1), other)
    # Same signature names, different computation: a difference, exit 1.
    different = _model()
    different.graph.node[1].op_type = "Neg"
    onnx.save(different, other)
    result = revseq("check", model_path, other)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_check_per_node(model_path):
    result = revseq("check", model_path, "--per-node")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "1 of 1 node(s) identical" in result.stdout


def test_info_text_and_json(model_path):
    text = revseq("info", model_path)
    assert text.returncode == 0
    assert "ReverseSequence nodes: 1" in text.stdout
    data = json.loads(revseq("info", model_path, "--json").stdout)
    assert data["reverse_sequence"]["count"] == 1
    assert data["reverse_sequence"]["nodes"][0]["constant_lengths"] is False
    assert data["opset_imports"] == {"": 17}


def test_restore_round_trip_or_clear_refusal(model_path, tmp_path):
    inlined = tmp_path / "inlined.onnx"
    assert revseq("inline", model_path, "-o", inlined).returncode == 0
    out = tmp_path / "restored.onnx"
    result = revseq("restore", inlined, "-o", out, "--check")
    if result.returncode == 2:
        assert_one_line_error(result, "restore is not available")
        assert not out.exists()
        return
    assert result.returncode == 0, result.stderr
    restored = onnx.load(out)
    assert [n.op_type for n in restored.graph.node] == ["ReverseSequence", "Relu"]


def test_demo_runs_on_a_folder(model_path, tmp_path):
    result = revseq("demo", "--models", model_path.parent)
    assert result.returncode == 0, result.stderr
    assert "| model.onnx | 1 |" in result.stdout
    assert "bit-identical" in result.stdout


def test_bad_usage_exits_2():
    assert revseq().returncode == 2
    assert revseq("inline").returncode == 2
    assert revseq("no-such-command").returncode == 2


@pytest.mark.parametrize("command", ["inline", "restore", "check", "info"])
def test_missing_input(tmp_path, command):
    missing = tmp_path / "missing.onnx"
    args = {
        "inline": ["inline", missing, "-o", tmp_path / "o.onnx"],
        "restore": ["restore", missing, "-o", tmp_path / "o.onnx"],
        "check": ["check", missing, missing],
        "info": ["info", missing],
    }[command]
    result = revseq(*args)
    assert_one_line_error(result, "missing.onnx")
    assert not (tmp_path / "o.onnx").exists()


def test_unwritable_output_leaves_nothing(model_path, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    result = revseq("inline", model_path, "-o", blocker / "out.onnx")
    assert_one_line_error(result, "out.onnx")
    assert blocker.read_text() == "not a folder"


def test_output_equal_to_input_is_allowed_on_purpose(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(_model(), path)
    result = revseq("inline", path, "-o", path)
    assert result.returncode == 0, result.stderr
    assert "ReverseSequence" not in [n.op_type for n in onnx.load(path).graph.node]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_inline_check_numbers(model_path, tmp_path):
    out = tmp_path / "out.onnx"
    assert revseq("inline", model_path, "-o", out).returncode == 0
    import onnxruntime as ort

    feeds = {
        "x": np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32),
        "lens": np.array([4, 1], dtype=np.int64),
    }
    got = ort.InferenceSession(str(out)).run(None, feeds)[0]
    expected = ort.InferenceSession(str(model_path)).run(None, feeds)[0]
    assert got.tobytes() == expected.tobytes()


def test_outputs_get_the_mode_a_user_expects(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(_model(), path)
    os.chmod(path, 0o640)
    assert revseq("inline", path, "-o", path, "-q").returncode == 0  # in place: kept
    assert path.stat().st_mode & 0o777 == 0o640
    new = tmp_path / "new.onnx"
    umask = os.umask(0o022)
    os.umask(umask)
    assert revseq("inline", path, "-o", new, "-q").returncode == 0
    assert new.stat().st_mode & 0o777 == 0o666 & ~umask


def test_an_unknown_target_gets_the_closest_name(model_path, tmp_path):
    result = revseq("inline", model_path, "-o", tmp_path / "o.onnx", "--target", "tvmm")
    assert_one_line_error(
        result, "unknown target 'tvmm'", "did you mean 'tvm'", "neither a profile"
    )
    assert result.stderr.count("unknown target") == 1
    assert "inline: reading" not in result.stderr  # refused before any work


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_impossible_trials_are_refused(model_path, value):
    result = revseq("check", model_path, model_path, "--trials", value)
    assert result.returncode == 2
    assert "--trials" in result.stderr and "Traceback" not in result.stderr


def test_a_missing_output_folder_is_reported_before_any_work(model_path, tmp_path):
    result = revseq("inline", model_path, "-o", tmp_path / "nowhere" / "o.onnx")
    assert_one_line_error(result, "does not exist")
    assert "reading" not in result.stderr


def test_version():
    import revseq as api

    result = revseq("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"revseq {api.__version__}"
    assert api.__version__[0].isdigit()


@pytest.mark.parametrize("command", ["inline", "restore", "check", "info", "probe"])
def test_every_positional_argument_has_help(command):
    from revseq.cli._parser import build_parser

    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    for action in sub._actions:
        if not action.option_strings:
            assert action.help, f"{command} {action.dest}"


def test_a_run_the_native_op_refuses_is_one_line_without_onnxruntimes_log(tmp_path):
    """onnxruntime logged the kernel's failure on its own (a coloured line of its
    logger) before the exception that carries the same words: the user saw it twice."""
    model = tmp_path / "model.onnx"
    onnx.save(time_shorter_than_lengths_model(), model)
    inlined = tmp_path / "inlined.onnx"
    assert revseq("inline", model, "-o", inlined).returncode == 0
    result = revseq("check", model, inlined)
    assert_one_line_error(result, "Invalid sequence length: 6")
    assert "onnxruntime:" not in result.stderr.replace("[ONNXRuntimeError]", "")
    assert "sequential_executor" not in result.stderr


def test_a_long_error_keeps_its_start_and_the_reason_at_its_end():
    from revseq.errors import one_line

    error = RuntimeError("[ONNXRuntimeError] : 1 : FAIL : " + "frame " * 100 + "why: B=3")
    text = one_line(error, 120)
    assert len(text) <= 120 and text.startswith("[ONNXRuntimeError]")
    assert text.endswith("why: B=3") and " … " in text


def test_inline_for_the_finite_target_says_what_changed_and_what_was_checked(
    model_path, tmp_path
):
    out = tmp_path / "finite.onnx"
    done = revseq("inline", model_path, "-o", out, "--target", "ncnn-finite")
    assert done.returncode == 2 and "strategy 'one_hot' needs static dims" in done.stderr
    fixed = ["--overwrite-input-shape", "x:[4,2,3]", "--check"]
    done = revseq("inline", model_path, "-o", out, "--target", "ncnn-finite", *fixed)
    assert done.returncode == 0, done.stderr
    assert "input 'lens' is now float32" in done.stderr
    assert "check: OK on finite float32 data without -0.0" in done.stderr
    done = revseq("check", model_path, out)
    assert done.returncode == 0 and "domain: finite float32 data" in done.stdout


@pytest.mark.parametrize(
    ("step", "still_missing", "code", "said"),
    [
        ("npm install failed: E404", None, 2, "error: webgpu-setup: npm install failed"),
        (None, "node is not on the PATH", 2, "revseq: error: node is not on the PATH"),
        (None, None, 0, "installed in /cache"),
    ],
)
def test_a_setup_command_is_its_backend_s_and_says_a_failed_step_in_one_line(
    monkeypatch, capsys, step, still_missing, code, said
):
    """``revseq NAME-setup`` runs what the backend's room declares; a failed step, or a
    backend that still cannot run, is one line and exit 2."""
    import dataclasses

    from revseq.backends import _adapter
    from revseq.cli import main

    def setup(progress):
        if step is not None:
            raise RuntimeError(step)
        return "onnxruntime-web 1.0 installed in /cache"

    real = _adapter.adapter("webgpu")
    monkeypatch.setattr(
        _adapter, "adapter", lambda name: dataclasses.replace(real, setup=setup)
    )
    monkeypatch.setattr(_adapter, "unavailable", lambda name: still_missing)
    assert main(["webgpu-setup", "--quiet"]) == code
    out, err = capsys.readouterr()
    assert said in (out if code == 0 else err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == (code != 0)
