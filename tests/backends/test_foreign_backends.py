"""Backends in an environment of their own: the server, its wire format, the adapters.

The mechanism is tested with this interpreter standing in for another environment and a
runner written here; RKNN and x2paddle themselves run where their environments are named
(``REVSEQ_RKNN_PYTHON``, ``REVSEQ_X2PADDLE_PYTHON``), and are skipped with the reason
elsewhere.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
import pytest

import revseq
from revseq.backends import (
    BackendError,
    MeasuredOutputs,
    _foreign,
    adapter,
    get,
    unavailable,
)
from revseq.backends._isolated import BackendCrashError
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


def test_a_crash_is_an_error_and_the_next_call_starts_afresh(runner):
    run = _prepare(runner)
    with pytest.raises(BackendCrashError, match="SIGABRT"):
        run({"x": np.array([99.0])})
    got, _ = run({"x": np.array([1.0, 2.0])})  # prepared again in a fresh worker
    assert got.tolist() == [2.0, 1.0]


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


def _environment_or_skip(name: str):
    why = unavailable(name)
    if why is not None:
        pytest.skip(why)
    return get(name)


_TYPES = {"float32": onnx.TensorProto.FLOAT, "int32": onnx.TensorProto.INT32}
_TYPES["int64"] = onnx.TensorProto.INT64
_TYPES["float16"] = onnx.TensorProto.FLOAT16


@pytest.mark.backend
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_the_default_is_exact_on_x2paddle_with_static_dims(dtype):
    _environment_or_skip("x2paddle")
    model = reverse_sequence_model([6, 3, 4], _TYPES[dtype], batch_axis=1, time_axis=0)
    report = revseq.check(model, revseq.inline(model), backend="x2paddle", trials=2)
    assert report.ok and report.exercised, report


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


@pytest.mark.backend
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_rknn_s_own_reverse_sequence_is_wrong_where_the_inlined_one_is_exact(dtype):
    _environment_or_skip("rknn")
    model = reverse_sequence_model([6, 3, 4], _TYPES[dtype], batch_axis=1, time_axis=0)
    inlined = revseq.check(model, revseq.inline(model), backend="rknn", trials=2)
    assert inlined.ok and inlined.exercised, inlined
    native = revseq.check(model, model, backend="rknn", trials=2)  # its own op
    assert not native.ok and "lengths [0" in str(native.nodes[0]), native


def test_rknn_s_profile_keeps_it_out_of_the_default_and_names_what_it_lacks():
    from revseq.ops.targets import TARGETS

    profile = TARGETS["rknn"]
    assert profile.yields and profile.native is False
    assert "rknn" not in {m.name for m in TARGETS["portable"].members}
    # float32 is held as float16 there: GatherND alone gives back what it holds.
    assert profile.moves("GatherND", "float32") and not profile.moves("Gather", "float32")
    assert "float32 held as float16" in profile.description
    for dtype in ("int32", "float32"):
        model = reverse_sequence_model([6, 3, 4], _TYPES[dtype], batch_axis=1, time_axis=0)
        inlined = revseq.inline(model, target="rknn")
        assert "ReverseSequence" not in {n.op_type for n in inlined.graph.node}
    float16 = reverse_sequence_model([6, 3, 4], _TYPES["float16"], batch_axis=1, time_axis=0)
    with pytest.raises(revseq.RevseqError, match="moves no float16"):
        revseq.inline(float16, target="rknn")


@pytest.mark.backend
@pytest.mark.parametrize("layout", [(1, 0), (0, 1)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "int64", "bool"])
def test_rknn_s_own_target_is_exact_there_for_the_types_it_moves(dtype, layout):
    _environment_or_skip("rknn")
    batch_axis, time_axis = layout
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = reverse_sequence_model([6, 3, 4], elem, batch_axis=batch_axis, time_axis=time_axis)
    report = revseq.check(model, revseq.inline(model, target="rknn"), backend="rknn", trials=2)
    assert report.ok and report.exercised, report


def test_x2paddle_s_profile_keeps_it_to_static_dims_and_out_of_the_default():
    from revseq.ops.targets import TARGETS

    profile = TARGETS["x2paddle"]
    assert profile.yields and profile.native is False
    assert "x2paddle" not in {m.name for m in TARGETS["portable"].members}
    assert profile.forms["dynamic"] == frozenset()
    static = reverse_sequence_model([6, 3, 4], _TYPES["float32"], batch_axis=1, time_axis=0)
    used = {n.op_type for n in revseq.inline(static, target="x2paddle").graph.node}
    assert "ReverseSequence" not in used and "Where" not in used  # its Where broadcasts not
    symbolic = reverse_sequence_model(
        ["T", "B", 4], _TYPES["float32"], batch_axis=1, time_axis=0
    )
    with pytest.raises(revseq.StrategyError, match="declare static input shapes"):
        revseq.inline(symbolic, target="x2paddle")


_X2PADDLE_TYPES = (
    "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "int64", "bool",
    "complex64", "complex128",
)  # fmt: skip
"""What x2paddle's profile says its gathers move: every type of the op but float16 (its
converter fails), uint32, uint64 (Paddle has none), bfloat16 and string."""


@pytest.mark.backend
@pytest.mark.parametrize("layout", [(1, 0), (0, 1)], ids=str)
@pytest.mark.parametrize("dtype", _X2PADDLE_TYPES)
def test_x2paddle_s_own_target_is_exact_there_for_every_type_it_carries(dtype, layout):
    _environment_or_skip("x2paddle")
    batch_axis, time_axis = layout
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = reverse_sequence_model([6, 3, 4], elem, batch_axis=batch_axis, time_axis=time_axis)
    inlined = revseq.inline(model, target="x2paddle")
    report = revseq.check(model, inlined, backend="x2paddle", trials=2)
    assert report.ok and report.exercised, report


def test_x2paddle_s_profile_lists_the_types_its_tests_run():
    from revseq.ops.targets import TARGETS

    assert {t for t in _X2PADDLE_TYPES if TARGETS["x2paddle"].has(t)} == set(_X2PADDLE_TYPES)
    assert not TARGETS["x2paddle"].has("float16")


def test_rknn_builds_for_the_sizes_it_runs_at_so_its_symbolic_dims_are_its_static_ones():
    """Shape arithmetic is folded at its build: the form probes, run at fixed sizes, say
    which forms hold with symbolic dims (int64 index arithmetic: its int32 Mul fails)."""
    from revseq.ops.targets import TARGETS
    from revseq.probe.backend import FOLDED_AT_BUILD

    profile = TARGETS["rknn"]
    assert profile.static_ops | FOLDED_AT_BUILD == profile.dynamic_ops
    assert {"gather_rows", "gather_nd"} <= profile.forms["dynamic"]
    assert "gather_rows@int32" not in profile.forms["dynamic"]
    symbolic = reverse_sequence_model(
        ["T", "B", 4], _TYPES["int32"], batch_axis=1, time_axis=0
    )
    used = {n.op_type for n in revseq.inline(symbolic, target="rknn").graph.node}
    assert "Range" in used and "ReverseSequence" not in used


@pytest.mark.backend
@pytest.mark.parametrize(
    "layout", [(["T", "B", 4], 1, 0), (["B", "T", 4], 0, 1), (["T", "B"], 1, 0)], ids=str
)
@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "int64", "bool"])
def test_rknn_s_own_target_is_exact_there_with_symbolic_dims(dtype, layout):
    _environment_or_skip("rknn")
    dims, batch_axis, time_axis = layout
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = reverse_sequence_model(dims, elem, batch_axis=batch_axis, time_axis=time_axis)
    report = revseq.check(model, revseq.inline(model, target="rknn"), backend="rknn", trials=2)
    assert report.ok and report.exercised, report
    held_narrower = "exact to rknn's float16 storage of float32" in str(report)
    assert held_narrower == (dtype == "float32"), report


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


def test_what_a_backend_holds_narrower_is_rounded_as_ieee_converts():
    """RKNN holds float32 as float16: to nearest, a NaN's sign and top payload kept, quiet."""
    from revseq.equivalence.inputs.values import held

    bits = [0x7FC00123, 0xFF800123, 0x3F800001, 0x00000001, 0xFF800000, 0x80000000]
    x = np.array(bits, np.uint32).view(np.float32)
    got = held({"x": x, "n": np.arange(3)}, {"float32": "float16"})
    assert [hex(v) for v in got["x"].view(np.uint32)] == [
        "0x7fc00000", "0xffc00000", "0x3f800000", "0x0", "0xff800000", "0x80000000"
    ]  # fmt: skip
    assert got["n"].tobytes() == np.arange(3).tobytes()  # other types as given


def test_rknn_refuses_up_front_the_int32_arithmetic_its_build_crashes_on():
    from revseq.backends import rknn

    symbolic = reverse_sequence_model(["T", "B", 4], _TYPES["float32"])
    with pytest.raises(ValueError, match=r"int32 Less .*target='rknn'"):
        rknn.ADAPTER.prepare(revseq.inline(symbolic))  # the default: int32 index
    ids = reverse_sequence_model(["T", "B"], _TYPES["int32"])
    assert rknn._int32_arithmetic(revseq.inline(ids, target="rknn")) is None


@pytest.mark.backend
def test_rknn_s_int64_rounding_at_rank_4_is_said_with_the_difference():
    """RKNN moves int64 of rank 4 through float64: the report says so beside the values."""
    _environment_or_skip("rknn")
    model = reverse_sequence_model([5, 2, 3, 2], _TYPES["int64"], batch_axis=1, time_axis=0)
    x = (np.int64(2**53) + np.arange(60, dtype=np.int64) * 1413).reshape(5, 2, 3, 2)
    lens = np.array([5, 3], np.int64)
    inlined = revseq.inline(model, target="rknn")
    report = revseq.check(model, inlined, backend="rknn", inputs={"x": x, "lens": lens})
    assert not report.ok
    assert "through float64: values from 2^53 up come back rounded" in report.message
