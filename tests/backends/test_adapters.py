"""Each adapter on its backend: the check there, runners, resident data, its quirks."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from backend_cases import (
    BACKENDS,
    LAYOUTS,
    SIZES,
    backend_or_skip,
    check_default,
    dims_for,
    run_and_compare,
)
from helpers import assert_identical, model_of, onnx2torch_here
from onnx import helper

import revseq
from bench.sweep import device_lacks
from revseq import backends
from revseq.measure import floor
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import GATHERS, MATRIX_STATIC
from revseq.passes.inline.ranking import in_place


@pytest.mark.backend
@pytest.mark.parametrize("name", BACKENDS)
def test_check_runs_the_decompositions_on_the_backend(name):
    backend_or_skip(name)
    model = model_of(("T", "B", 3), "float32", 1, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = revseq.check(model, revseq.inline(model, target=name), backend=name)
    assert report.ok, report
    assert report.engines["decompositions"] == backends.get(name).label
    assert report.engines == {
        **report.engines,
        "reference": "onnxruntime",
        "candidate": "onnxruntime",
    }
    assert all(node.engine == backends.get(name).label for node in report.nodes)


def test_check_on_a_backend_finds_what_it_computes_wrong():
    """tinygrad's GatherND returns int32 for bool data: a form that uses it differs."""
    backend_or_skip("tinygrad")
    model = model_of((5, 4, 3), "bool", 1, 0)
    wrong = revseq.inline(model, strategy="gather_nd", target="any")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = revseq.check(model, wrong, backend="tinygrad")
        assert not report.ok
        assert "int32" in str(report)
        assert revseq.check(model, revseq.inline(model), backend="tinygrad").ok


@pytest.mark.parametrize("name", BACKENDS)
def test_a_repeated_runner_computes_each_call_anew(name):
    """A runner for timings still computes each call from its own inputs.

    It runs the model as a deployment does (tinygrad: under TinyJit, replaying the
    kernels it captured), and the lengths and shapes change between calls.
    """
    backend = backend_or_skip(name)
    model = model_of(("T", "B", 3), "float32", 1, 0)
    inlined = revseq.inline(model)
    if isinstance(backend, backends.Backend):
        runner = backend.prepare(inlined, repeated=True)
    else:  # a backend in a worker of its own runs each call as it comes
        runner = backend.prepare(inlined)
    names = backends.input_names(model)
    rng = np.random.default_rng(0)
    for shape in ((5, 4, 3), (5, 4, 3), (5, 4, 3), (5, 4, 3), (2, 6, 3), (5, 4, 3)):
        x = rng.standard_normal(shape).astype(np.float32)
        lens = rng.integers(0, shape[0] + 1, shape[1])
        (got,) = runner(dict(zip(names, (x, lens), strict=True)))
        assert_identical(got, reverse_sequence(x, lens, batch_axis=1, time_axis=0))


def test_check_command_takes_a_backend(tmp_path, capsys):
    from revseq.cli import main

    model = model_of(("T", "B", 3), "float32", 1, 0)
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(revseq.inline(model), tmp_path / "i.onnx")
    paths = [str(tmp_path / "m.onnx"), str(tmp_path / "i.onnx")]
    assert main(["check", *paths, "--backend", "onnxruntime", "--quiet"]) == 0
    assert "candidate: onnxruntime" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:  # argparse: one line naming the choices
        main(["check", *paths, "--backend", "nosuch", "--quiet"])
    assert exit_.value.code == 2
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_mnn_misreads_a_broadcast_else_operand_and_the_forms_never_emit_one():
    """MNN 3.6 reads Where's else operand broadcast from [T, 1] wrongly (probed).

    The forms put the broadcast operand on the "then" side; the old select is wrong there.
    """
    backend = backend_or_skip("mnn")
    import onnx.parser

    from revseq.ops.reference import reference_evaluator

    # t < L ? t : L - (t+1) over [5, 4], the lengths' [1, 4] broadcast on the else side.
    model = onnx.parser.parse_model("""
    <ir_version: 9, opset_import: ["" : 18]>
    select (float[5, 4, 3] x, int64[4] lens) => (y) {
        t = Constant <value = int64[5, 1] {0, 1, 2, 3, 4}> ()
        zero1 = Constant <value = int64[1] {0}> ()
        one1 = Constant <value = int64[1] {1}> ()
        lb = Unsqueeze (lens, zero1)
        n = Add (t, one1)
        k = Less (t, lb)
        back = Sub (lb, n)
        s = Where (k, back, t)
        y = Cast <to = 1> (s)
    }
    """)
    feeds = {"x": np.zeros((5, 4, 3), np.float32), "lens": np.array([0, 1, 5, 3])}
    got = backend.run(model, feeds)[0]
    assert got.tobytes() != reference_evaluator(model).run(None, feeds)[0].tobytes()
    assert "Where:broadcast_else" not in TARGETS["mnn"].static_ops
    assert "Where" in TARGETS["mnn"].static_ops
    check_default("mnn", 3, "float32", "time_major", True)


@pytest.mark.xdist_group("op_probes")  # the forms traced once per process
@pytest.mark.parametrize("name", ["onnxruntime", "openvino"])
def test_the_flatten_probe_runs_empty_data_and_openvino_gets_another_view(name):
    """A form that flattens the data also runs an empty sequence and batch with symbolic
    dims: OpenVINO 2026.4 flattens [0, 3, 3] to [0, 9], so its row form views such data
    as [rows, *trailing]."""
    backend = backend_or_skip(name)
    from revseq.probe._models import EMPTY_SIZES
    from revseq.probe._runs import run_exact
    from revseq.probe._traces import op_probes, probe_feeds

    probe = min(
        (
            p
            for p in op_probes()
            if ("Flatten", "dynamic", 0) in p.slots
            and p.traced.symbolic == {"T", "B"}
            and not p.traced.own_dim
        ),
        key=lambda p: (p.relies, p.size),
    )
    model = probe.model()
    feeds = probe_feeds(probe)
    empty = [f for f in feeds if f["x"].size == 0]
    assert [f["x"].shape[:2] for f in empty] == list(EMPTY_SIZES)
    assert [t.shape for f in empty for t in probe.truth(f)] == [(0, 3, 3), (4, 0, 3)]
    failure = run_exact(backend, model, feeds, probe.truth)
    assert (failure is None) == (name == "onnxruntime"), failure
    assert ("Flatten" in TARGETS[name].dynamic_ops) == (failure is None)
    symbolic = model_of(("T", "B", "F"), "float32", 1, 0)
    inlined = revseq.inline(symbolic, strategy="gather_rows", target=name)
    views = {n.op_type for n in inlined.graph.node if "x" in n.input} & {"Flatten", "Reshape"}
    assert views == ({"Flatten"} if failure is None else {"Reshape"})
    run_and_compare(
        backend, inlined, rank=3, dtype="float32", batch_axis=1, time_axis=0, dynamic=True
    )


def test_a_missing_package_is_not_installed_and_get_says_how_to_install(monkeypatch):
    import dataclasses

    from revseq.backends import _adapter

    fake = dataclasses.replace(
        backends.adapter("iree"), imports=("no_such_revseq_pkg.compiler",), extra="fake"
    )
    monkeypatch.setattr(_adapter, "adapter", lambda name: fake)
    assert not backends.installed("iree")
    with pytest.raises(backends.BackendUnavailableError, match=r"revseq\[fake\]"):
        backends.get("iree")


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("shared", [False, True])
def test_inferred_static_forms_and_shared_index_run_on_the_backend(name, shared):
    """Static input shapes and no value_info: each backend gets (and runs) a static form;
    two nodes on one lengths input share their index there too."""
    backend = backend_or_skip(name)
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    nodes.append(helper.make_node("ReverseSequence", ["r", "lens"], ["y0"]))
    if shared:
        # Identity, not an arithmetic op: MNN's Neg turns 0.0 into +0.0, not -0.0.
        nodes.append(helper.make_node("Identity", ["y0"], ["n"]))
        nodes.append(helper.make_node("ReverseSequence", ["n", "lens"], ["y1"]))
    graph = helper.make_graph(
        nodes,
        "inferred",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [6, 3, 2]),
            helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, [3]),
        ],
        [
            helper.make_tensor_value_info(
                nodes[-1].output[0], onnx.TensorProto.FLOAT, [6, 3, 2]
            )
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inlined = revseq.inline(model, target=name)
    assert not {"Shape", "Range"} & {n.op_type for n in inlined.graph.node}
    # Positive data: Relu's zeros are +0.0 in onnxruntime, -0.0 in OpenCV (x * 0).
    x = np.abs(np.random.default_rng(4).standard_normal([6, 3, 2])).astype(np.float32)
    lens = np.array([6, 0, 2], np.int64)
    expected = reverse_sequence(np.maximum(x, 0), lens)
    if shared:
        expected = reverse_sequence(expected, lens)
    (got,) = backend.prepare(inlined)({"x": x, "lens": lens})
    assert got.tobytes() == expected.tobytes()


def _casts_to_int32(model: onnx.ModelProto) -> bool:
    return any(
        n.op_type == "Cast" and n.attribute[0].i == onnx.TensorProto.INT32
        for n in model.graph.node
    )


@pytest.mark.backend
@pytest.mark.parametrize(
    ("dims", "batch_axis", "time_axis"),
    [
        ((600, 8), 1, 0),
        ((600, 8, 1), 1, 0),
        ((8, 600, 1), 0, 1),
        ((700, 6, 2), 1, 0),
        ((300, 3, 2), 1, 0),
    ],
    ids=["matrix-transposed", "squeezed-transposed", "squeezed", "rows", "rows-900"],
)
@pytest.mark.parametrize("name", BACKENDS)
def test_large_static_indexes_run_on_the_backend(name, dims, batch_axis, time_axis):
    """Indexes of 256 elements and more, static: int32 index arithmetic where the
    target's profile allows it, time-major single-element rows gathered on the data's
    transpose but where the target's probe timed them cheaper in place (its layout).
    Exact with lengths T, 0, 1 and between, default and backend target."""
    backend = backend_or_skip(name)
    model = model_of(dims, "float32", batch_axis, time_axis)
    time_len, batch = dims[time_axis], dims[batch_axis]
    rng = np.random.default_rng(5)
    x = rng.standard_normal(dims).astype(np.float32)
    lens = rng.integers(0, time_len, batch, endpoint=True)
    lens[:3] = [time_len, 0, 1]
    expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    for target in (None, name):
        inlined = revseq.inline(model, target=target)
        profile = TARGETS[target or "portable"]
        allowed = profile.allowed(dynamic=False)
        assert _casts_to_int32(inlined) == (allowed is None or "Index:int32" in allowed)
        if len(dims) == 2 or dims[-1] == 1:
            swapped = time_axis == 0 and not in_place(profile, MATRIX_STATIC)
            assert ("Transpose" in {n.op_type for n in inlined.graph.node}) == swapped
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (got,) = backend.prepare(inlined)({"x": x, "lens": lens})
        assert got.tobytes() == expected.tobytes(), target


def test_a_profile_keeps_its_failure_lines_from_one_probe_to_the_next():
    """IREE compiles in a temporary folder and WebGPU's page is served on a free port:
    the failure lines a profile records name neither, so that writing it again changes
    no line that did not change."""
    from revseq.errors import stable_line as _stable

    iree = "error: /tmp/tmpyv4d1k9q/model.mlir:7:10: failed to legalize"
    webgpu = "at S (http://127.0.0.1:41777/dist/ort.webgpu.min.mjs:7:3301)"
    assert _stable(iree) == "error: <tmp>/model.mlir:7:10: failed to legalize"
    assert _stable(webgpu) == "at S (http://localhost/dist/ort.webgpu.min.mjs:7:3301)"
    for name in ("iree", "webgpu"):
        profile = revseq.TARGETS[name]
        assert all(line == _stable(line) for line in profile.failures), name


@onnx2torch_here
def test_a_resident_runner_keeps_its_inputs_on_the_device_between_calls(monkeypatch):
    """onnx2torch-cuda's timed runner (here on the CPU: the plumbing, not the device)
    copies inputs once per set of arrays, reruns the module on those copies, and starts
    again for other arrays; its untimed runner computes every call from its inputs."""
    monkeypatch.setenv("REVSEQ_CUDA_DEVICE", "cpu")
    backend = backends.get("onnx2torch-cuda")
    assert backend.resident and not backends.get("onnx2torch").resident
    model = revseq.inline(model_of(("T", "B", 3), "float32", 1, 0))
    from revseq.backends import onnx2torch

    converted = []
    real_convert = onnx2torch.convert

    def counting_convert(proto):
        graph_module = real_convert(proto)
        calls = []
        graph_module.register_forward_hook(lambda *_: calls.append(1))
        converted.append(calls)
        return graph_module

    monkeypatch.setattr(onnx2torch, "convert", counting_convert)
    runner = backend.prepare(model, repeated=True)
    rng = np.random.default_rng(0)
    for shape in ((5, 4, 3), (2, 6, 3)):
        x = rng.standard_normal(shape).astype(np.float32)
        lens = rng.integers(0, shape[0] + 1, shape[1])
        feeds = {"x": x, "lens": lens}
        expected = reverse_sequence(x, lens, batch_axis=1, time_axis=0)
        for _ in range(3):
            assert_identical(runner(feeds)[0], expected)
    assert len(converted) == 1 and len(converted[0]) == 6  # the module ran every call
    assert_identical(backend.prepare(model)(feeds)[0], expected)


@onnx2torch_here
def test_a_resident_backends_floor_is_its_own_copy(monkeypatch):
    """numpy's copy on the host is no floor for data on a device: it is not timed, and
    the floor is the backend's Identity."""
    from revseq.measure import _cases

    monkeypatch.setenv("REVSEQ_CUDA_DEVICE", "cpu")
    case = _cases.Case((20, 4, 3), 1, 0, "float32")
    feeds = _cases.input_arrays(case, np.random.default_rng(0))
    models = {"default": revseq.inline(_cases.native_model(case))}
    for name, timed in (("onnx2torch-cuda", False), ("onnx2torch", True)):
        result, _, _ = floor.time_pass(
            backends.get(name), case, feeds, models, rounds=2, budget_s=0.01
        )
        assert ("memcpy" in result) == timed
        if not timed:
            assert floor.floor_ratio(result) == 1.0


def test_device_profiles_stay_out_of_the_default():
    """The default is computed from host backends: a device's profile (onnx2torch-cuda,
    where torch's CUDA indexing moves no uint16/32/64) would make it refuse them."""
    from revseq.ops.targets import PORTABLE, combine, load_profiles
    from revseq.ops.targets.profile import Profile

    profiles = load_profiles()
    members = {m.name for m in profiles[PORTABLE].members}
    devices = [p for p in profiles.values() if p.device is not None]
    assert all(p.name not in members for p in devices)
    hosted = [p for p in profiles.values() if p.verified and not p.device]
    assert all((p.name in members) != p.yields for p in hosted)  # OpenCV: kept out
    host = TARGETS["onnx2torch"]
    device = Profile.from_json(
        {**host.to_json(), "name": "onnx2torch-cuda", "device": "cuda"}
        | {"dtypes": {"GatherElements": ["uint32"], "Gather": [], "GatherND": []}}
    )
    assert Profile.from_json(device.to_json()) == device and device.device == "cuda"
    both = combine([host, device])
    assert not any(both.moves(g, "uint32") for g in GATHERS)  # what it would refuse
    model = model_of((5, 4, 3), "uint32", 1, 0)
    inlined = revseq.inline(model)  # the default, from the host profiles, takes it
    assert "ReverseSequence" not in {n.op_type for n in inlined.graph.node}
    assert device_lacks(device, inlined, "uint32") and not device_lacks(
        host, inlined, "uint32"
    )


@pytest.mark.backend
@pytest.mark.parametrize("dtype", ["uint16", "int16", "float64", "uint32"])
def test_opencv_own_target_serves_the_types_the_default_may_not(dtype):
    """OpenCV is kept out of the default; its own target moves these types (by its
    Gather), exact with every dim symbolic."""
    backend = backend_or_skip("opencv")
    model = model_of(("d0", "d1", "d2"), dtype, 1, 0)
    inlined = revseq.inline(model, target="opencv")
    run_and_compare(
        backend, inlined, rank=3, dtype=dtype, batch_axis=1, time_axis=0, dynamic=True
    )


@pytest.mark.backend
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "int8", "bool"])
def test_the_default_runs_on_opencv_for_its_common_types(dtype, layout, dynamic):
    """Kept out of the default, OpenCV still runs it for the types models hold."""
    backend = backend_or_skip("opencv")
    batch_axis, time_axis = LAYOUTS[layout]
    model = model_of(dims_for(3, batch_axis, time_axis, dynamic, SIZES[0]), dtype,
                     batch_axis, time_axis)  # fmt: skip
    run_and_compare(
        backend, revseq.inline(model), rank=3, dtype=dtype, batch_axis=batch_axis,
        time_axis=time_axis, dynamic=dynamic,
    )  # fmt: skip


def _full_reversal(elem: int) -> onnx.ModelProto:
    """A ReverseSequence whose constant lengths all reach T: a step -1 Slice inlined."""
    graph = onnx.helper.make_graph(
        [helper.make_node("ReverseSequence", ["x", "L"], ["y"], batch_axis=1, time_axis=0)],
        "full",
        [onnx.helper.make_tensor_value_info("x", elem, [6, 3, 4])],
        [onnx.helper.make_tensor_value_info("y", elem, [6, 3, 4])],
        [onnx.numpy_helper.from_array(np.array([6, 6, 6], np.int64), "L")],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


@pytest.mark.backend
@pytest.mark.parametrize("elem", [onnx.TensorProto.FLOAT, onnx.TensorProto.INT32])
def test_ncnn_runs_a_full_reversal_exactly_and_says_which_layer_it_lacks(elem):
    backend_or_skip("ncnn")
    model = _full_reversal(elem)
    report = revseq.check(model, revseq.inline(model), backend="ncnn", trials=2)
    assert report.ok and report.exercised, report
    runtime = reverse_sequence_model([6, 3, 4], elem, batch_axis=1, time_axis=0)
    with pytest.raises(revseq.RevseqError, match="layers ncnn lacks: Gather"):
        revseq.check(runtime, revseq.inline(runtime), backend="ncnn", trials=1)


@pytest.mark.backend
@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("axes", [(1, 0), (0, 1)], ids=str)
@pytest.mark.parametrize("elem", [onnx.TensorProto.FLOAT, onnx.TensorProto.INT32])
def test_ncnn_s_own_target_reverses_constant_lengths_by_slices_exactly(elem, axes, rank):
    """Rank 4 over a rank-3 view (ncnn reverses by a step -1 Slice up to rank 3)."""
    backend_or_skip("ncnn")
    batch_axis, time_axis = axes
    dims = [6, 4, 3] if axes == (1, 0) else [4, 6, 3]
    dims += [2] * (rank - 3)
    graph = helper.make_graph(
        [helper.make_node("ReverseSequence", ["x", "L"], ["y"], batch_axis=batch_axis,
                          time_axis=time_axis)],
        "constant_lengths",
        [helper.make_tensor_value_info("x", elem, dims)],
        [helper.make_tensor_value_info("y", elem, dims)],
        [onnx.numpy_helper.from_array(np.array([2, 0, 5, 6], np.int64), "L")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inlined = revseq.inline(model, target="ncnn")
    views = {"Reshape"} if rank > 3 else set()
    assert {n.op_type for n in inlined.graph.node} <= {"Slice", "Concat", "Constant", *views}
    report = revseq.check(model, inlined, backend="ncnn", trials=2)
    assert report.ok and report.exercised, report


def test_each_runtime_is_one_room_with_its_adapter_and_profile():
    """A runtime is one folder of ``revseq.backends`` (its adapter, its probed profile, a
    runner where it has an environment of its own) and one registry row: no module of
    the package beside the rooms belongs to one runtime."""
    import pathlib

    from revseq.backends import _adapter

    folder = pathlib.Path(_adapter.__file__).parent
    rooms = {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    registered = {row.where.partition(":")[0] for row in _adapter._REGISTRY.values()}
    assert registered == rooms
    modules = {p.name for p in folder.glob("*.py")}
    assert all(m == "__init__.py" or m.startswith("_") for m in modules), modules
    for room in rooms:
        for profile in (folder / room).glob("*.json"):
            assert profile.stem.replace("-", "_") == room, profile
    import tomllib

    root = pathlib.Path(__file__).parents[2]
    packages = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {f"revseq.backends.{room}" for room in rooms} <= set(packages["packages"])
    # A command of its own (``revseq NAME-setup``) is its room's too, named by its row.
    declaring = {n for n in _adapter._REGISTRY if _adapter.adapter(n).setup is not None}
    assert declaring == set(_adapter.SETUPS)


def test_a_runtime_s_declared_quirks_are_stated_once_in_its_profile():
    """What the planner reads of a runtime beyond what it ran (it falls back off its
    device, yields the default, takes a leading batch, rounds a type, lives on a device)
    is stated in its profile alone: the adapter declares none of it, and reads it there."""
    import dataclasses

    from revseq.backends._adapter import Adapter, quirks_of
    from revseq.ops.targets.profile import Profile

    stated = {"falls_back", "yields", "batch_leads", "rounding", "device"}
    assert stated <= {f.name for f in dataclasses.fields(Profile)}
    assert not (stated | {"placed"}) & {f.name for f in dataclasses.fields(Adapter)}
    assert quirks_of("ncnn").batch_leads and quirks_of("ncnn").yields
    assert quirks_of("webgpu").falls_back and quirks_of("onnx2torch-cuda").device == "cuda"
    assert not quirks_of("executorch").yields  # no profile: none declared


def test_no_module_outside_the_rooms_names_a_runtime():
    """What revseq knows of a runtime is in its room: the planner, the forms, the check,
    the probe and the command line name none (the registries and the docs do)."""
    import pathlib
    import re

    from revseq.backends import ADAPTERS
    from revseq.ops.targets import TARGETS

    root = pathlib.Path(__file__).parents[2]
    rooms = root / "src" / "revseq" / "backends"
    registries = {rooms / "_adapter.py", root / "ops" / "targets" / "registry.py"}
    names = {n.split("-")[0] for n in [*ADAPTERS, *TARGETS]} - {"onnxruntime"}  # the check's
    names -= {"any", "portable", "onnx"}  # targets that are no runtime
    pattern = re.compile(rf"\b({'|'.join(sorted(names))})\b", re.IGNORECASE)
    naming = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for folder in ("src", "ops", "passes")
        for path in sorted((root / folder).rglob("*.py"))
        if path not in registries and not _in_a_room(path, rooms)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert naming == []


def _in_a_room(path, rooms) -> bool:
    """Whether ``path`` is inside one runtime's room (a folder of ``revseq.backends``)."""
    return path.is_relative_to(rooms) and path.parent != rooms
