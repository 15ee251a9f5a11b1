"""revseq's output on real backends: bit for bit against the truth, on the backend itself.

Each backend's tests are skipped with a reason when it is not installed (``pip install
"onnx-revseq[backends]"`` installs the light ones). The truth is revseq's numpy reference,
whose clamping of invalid lengths every form shares.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from helpers import assert_identical, full_lengths_model, model_of, onnx2torch_here
from onnx import helper

import revseq
from bench.sweep import device_lacks, types_of
from revseq import backends
from revseq.equivalence.inputs.values import random_array
from revseq.measure import floor
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import ELEMENT_TYPES, GATHERS, MATRIX_STATIC
from revseq.passes.inline.ranking import in_place

# Backends with a probed profile; webgpu (an execution provider whose verdict includes
# where each node ran) has tests of its own, in test_webgpu.py, and so do the ExecuTorch
# backends (test_executorch.py), which take the op through revseq's converter, and the
# backends in an environment of their own (test_foreign_backends.py: static dims, the
# types they move), and ncnn, which runs no gather (below).
BACKENDS = sorted(
    set(backends.ADAPTERS)
    - {"webgpu", "executorch", "executorch-portable", "rknn", "x2paddle", "ncnn"}
)

# (T, B) sizes a model runs at: static shapes at the first, symbolic dims at both.
SIZES = ((5, 4), (3, 2))
LAYOUTS = {"time_major": (1, 0), "batch_major": (0, 1)}


def backend_or_skip(name: str) -> backends.Backend:
    reason = backends.unavailable(name)
    if reason is not None:
        pytest.skip(reason)
    if backends.adapter(name).own_process:
        return backends.isolated(name)  # type: ignore[return-value]
    return backends.get(name)


def dims_for(rank: int, batch_axis: int, time_axis: int, dynamic: bool, size) -> tuple:
    time_len, batch = size
    dims = [2 + (i % 2) for i in range(rank)]
    dims[time_axis % rank], dims[batch_axis % rank] = time_len, batch
    if dynamic:
        dims[time_axis % rank], dims[batch_axis % rank] = "T", "B"
        if rank > 3:
            dims[-1] = "D"
    return tuple(dims)


def form_of(model: onnx.ModelProto) -> str:
    """Which form an inlined model holds, by its gather."""
    ops = {n.op_type for n in model.graph.node}
    if "GatherElements" in ops:
        return "gather_elements"
    return "gather_rows" if "Gather" in ops or "Flatten" in ops else "gather_nd"


def clamps(name: str, form: str, dynamic: bool) -> bool:
    """Whether the backend's probe saw ``form`` exact on invalid lengths (-1, T+2).

    ONNX defines only lengths in [0, T]; revseq's forms clamp the others, and the
    probes record where a backend cannot run that (tract with symbolic dims).
    """
    profile = TARGETS.get(name)
    kind = "dynamic" if dynamic else "static"
    failed = f"{form} (invalid lengths) ({kind})"
    return profile is None or not any(f.startswith(failed) for f in profile.failures)


def run_and_compare(
    backend: backends.Backend,
    model: onnx.ModelProto,
    *,
    rank: int,
    dtype: str,
    batch_axis: int,
    time_axis: int,
    dynamic: bool,
    lens_dtype=np.int64,
) -> None:
    """Run ``model`` at every size on valid lengths (T, 0, 1, 2), then on invalid ones
    (T+3, -1): clamped where the probe saw the backend clamp them; else it must raise
    there or clamp."""
    rng = np.random.default_rng(0)
    patterns = {"valid": [None, 0, 1, 2], "invalid": [3, -1, 0, 1]}  # None: T; 3: T+3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner = backend.prepare(model)
        for size in SIZES if dynamic else SIZES[:1]:
            dims = dims_for(rank, batch_axis, time_axis, False, size)
            time_len, batch = size
            x = random_array(rng, ELEMENT_TYPES[dtype], dims)
            for kind, pattern in patterns.items():
                values = [
                    time_len
                    if v is None
                    else time_len + 3
                    if v == 3 and kind == "invalid"
                    else v
                    for v in pattern
                ]
                lens = np.array((values * batch)[:batch], lens_dtype)
                expected = reverse_sequence(
                    x, lens, batch_axis=batch_axis, time_axis=time_axis
                )
                if kind == "invalid" and not clamps(backend.name, form_of(model), dynamic):
                    # The probe saw this form fail there on invalid lengths (in its int64
                    # arithmetic): it may raise, or clamp, never give other values.
                    try:
                        got = runner({"x": x, "lens": lens})
                    except backends.BackendError:
                        continue
                    assert_identical(got[0], expected)
                    continue
                assert_identical(runner({"x": x, "lens": lens})[0], expected)


def default_not_for(name: str, inlined: onnx.ModelProto, dtype: str) -> str | None:
    """Why the default need not run on ``name`` for ``dtype``, or None: it must.

    The default is computed from host backends (``load_profiles``); on a device, the
    gather it takes for a type may move none of it there (torch's CUDA indexing has no
    uint16, uint32 or uint64), which the device's own target avoids.
    """
    profile = TARGETS.get(name)
    lacking = [] if profile is None else device_lacks(profile, inlined, dtype)
    if not lacking:
        return None
    return (
        f"the default is for host backends: {name}'s {', '.join(lacking)} moves no "
        f"{dtype} (its profile); target={name!r} does"
    )


def check_default(
    name: str,
    rank: int,
    dtype: str,
    layout: str,
    dynamic: bool,
    *,
    own_lens_dim: bool = False,
    **inline_options,
) -> None:
    backend = backend_or_skip(name)
    if dtype not in types_of(name):
        pytest.skip(f"{name} moves no {dtype} with any gather (its profile)")
    if "target" not in inline_options and TARGETS[name].yields:
        # Kept out of the default (OpenCV): its own target is what serves it.
        inline_options = {**inline_options, "target": name}
    batch_axis, time_axis = LAYOUTS[layout]
    dims = dims_for(rank, batch_axis, time_axis, dynamic, SIZES[0])
    model = model_of(dims, dtype, batch_axis, time_axis, own_lens_dim=own_lens_dim)
    inlined = revseq.inline(model, **inline_options)
    reason = None if "target" in inline_options else default_not_for(name, inlined, dtype)
    if reason is not None:
        pytest.skip(reason)
    run_and_compare(
        backend,
        inlined,
        rank=rank,
        dtype=dtype,
        batch_axis=batch_axis,
        time_axis=time_axis,
        dynamic=dynamic,
    )


@pytest.mark.backend
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", ELEMENT_TYPES)
@pytest.mark.parametrize("name", BACKENDS)
def test_default_output_every_type(name, dtype, layout, dynamic):
    check_default(name, 3, dtype, layout, dynamic)


@pytest.mark.backend
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("rank", [2, 4, 5])
@pytest.mark.parametrize("name", BACKENDS)
def test_default_output_every_rank(name, rank, layout, dynamic):
    """Symbolic lengths declared with a dim of their own, as exporters declare them."""
    check_default(name, rank, "float32", layout, dynamic, own_lens_dim=True)


@pytest.mark.backend
@pytest.mark.parametrize("own", [False, True], ids=["default", "own_target"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "uint16"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", BACKENDS)
def test_single_element_rows_of_types_gather_elements_lacks(name, layout, dtype, dynamic, own):
    """Rank 2, float data holding signalling NaNs: where a backend's GatherElements
    lacks the type (onnx2torch: float16 and bfloat16 on a matrix, uint16 at all), the
    rows go by the 1-D GatherElements view (static), the row form's Gather or GatherND,
    as costs and probes say, and run exactly everywhere."""
    check_default(name, 2, dtype, layout, dynamic, **({"target": name} if own else {}))


@pytest.mark.backend
@pytest.mark.parametrize(
    ("dtype", "dynamic"),
    [("float32", False), ("float32", True), ("int64", True)],
    ids=["float32-static", "float32-dynamic", "int64-dynamic"],
)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", BACKENDS)
def test_own_target_single_element_rows(name, layout, dtype, dynamic):
    """Rank 2: the backend's own target takes the form its probe timed cheapest on
    single-element rows (the ``matrix`` and ``matrix:static`` classes: GatherElements
    on the matrix, GatherND, or the row form's Gather of single elements), and runs
    exactly there."""
    check_default(name, 2, dtype, layout, dynamic, target=name)


@pytest.mark.backend
@pytest.mark.parametrize("own", [False, True], ids=["default", "own_target"])
@pytest.mark.parametrize("dims_kind", ["static", "dynamic", "all"])
@pytest.mark.parametrize(
    ("rank", "batch_axis", "time_axis"), [(3, 2, 0), (4, -1, 1), (4, 1, 3)]
)
@pytest.mark.parametrize("name", BACKENDS)
def test_general_axes_default_and_own_target(
    name, rank, batch_axis, time_axis, dims_kind, own
):
    """The revseq domain op (any axes, int32 lengths), inlined with no target and for
    the backend itself: its own target must run wherever the default does (``all``:
    every dim symbolic, the lengths with a dim of their own, as exporters declare them:
    tract cannot unify a broadcast of the lengths' dim and the data's batch dim)."""
    backend = backend_or_skip(name)
    dynamic = dims_kind != "static"
    dims = dims_for(rank, batch_axis, time_axis, dynamic, SIZES[0])
    if dims_kind == "all":
        dims = tuple(d if isinstance(d, str) else f"d{i}" for i, d in enumerate(dims))
    model = model_of(
        dims,
        "float32",
        batch_axis,
        time_axis,
        domain="revseq",
        lens_type=onnx.TensorProto.INT32,
        own_lens_dim=dims_kind == "all",
    )
    run_and_compare(
        backend,
        revseq.inline(model, target=name if own else None),
        rank=rank,
        dtype="float32",
        batch_axis=batch_axis % rank,
        time_axis=time_axis % rank,
        dynamic=dynamic,
        lens_dtype=np.int32,
    )


@pytest.mark.backend
@pytest.mark.parametrize("own", [False, True], ids=["default", "own_target"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("rank", [2, 3, 4])
@pytest.mark.parametrize("name", BACKENDS)
def test_constant_lengths_default_and_own_target(name, rank, layout, own):
    """Lengths given as a constant (0, 1, T and between, and invalid ones clamped), static
    dims: the whole index folds into a constant, which each backend must read as the
    planner emits it (tinygrad reads no constant Gather index of two dims)."""
    backend = backend_or_skip(name)
    batch_axis, time_axis = LAYOUTS[layout]
    dims = dims_for(rank, batch_axis, time_axis, False, (5, 6))
    x = random_array(np.random.default_rng(1), ELEMENT_TYPES["float32"], dims)
    lens = np.array([5, 0, 1, 3, 7, -1], np.int64)
    model = reverse_sequence_model(
        dims, onnx.TensorProto.FLOAT, batch_axis=batch_axis, time_axis=time_axis, lens=lens
    )
    inlined = revseq.inline(model, target=name if own else None)
    expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_identical(backend.prepare(inlined)({"x": x})[0], expected)


@pytest.mark.backend
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", BACKENDS)
def test_full_lengths_from_the_data_shape_reverse_on_the_backend(name, layout, dynamic, opset):
    """A node whose lengths all reach T (tf2onnx's tf.reverse) becomes a step -1 Slice
    where the target's Slice steps back over its dims, else a Gather along time (tract
    with symbolic dims, MNN at rank 4 and more); the lengths' Expand goes with the node
    (TVM cannot convert it). The default and the own target, each distinct model once."""
    backend = backend_or_skip(name)
    batch_axis, time_axis = LAYOUTS[layout]
    for rank in (2, 3, 4, 5):
        dims = dims_for(rank, batch_axis, time_axis, dynamic, SIZES[0])
        model = full_lengths_model(dims, batch_axis, time_axis, opset)
        outputs = {revseq.inline(model, target=t).SerializeToString() for t in (None, name)}
        for inlined in map(onnx.load_from_string, outputs):
            assert "Expand" not in {n.op_type for n in inlined.graph.node}
            runner = backend.prepare(inlined)
            for size in SIZES if dynamic else SIZES[:1]:
                shape = dims_for(rank, batch_axis, time_axis, False, size)
                x = random_array(np.random.default_rng(rank), ELEMENT_TYPES["float32"], shape)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = runner({"x": x})[0]
                assert_identical(got, np.ascontiguousarray(np.flip(x, axis=time_axis)))


@pytest.mark.backend
@pytest.mark.parametrize("opset", [10, 11, 13])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", BACKENDS)
def test_default_output_before_opset_14(name, layout, opset):
    """Static dims before Reshape's allowzero: the row form (opset 11; 10 is upgraded),
    for the unsigned types only Gather moves on every backend, and float32."""
    backend = backend_or_skip(name)
    batch_axis, time_axis = LAYOUTS[layout]
    for dtype in ("uint16", "uint32", "uint64", "float32"):
        if dtype not in types_of(name):
            continue
        dims = dims_for(3, batch_axis, time_axis, False, SIZES[0])
        model = model_of(dims, dtype, batch_axis, time_axis)
        model.opset_import[0].version = opset
        inlined = revseq.inline(model)
        if default_not_for(name, inlined, dtype) is not None:
            continue
        run_and_compare(
            backend,
            inlined,
            rank=3,
            dtype=dtype,
            batch_axis=batch_axis,
            time_axis=time_axis,
            dynamic=False,
        )


@pytest.mark.backend
@pytest.mark.parametrize("dtype", ["float32", "uint16"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("pair", [("onnx2torch", "tvm"), ("tract", "tinygrad")])
def test_output_for_several_backends_runs_on_each(pair, layout, dtype):
    batch_axis, time_axis = LAYOUTS[layout]
    dims = dims_for(3, batch_axis, time_axis, True, SIZES[0])
    inlined = revseq.inline(model_of(dims, dtype, batch_axis, time_axis), target=pair)
    for name in pair:
        run_and_compare(
            backend_or_skip(name),
            inlined,
            rank=3,
            dtype=dtype,
            batch_axis=batch_axis,
            time_axis=time_axis,
            dynamic=True,
        )


def profile_forms() -> list[tuple[str, str, bool]]:
    cases = []
    for name in BACKENDS:
        profile = TARGETS.get(name)
        for dynamic in (False, True):
            kind = "dynamic" if dynamic else "static"
            forms = profile.forms.get(kind, ()) if profile and profile.forms else ()
            cases += [(name, form, dynamic) for form in sorted(forms)]
    return cases


@pytest.mark.backend
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize(("name", "form", "dynamic"), profile_forms())
def test_every_form_the_profile_allows(name, form, dynamic, layout):
    """Rank 3 always; rank 4 wherever the planner emits the form for the backend.

    With a symbolic trailing dim among several the row form's view reads them from the
    shape with an op some backends lack (onnx2torch: ``Reshape`` with ``allowzero``):
    the planner refuses it there, naming what is missing. ``form@int32`` is the form
    with its index computed in int32 (the profile without int64 index arithmetic).
    """
    strategy, target = TARGETS[name].variant(form)
    check_default(name, 3, "float32", layout, dynamic, strategy=strategy, target=target)
    try:
        check_default(name, 4, "float32", layout, dynamic, strategy=strategy, target=target)
    except revseq.StrategyError as e:
        assert "lacks" in str(e), e


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
    from revseq.probe._models import probe_inputs, probe_model
    from revseq.probe._ops import OP_PROBES
    from revseq.probe._runs import reference

    probe = next(p for p in OP_PROBES if p.name == "Where:broadcast_else")
    model = probe_model(probe, False)
    feeds = probe_inputs(probe, False)[0]
    got = backend.run(model, feeds)[0]
    assert got.tobytes() != reference(model)(feeds)[0].tobytes()
    assert "Where:broadcast_else" not in TARGETS["mnn"].static_ops
    assert "Where" in TARGETS["mnn"].static_ops
    check_default("mnn", 3, "float32", "time_major", True)


@pytest.mark.parametrize("name", ["onnxruntime", "openvino"])
def test_the_flatten_probe_runs_empty_data_and_openvino_gets_another_view(name):
    """The Flatten probe also runs an empty sequence and batch with symbolic dims, its
    truth from onnxruntime there (onnx's reference cannot Flatten them): OpenVINO 2026.4
    flattens [0, 3, 3] to [0, 9], so its row form views such data as [rows, *trailing]."""
    backend = backend_or_skip(name)
    from revseq.probe._models import probe_inputs, probe_model
    from revseq.probe._ops import OP_PROBES
    from revseq.probe._runs import reference, run_exact
    from revseq.probe._text import EMPTY_SIZES

    probe = next(p for p in OP_PROBES if p.name == "Flatten")
    model = probe_model(probe, True)
    feeds = probe_inputs(probe, True)
    empty = [f for f in feeds if f["x"].size == 0]
    assert [f["x"].shape[:2] for f in empty] == list(EMPTY_SIZES)
    assert [t.shape for f in empty for t in reference(model)(f)] == [(0, 3), (0, 3)]
    failure = run_exact(backend, model, feeds, reference(model))
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
    [((600, 8), 1, 0), ((600, 8, 1), 1, 0), ((8, 600, 1), 0, 1), ((700, 6, 2), 1, 0)],
    ids=["matrix-transposed", "squeezed-transposed", "squeezed", "rows"],
)
@pytest.mark.parametrize("name", BACKENDS)
def test_large_static_indexes_run_on_the_backend(name, dims, batch_axis, time_axis):
    """Indexes of 4,096 elements and more, static: int32 index arithmetic where the
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
