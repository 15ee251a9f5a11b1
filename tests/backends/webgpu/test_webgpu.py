"""revseq's output on onnxruntime-web's WebGPU EP (Dawn, in Node): exact, and where each
node ran. Skipped with the reason where node, onnxruntime-web, Dawn or a Vulkan driver
is missing (``revseq webgpu-setup`` installs them). One worker serves every case of a
test session."""

from __future__ import annotations

import helpers
import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import model_of, revseq

import revseq as api
from revseq import backends
from revseq.equivalence.inputs.values import random_array
from revseq.ops.reference import reverse_sequence
from revseq.ops.vocabulary import ELEMENT_TYPES

pytestmark = pytest.mark.backend
FIXTURES = helpers.FIXTURES


@pytest.fixture(scope="module")
def webgpu() -> backends.Backend:
    reason = backends.unavailable("webgpu")
    if reason is not None:
        pytest.skip(reason)
    return backends.get("webgpu")


def _adapter_has_f16() -> bool:
    from revseq.backends.webgpu import worker

    return bool(worker().adapter["f16"])


def _dims(rank: int, time_axis: int, batch_axis: int, symbolic: bool) -> tuple:
    dims = [3] * rank
    dims[time_axis], dims[batch_axis] = ("T", "B") if symbolic else (5, 4)
    return tuple(dims)


@pytest.mark.parametrize("target", [None, "webgpu"])
@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
@pytest.mark.parametrize("rank", [2, 3, 4])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32", "bool", "float16"])
def test_output_runs_exactly_on_webgpu(webgpu, dtype, rank, symbolic, target):
    if dtype == "float16" and not _adapter_has_f16():
        pytest.skip("the WebGPU adapter has no shader-f16")
    for time_axis, batch_axis in ((0, 1), (1, 0)):
        model = model_of(_dims(rank, time_axis, batch_axis, symbolic), dtype, batch_axis,
                         time_axis)  # fmt: skip
        run = webgpu.prepare(api.inline(model, target=target))
        assert sum(len(nodes) for nodes in run.placement.values()) > 0
        rng = np.random.default_rng(rank)
        for time_len, batch in ((5, 4), (3, 2)) if symbolic else ((5, 4),):
            shape = [3] * rank
            shape[time_axis], shape[batch_axis] = time_len, batch
            x = random_array(rng, ELEMENT_TYPES[dtype], tuple(shape))
            lens = np.array([0, 1, time_len, 2][:batch], np.int64)
            got = run({"x": x, "lens": lens})[0]
            expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
            assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


_LAYOUTS = [(rank, b, t, "") for rank in (2, 3, 4, 5) for b, t in ((1, 0), (0, 1))] + [
    (3, 0, 2, "revseq"),
    (4, 2, 1, "revseq"),
    (5, 3, 1, "revseq"),
]


@pytest.mark.parametrize("target", ["webgpu", None], ids=["webgpu", "default"])
@pytest.mark.parametrize("kind", ["static", "time+batch", "all"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32", "bool", "uint8"])
def test_output_stays_on_the_gpu(webgpu, dtype, kind, target):
    """target="webgpu" and the default: exact, no MemcpyToHost and nothing larger than a
    time or batch vector (or a shape) on the CPU, ranks 2-5, both layouts and general
    axes (with TensorFlow's int32 lengths), static dims, time and batch symbolic, and
    every dim symbolic (the lengths' dim then a symbol of its own, as exporters declare
    it). uint8 travels as int32 (``Cast:uint8>int32``) for the WebGPU
    target only: WebGPU moves no uint8 itself, so the default's gather there is the
    other backends' choice."""
    if dtype == "uint8" and target is None:
        pytest.skip("WebGPU has no say in the default's uint8 (no gather of it moves it)")
    if dtype == "float16" and not _adapter_has_f16():
        pytest.skip("the WebGPU adapter has no shader-f16")
    for rank, batch_axis, time_axis, domain in _LAYOUTS:
        dims: list = [3] * rank
        if kind == "static":
            dims[time_axis], dims[batch_axis] = 5, 4
        else:
            dims[time_axis], dims[batch_axis] = "T", "B"
        if kind == "all":
            dims = [d if isinstance(d, str) else f"d{i}" for i, d in enumerate(dims)]
        lens_type = onnx.TensorProto.INT32 if domain else onnx.TensorProto.INT64
        model = model_of(tuple(dims), dtype, batch_axis, time_axis, domain=domain,
                         lens_type=lens_type, own_lens_dim=kind == "all")  # fmt: skip
        report = api.check(model, api.inline(model, target=target), trials=1, backend="webgpu")
        assert report.ok, f"rank {rank}, axes {batch_axis}/{time_axis}: {report}"


@pytest.mark.parametrize("target", ["webgpu", None], ids=["webgpu", "default"])
@pytest.mark.parametrize(
    "export", ["tf_reverse_sequence_opset13.onnx", "tf_masked_bigru_opset13.onnx"]
)
def test_exported_lengths_stay_on_the_gpu(webgpu, export, target):
    """tf2onnx's exports: int32 lengths cast to int64, declared with a dim of their own.
    The int64 cast runs on the GPU; read as int64, the lengths would be copied back to
    the host for the CPU's int64 arithmetic. The decomposition reads the int32 lengths
    instead, and nothing of it leaves the GPU."""
    model = onnx.load(FIXTURES / export)
    report = api.check(model, api.inline(model, target=target), trials=2, backend="webgpu")
    assert report.ok, str(report)


@pytest.mark.parametrize("dims", [("T", "B", 8), (5, 4, 8), ("B", "T"), (6, 2, 3, 2)])
def test_webgpu_target_computes_the_index_in_int32(dims):
    """Its WebGPU EP has no int64 arithmetic: every Add, Sub, Mul and Where of the webgpu
    output makes int32, but the lengths' clamp to [0, T] (a [B] vector, cast after)."""
    batch_axis, time_axis = (0, 1) if dims[0] == "B" else (1, 0)
    model = model_of(dims, "float32", batch_axis, time_axis)
    graph = onnx.shape_inference.infer_shapes(api.inline(model, target="webgpu")).graph
    types = {v.name: v.type.tensor_type.elem_type for v in graph.value_info}
    readers: dict[str, list[str]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node.op_type)
    arithmetic = [n for n in graph.node if n.op_type in ("Add", "Sub", "Mul", "Where")]
    clamps_at_zero = (["Max"], ["Less", "Where"])
    int32 = onnx.TensorProto.INT32
    for node in arithmetic:
        made = node.output[0]
        while types.get(made) != int32 and readers.get(made) in clamps_at_zero:
            made = next(  # the clamp to 0: Max, or Where(Less(lens, 0), 0, lens)
                n.output[0] for n in graph.node if made in n.input and n.op_type != "Less"
            )
        if types.get(made) != int32:
            assert readers.get(made) == ["Cast"], (node.op_type, node.name, types.get(made))


def _planted(inlined: onnx.ModelProto) -> onnx.ModelProto:
    """The final gather's index through an int64 Max with 0 (a no-op on an index, and one
    onnxruntime does not optimise away), which WebGPU can only run on the CPU."""
    gather = inlined.graph.node[-1]
    index = gather.input[1]
    gather.input[1] = "planted_index"
    inlined.graph.node.insert(
        len(inlined.graph.node) - 1,
        oh.make_node("Cast", [index], ["planted_int64"], name="planted_cast",
                     to=onnx.TensorProto.INT64),
    )  # fmt: skip
    inlined.graph.node.insert(
        len(inlined.graph.node) - 1,
        oh.make_node("Max", ["planted_int64", "planted_zero"], ["planted_index"],
                     name="planted_max"),
    )  # fmt: skip
    inlined.graph.initializer.append(
        oh.make_tensor("planted_zero", onnx.TensorProto.INT64, [], [0])
    )
    return inlined


def test_check_reports_a_harmful_fallback_by_name(webgpu, tmp_path):
    model = model_of((5, 4, 3), "float32", 1, 0)
    onnx.save(model, tmp_path / "model.onnx")
    onnx.save(api.inline(model), tmp_path / "clean.onnx")
    onnx.save(_planted(api.inline(model)), tmp_path / "planted.onnx")
    clean = revseq("check", tmp_path / "model.onnx", tmp_path / "clean.onnx", "--backend",
                   "webgpu", "-q")  # fmt: skip
    assert clean.returncode == 0, clean.stdout + clean.stderr
    planted = revseq("check", tmp_path / "model.onnx", tmp_path / "planted.onnx", "--backend",
                     "webgpu", "-q")  # fmt: skip
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert "placed off the device" in planted.stdout and "'planted_max'" in planted.stdout


def test_placement_parser_reads_onnxruntime_log():
    from revseq.backends.webgpu import parse_placement

    prefix = (
        "2026-11-23 [V:onnxruntime:, session_state.cc:1383 VerifyEachNodeIsAssignedToAnEp] "
    )
    log = [
        prefix + " Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1",
        prefix + "  Min (rs/Min_5)",
        prefix + " Node(s) placed on [WebGpuExecutionProvider]. Number of nodes: 2",
        prefix + "  Gather (rs/Gather_11)",
        prefix + "  MemcpyFromHost (Memcpy)",
        "unrelated",
    ]
    everything = [prefix + " All nodes placed on [CPUExecutionProvider]. Number of nodes: 1"]
    assert parse_placement(everything, [("Min", "m")]) == {
        "CPUExecutionProvider": [("Min", "m")]
    }
    assert parse_placement(log) == {
        "CPUExecutionProvider": [("Min", "rs/Min_5")],
        "WebGpuExecutionProvider": [("Gather", "rs/Gather_11"), ("MemcpyFromHost", "Memcpy")],
    }


def test_matrix_marks_work_off_the_device(webgpu):
    from bench.matrix import _cell

    assert _cell(webgpu, "default", "float32", dynamic=True) == "ok"
    # bool with symbolic dims: the default's row form gathers it on the GPU.
    assert _cell(webgpu, "default", "bool", dynamic=True) == "ok"
    # WebGPU moves no int64 with any gather: it runs on the CPU there.
    assert _cell(webgpu, "default", "int64", dynamic=True) == "CPU"
    assert _cell(webgpu, "own target", "float32", dynamic=True) == "ok"
    assert _cell(webgpu, "own target", "int32", dynamic=False) == "ok"
