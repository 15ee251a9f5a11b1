"""The device rows (``bench --device``): onnx2torch against a copy on the device and
against hand-written torch, each module's time, the ``onnx2torch-cuda`` backend."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from helpers import onnx2torch_here

import revseq
from bench import _executorch_bench, _node_costs, bench
from revseq import backends
from revseq.measure import _cases


@onnx2torch_here
@pytest.mark.parametrize(("batch_axis", "time_axis"), [(1, 0), (0, 1)])
def test_hand_written_torch_forms_equal_the_reference(batch_axis, time_axis):
    import torch

    from bench import _torch_bench as _bench_torch
    from revseq.ops.reference import reverse_sequence

    shape = [5, 4, 3]
    case = _cases.Case(tuple(shape), batch_axis, time_axis, "float32")
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    lens = np.array([0, 1, 5, 3] if time_axis == 0 else [0, 1, 4, 3, 2], np.int64)
    expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    one_hot = _executorch_bench.one_hot(case)
    written = {**_bench_torch.hand_written(case), "one-hot": one_hot}
    for name, function in written.items():
        got = function(torch.from_numpy(x), torch.from_numpy(lens)).numpy()
        assert got.tobytes() == expected.tobytes(), name
    x.flat[0], x.flat[-1] = -0.0, np.inf  # outside the one-hot's domain: it differs
    expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    got = written["one-hot"](torch.from_numpy(x), torch.from_numpy(lens)).numpy()
    assert got.tobytes() != expected.tobytes()


@onnx2torch_here
def test_device_rows_time_onnx2torch_against_a_device_copy_and_hand_written_torch(tmp_path):
    page = tmp_path / "gpu.md"
    argv = ["--backend", "onnx2torch", "--device", "cpu", "--shape", "2000,16"]
    argv += ["--dims", "static,all", "--rounds", "3", "--budget", "0.01", "--write", str(page)]
    assert bench.main(argv) == 0
    text = page.read_text()
    assert "copy of the data on the device" in text and "device cpu (cpu)" in text
    header = next(line for line in text.splitlines() if line.startswith("| shape"))
    columns = header.strip("| ").split(" | ")
    rows = [line.strip("| ").split(" | ") for line in text.splitlines() if "| [2000" in line]
    assert [row[1] for row in rows] == ["static", "all"]
    for row in rows:
        cells = dict(zip(columns, row, strict=True))
        for name in ("torch gather", "torch rows", "default", "own target"):
            assert cells[name].split("x")[0].replace(".", "").isdigit(), (name, cells[name])
        assert "wrong values" not in row
        if backends.installed("executorch"):  # run by ExecuTorch's runtime
            for name in ("ExecuTorch converter", "ExecuTorch torch gather"):
                assert cells[name].split("x")[0].replace(".", "").isdigit(), cells[name]
    assert "default, all dims: geomean" in text and "the torch gather" in text
    if backends.installed("executorch"):
        assert "ExecuTorch converter, all dims: geomean" in text
        assert "the ExecuTorch torch gather" in text


@onnx2torch_here
def test_node_costs_time_every_module_of_the_default_and_the_own_target():
    from bench import _backend_bench as _bench_backend

    case = _cases.Case((2000, 16), 1, 0, "float32")
    rows = _node_costs.node_costs("cpu", [case], ["static", "all"], calls=2)
    assert [(r["dims"], r["variant"]) for r in rows] == [
        ("static", "default"),
        ("static", "own target"),
        ("all", "default"),
        ("all", "own target"),
    ]
    lens = np.array([0, 1, 2000] + [5] * 13, np.int64)
    for row in rows:
        model = _bench_backend.backend_models("onnx2torch", case, row["dims"], lens)
        modules = row["modules"]
        nodes = model[row["variant"]].graph.node
        assert {op: len(times) for op, times in modules.items()} == dict(
            collections.Counter(n.op_type for n in nodes)
        )
        assert all(t > 0 for times in modules.values() for t in times) and row["call"] > 0
    table = _node_costs.format_node_costs(rows)
    assert table.count("| [2000, 16] time-major float32 |") == 4 and "Range (1)" in table


@pytest.mark.parametrize("argv", [["--node-costs"], ["--backend", "tract", "--node-costs"]])
def test_node_costs_need_a_device(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    assert "give it with --device" in capsys.readouterr().err.splitlines()[-1]


def test_device_page_ratios_are_over_the_device_copy():
    from bench import _torch_bench as _bench_torch

    def row(shape, default, own):
        result = {"device copy": (1e-4, 1.0), "memcpy": (1e-3, 9.0)}
        result |= {"default": (3e-4, default), "own target": (0, own)}
        case = _cases.Case(shape, 1, 0, "float32")
        return {"case": case, "dims": "all", "result": result, "notes": {}, "nodes": {}}

    rows = [row((64, 32, 256), 1.0, 1.0), row((256, 64, 256), 4.0, 2.25)]
    text = _bench_torch.format_device("onnx2torch on cuda", rows)
    assert "goal" not in text
    default = next(line for line in text.splitlines() if line.startswith("default, all"))
    assert "2.00x the device copy (worst 4.00x)" in default  # not numpy's copy
    own = next(line for line in text.splitlines() if line.startswith("own target, all"))
    assert "1.50x the device copy (worst 2.25x)" in own


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device", "cpu"], "give it with --backend onnx2torch"),
        (["--backend", "tract", "--device", "cpu"], "give it with --backend onnx2torch"),
        (["--backend", "onnx2torch", "--device", "nosuch"], "--device nosuch: "),
    ],
)
def test_bad_device_arguments_are_refused_in_one_line(capsys, argv, message):
    if "nosuch" in argv and not revseq.backends.installed("onnx2torch"):
        pytest.skip("onnx2torch is not installed")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


@onnx2torch_here
def test_onnx2torch_cuda_runs_on_the_device_its_variable_names(monkeypatch):
    from revseq.backends import onnx2torch_cuda

    monkeypatch.setenv(onnx2torch_cuda.DEVICE_VARIABLE, "nosuch")
    reason = revseq.backends.unavailable("onnx2torch-cuda")
    assert reason is not None and reason.startswith("onnx2torch-cuda: torch cannot use")
    monkeypatch.setenv(onnx2torch_cuda.DEVICE_VARIABLE, "cpu")
    case = _cases.Case((6, 4, 3), 1, 0, "float32")
    feeds = _cases.input_arrays(case, np.random.default_rng(1))
    model = revseq.inline(_cases.native_model(case, dims="all"))
    got = revseq.backends.get("onnx2torch-cuda").run(model, feeds)[0]
    expected = revseq.ops.reference.reverse_sequence(feeds["x"], feeds["lens"])
    assert got.tobytes() == expected.tobytes()
