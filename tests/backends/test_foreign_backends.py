"""Backends in an environment of their own: the server, its wire format, the adapters.

The mechanism is tested with this interpreter standing in for another environment and a
runner written here; what RKNN, x2paddle and LiteRT do themselves is tested in their
rooms (``tests/backends/rknn/``, ``x2paddle/``, ``litert/``), where their environments
are named, and skipped with the reason elsewhere.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import pytest
from backend_cases import backend_or_skip as _environment_or_skip

import revseq
from revseq.backends import (
    BackendError,
    MeasuredOutputs,
    _foreign,
    adapter,
    unavailable,
)
from revseq.backends._isolated import BackendCrashError, _absolute_python_path
from revseq.measure._timing import time_once
from revseq.ops.reference import reverse_sequence_model

RUNNER = """
import os, sys, time
import numpy as np

def prepare(model_bytes):
    print("noise on stdout, as runtimes print")
    if model_bytes == b"refuse":
        raise ValueError("no such layer")

    def run(feeds):
        x = feeds["x"]
        if x.size and x.flat[0] == 99:
            os.abort()
        if x.size and x.flat[0] == 98:
            raise RuntimeError("bad input")
        if x.size and x.flat[0] == 97:
            time.sleep(0.2)
        if x.size and x.flat[0] == 95:  # as a runtime logs and goes on
            print("ValueError: what an earlier model made it say", file=sys.stderr)
        if x.size and x.flat[0] == 96:  # as a converter saves what it folds
            open("folded.npy", "w").write("litter")
        return [x[::-1].copy(), np.asarray(sys.path[0] == os.path.dirname(__file__))]

    return run
"""


class _Bytes:
    """A stand-in for a ModelProto: what ``prepare`` serialises."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def SerializeToString(self) -> bytes:
        return self.payload


@pytest.fixture
def runner(tmp_path, monkeypatch):
    path = tmp_path / "fake_runtime.py"
    path.write_text(RUNNER)
    monkeypatch.setenv("REVSEQ_FAKE_PYTHON", sys.executable)
    yield str(path)
    worker = _foreign._WORKERS.pop("fake", None)
    if worker is not None:
        worker.close()


def _prepare(runner: str, payload: bytes = b"model"):
    return _foreign.prepare("fake", "REVSEQ_FAKE_PYTHON", runner, _Bytes(payload))


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.int64).reshape(4, 3),
        np.array([np.nan, -0.0, np.inf], np.float32),
        np.zeros((0, 3), np.float16),
        np.array([[True], [False]]),
    ],
    ids=["int64", "specials", "empty", "bool"],
)
def test_arrays_cross_to_the_other_environment_and_back_byte_for_byte(runner, array):
    got, _ = _prepare(runner)({"x": array})
    want = array[::-1]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_a_run_is_timed_where_it_ran_and_timing_counts_that_time(runner):
    """No wall-clock limit: each time is bounded by what it must hold and by the call's."""
    import time

    run = _prepare(runner)
    started = time.perf_counter()
    quick = run({"x": np.arange(1 << 22, dtype=np.float64)})  # 32 MiB each way
    quick_call = time.perf_counter() - started
    started = time.perf_counter()
    slow = run({"x": np.array([97.0])})  # the run sleeps 0.2 s
    slow_call = time.perf_counter() - started
    assert isinstance(quick, MeasuredOutputs) and isinstance(slow, MeasuredOutputs)
    assert 0.2 <= slow.seconds <= slow_call  # the run's sleep counted, within the call
    # A reversed view copied, timed in the worker: the 64 MiB through the pipe, measured
    # by the same call side by side, are not counted.
    assert 0 <= quick.seconds < quick_call / 2, (quick.seconds, quick_call)
    assert time_once(lambda: MeasuredOutputs([], 123.0)) == 123.0
    started = time.perf_counter()
    here = time_once(lambda: [np.zeros(1)])  # anything else: this clock's time
    assert 0 <= here <= time.perf_counter() - started


@pytest.mark.parametrize("name", ["rknn", "x2paddle"])
def test_models_travel_to_older_onnx_with_the_lowest_ir_version_they_allow(name, monkeypatch):
    sent = []
    monkeypatch.setattr(_foreign, "prepare", lambda *args: sent.append(args[-1]))
    model = reverse_sequence_model(
        [6, 3, 4], onnx.TensorProto.FLOAT, batch_axis=1, time_axis=0
    )
    model.ir_version = 13
    adapter(name).prepare(model)
    assert sent[0].ir_version == onnx.helper.find_min_ir_version_for(list(model.opset_import))
    assert model.ir_version == 13  # the caller's model left alone


def test_the_runner_does_not_shadow_the_runtime_it_is_named_after(runner):
    _, first_on_path = _prepare(runner)({"x": np.zeros(2, np.float32)})
    assert not first_on_path


def test_a_refusal_and_a_failed_run_are_one_line_each(runner):
    with pytest.raises(BackendError, match=r"fake: convert failed: ValueError: no such layer"):
        _prepare(runner, b"refuse")
    run = _prepare(runner)
    with pytest.raises(BackendError, match=r"fake: run failed: RuntimeError: bad input"):
        run({"x": np.array([98.0])})


def test_what_a_runtime_writes_where_it_runs_stays_out_of_the_user_s_folder(
    runner, tmp_path, monkeypatch
):
    """A worker runs in a temporary folder of its own, removed when it closes; the
    folders of a relative ``PYTHONPATH`` still mean the user's."""
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.chdir(user)
    monkeypatch.setenv("PYTHONPATH", f"lib{os.pathsep}")
    assert _absolute_python_path() == {"PYTHONPATH": f"{user / 'lib'}{os.pathsep}{user}"}
    _prepare(runner)({"x": np.array([96.0])})
    worker = _foreign._WORKERS["fake"]
    assert worker._folder is not None
    folder = worker._folder.name
    assert list(user.iterdir()) == []
    assert os.listdir(folder) == ["folded.npy"]
    worker.close()
    assert not os.path.exists(folder)


def test_a_crash_is_an_error_and_the_next_call_starts_afresh(runner):
    run = _prepare(runner)
    with pytest.raises(BackendCrashError, match="SIGABRT"):
        run({"x": np.array([99.0])})
    got, _ = run({"x": np.array([1.0, 2.0])})  # prepared again in a fresh worker
    assert got.tolist() == [2.0, 1.0]


def test_a_crash_is_told_by_what_the_worker_wrote_while_it_ran_the_model(runner):
    """A runtime logs an error and goes on (RKNN refusing a model's opset); a later
    model that kills it must not be told by that line."""
    run = _prepare(runner)
    run({"x": np.array([95.0])})
    with pytest.raises(BackendCrashError, match="SIGABRT") as crash:
        run({"x": np.array([99.0])})
    assert "earlier model" not in str(crash.value)


def test_an_environment_not_named_or_not_fit_is_said(monkeypatch, tmp_path):
    monkeypatch.delenv("REVSEQ_FAKE_PYTHON", raising=False)
    why = _foreign.missing("fake", "REVSEQ_FAKE_PYTHON", "json")
    assert "set REVSEQ_FAKE_PYTHON to its interpreter" in why
    monkeypatch.setenv("REVSEQ_FAKE_PYTHON", str(tmp_path / "no-python"))
    assert "is no interpreter here" in _foreign.missing("fake", "REVSEQ_FAKE_PYTHON", "json")
    monkeypatch.setenv("REVSEQ_FAKE_PYTHON", sys.executable)
    assert _foreign.missing("fake", "REVSEQ_FAKE_PYTHON", "json") is None
    why = _foreign.missing("fake", "REVSEQ_FAKE_PYTHON", "no_such_runtime_revseq")
    assert "cannot import no_such_runtime_revseq" in why


@pytest.mark.parametrize("name", ["rknn", "x2paddle"])
def test_a_backend_without_its_environment_says_which_variable_to_set(name, monkeypatch):
    variable = f"REVSEQ_{name.upper()}_PYTHON"
    monkeypatch.delenv(variable, raising=False)
    assert variable in unavailable(name)


_TYPES = {"float32": onnx.TensorProto.FLOAT, "int32": onnx.TensorProto.INT32}
_TYPES["int64"] = onnx.TensorProto.INT64
_TYPES["float16"] = onnx.TensorProto.FLOAT16


@pytest.mark.backend
@pytest.mark.parametrize("name", ["x2paddle", "rknn"])
def test_a_symbolic_model_runs_there_once_its_shapes_are_fixed(name):
    _environment_or_skip(name)
    model = reverse_sequence_model(["T", "B", 4], _TYPES["int32"], batch_axis=1, time_axis=0)
    inlined = revseq.inline(model, target=name, input_shapes={"x": [6, 3, 4]})
    report = revseq.check(
        model, inlined, backend=name, trials=2, input_shapes={"x": [6, 3, 4]}
    )
    assert report.ok and report.exercised, report


def test_a_worker_that_died_while_idle_is_started_afresh_on_the_next_call():
    from revseq.backends._isolated import _worker, isolated

    model = reverse_sequence_model([4, 2, 3], onnx.TensorProto.FLOAT)
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    lens = np.array([4, 2], np.int64)
    runner = isolated("onnxruntime").prepare(model)
    first = runner({"x": x, "lens": lens})[0]
    process = _worker("onnxruntime")._process
    assert process is not None
    process.kill()  # between two calls: nothing was being asked of it
    process.wait()
    again = runner({"x": x, "lens": lens})[0]  # a fresh worker prepares the model anew
    assert again.tobytes() == first.tobytes()
    assert _worker("onnxruntime")._process is not process
