"""Every command and API function on every bad input: a clear error, nothing written.

The CLI runs in-process (``revseq.cli.main``) for the full corpus x command matrix, and
as a real subprocess for ``check`` (which would hand models to onnxruntime, whose
rank-1 ReverseSequence kills the process) and for one file per command.
"""

from __future__ import annotations

import hashlib
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from bad_inputs import write_corpus

import revseq
from revseq import files
from revseq.cli import main

COMMANDS = ("inline", "restore", "check", "info", "check_per_node")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def _args(command: str, path: pathlib.Path, out: pathlib.Path) -> list[str]:
    return {
        "inline": ["inline", str(path), "-o", str(out)],
        "restore": ["restore", str(path), "-o", str(out)],
        "check": ["check", str(path), str(path)],
        "info": ["info", str(path)],
        "check_per_node": ["check", str(path), "--per-node"],
    }[command]


def _digest(path: pathlib.Path) -> str | None:
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Every command refuses every entry, node-level ones included: restore validates the
# ReverseSequence nodes it finds as inline does, and info lists them (marking the
# invalid ones) before it exits 2.


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_on_every_bad_input(corpus, command, tmp_path, capsys):
    tried = 0
    for name, bad in corpus.items():
        out = tmp_path / f"{name}.out.onnx"
        before = _digest(bad.path)
        code = main(_args(command, bad.path, out))
        captured = capsys.readouterr()
        tried += 1
        assert _digest(bad.path) == before, name  # the input is never touched
        if command == "info" and not bad.file_level:
            assert "INVALID: " in captured.out and bad.keyword in captured.out, name
        if command == "info" and bad.keyword == "checker":  # described, with a warning
            assert code == 0 and "ReverseSequence nodes:" in captured.out, captured
            assert captured.err.startswith("revseq: warning: ") and bad.keyword in captured.err
            continue
        errors = [line for line in captured.err.splitlines() if line.startswith("revseq:")]
        if command == "info":  # what onnx's checker says is a warning beside the error
            errors = [line for line in errors if not line.startswith("revseq: warning: ")]
        assert code == 2, (name, captured.err)
        assert "Traceback" not in captured.err, name
        assert len(errors) == 1 and "error:" in errors[0], (name, captured.err)
        said = captured.err if command == "info" else errors[0]  # the checker's: warned
        assert bad.keyword in said, (name, errors[0])
        assert name in errors[0] or str(bad.path) in errors[0], (name, errors[0])
        assert not out.exists(), name
        assert not list(tmp_path.glob(".*.tmp")), name
    assert tried == len(corpus) >= 20


@pytest.mark.parametrize("command", ["inline", "check", "info"])
def test_subprocess_refuses_without_traceback(corpus, command, tmp_path):
    names = ["rank_1.onnx", "random.onnx", "escape.onnx"]
    for name in names:
        bad = corpus[name]
        result = subprocess.run(
            [sys.executable, "-m", "revseq", *_args(command, bad.path, tmp_path / "o.onnx")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2, (name, result.stderr)
        assert "Traceback" not in result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("revseq:")]
        assert len(errors) == 1, result.stderr
        assert bad.keyword in result.stderr


def test_api_functions_raise_specific_errors(corpus):
    for bad in corpus.values():
        if bad.file_level:
            with pytest.raises(revseq.ModelLoadError, match=bad.keyword):
                revseq.inline(bad.path)
            with pytest.raises(revseq.ModelLoadError):
                revseq.restore(str(bad.path))
            with pytest.raises(revseq.ModelLoadError):
                revseq.check(bad.path, bad.path)
        else:
            with pytest.raises(
                (revseq.InvalidNodeError, revseq.UnsupportedOpsetError), match=bad.keyword
            ):
                revseq.inline(bad.path)
            with pytest.raises(revseq.CheckError):
                revseq.check(bad.path, bad.path)
            with pytest.raises(
                (revseq.InvalidNodeError, revseq.UnsupportedOpsetError), match=bad.keyword
            ):
                revseq.restore(bad.path)


def test_external_data_round_trip_and_carry_over(tmp_path):
    weights = onnx.numpy_helper.from_array(np.arange(4096, dtype=np.float32), "w")
    node = onnx.helper.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs")
    add = onnx.helper.make_node("Add", ["r", "w"], ["y"])
    graph = onnx.helper.make_graph(
        [node, add],
        "g",
        [
            onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["T", "B", 4096]),
            onnx.helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, ["B"]),
        ],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["T", "B", 4096])],
        [weights],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    source = tmp_path / "in"
    source.mkdir()
    onnx.save(model, source / "m.onnx", save_as_external_data=True, location="m.data")
    # Same folder: the data file is referenced as it is.
    assert main(["inline", str(source / "m.onnx"), "-o", str(source / "out.onnx"), "-q"]) == 0
    assert sorted(p.name for p in source.iterdir()) == ["m.data", "m.onnx", "out.onnx"]
    # Another folder: the data file is copied next to the output.
    target = tmp_path / "out"
    target.mkdir()
    assert main(["inline", str(source / "m.onnx"), "-o", str(target / "m.onnx"), "-q"]) == 0
    assert sorted(p.name for p in target.iterdir()) == ["m.onnx", "m.onnx.m.data"]
    loaded = onnx.load(target / "m.onnx")
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(loaded.graph.initializer[0]), np.arange(4096)
    )
    report = revseq.check(source / "m.onnx", target / "m.onnx", trials=1)
    assert report.ok
    # And back: restore(inline(m)) keeps the external weights and the op.
    assert main(["restore", str(target / "m.onnx"), "-o", str(target / "r.onnx"), "-q"]) == 0
    restored = onnx.load(target / "r.onnx", load_external_data=False)
    assert [n.op_type for n in restored.graph.node] == ["ReverseSequence", "Add"]
    assert restored.graph.initializer[0].external_data[0].value == "m.onnx.m.data"
    assert revseq.check(source / "m.onnx", target / "r.onnx", trials=1).ok


def test_atomic_save_leaves_previous_output(tmp_path, monkeypatch):
    path = tmp_path / "out.onnx"
    path.write_bytes(b"previous")
    model = onnx.helper.make_model(
        onnx.helper.make_graph([], "g", [], []),
        opset_imports=[onnx.helper.make_opsetid("", 17)],
    )

    write_bytes = pathlib.Path.write_bytes

    def half_then_full(self, data):  # the disk fills half-way through the write
        write_bytes(self, data[: len(data) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(pathlib.Path, "write_bytes", half_then_full)
    with pytest.raises(revseq.ModelSaveError, match="disk full"):
        files.save_model(__import__("onnx_ir").from_proto(model), path)
    monkeypatch.undo()
    assert path.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.onnx"]
