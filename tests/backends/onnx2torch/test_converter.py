"""The onnx2torch room's converter: ReverseSequence as one torch module, eager, compiled
with ``torch.compile(fullgraph=True)`` and exported with ``torch.export``, bit for bit against
the numpy reference, at a second shape where dims are symbolic."""

from __future__ import annotations

import os
import shutil

import helpers
import numpy as np
import onnx
import pytest
from helpers import assert_identical, model_of, onnx2torch_here, run_ort

import revseq
from revseq.equivalence.inputs.values import random_array
from revseq.ops.reference import reverse_sequence
from revseq.ops.vocabulary import ELEMENT_TYPES, REVSEQ_DOMAIN

pytestmark = onnx2torch_here
FIXTURES = helpers.FIXTURES
compiler_here = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "g++")) is None,
    reason="torch.compile's CPU backend (inductor) needs g++ (or $CXX)",
)

# What torch has no dtype for: strings; uint16/32/64 gather only from torch 2.3 on, and
# torch 2.13 has them.
TORCH_TYPES = [name for name in ELEMENT_TYPES if name != "string"]


def _converter():
    return pytest.importorskip("revseq.backends.onnx2torch.converter")


def _inputs(dims, dtype, batch_axis, time_axis, rng, lengths=None):
    data = random_array(rng, ELEMENT_TYPES[dtype], tuple(dims))
    batch, steps = dims[batch_axis], dims[time_axis]
    if lengths is None:  # 0, 1 and the full length, the rest random
        lengths = rng.integers(0, steps + 1, batch)
        lengths[: min(batch, 3)] = [0, 1, steps][: min(batch, 3)]
    return data, np.asarray(lengths, dtype=np.int64)


def _run(module, data, lengths):
    import torch

    from revseq.backends.onnx2torch import on_host, to_torch

    with torch.no_grad():
        return on_host(module(to_torch(data), to_torch(lengths)))[0]


def _layout_dims(rank, batch_axis, sizes=(3, 5)):
    dims = [2] * rank
    dims[batch_axis], dims[1 - batch_axis] = sizes
    return dims


@pytest.mark.parametrize("dtype", TORCH_TYPES)
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
@pytest.mark.parametrize("batch_axis", [0, 1])
def test_every_type_rank_and_layout_converts_exactly(dtype, rank, batch_axis):
    converter = _converter()
    time_axis = 1 - batch_axis
    dims = _layout_dims(rank, batch_axis, sizes=(4, 6))
    module = converter.convert(model_of(dims, dtype, batch_axis, time_axis))
    data, lengths = _inputs(dims, dtype, batch_axis, time_axis, np.random.default_rng(rank))
    expected = reverse_sequence(data, lengths, batch_axis=batch_axis, time_axis=time_axis)
    assert_identical(_run(module, data, lengths), expected)


def test_agrees_with_onnxruntime_s_kernel():
    converter = _converter()
    model = model_of([7, 3, 5], "float32", 1, 0)
    data, lengths = _inputs([7, 3, 5], "float32", 1, 0, np.random.default_rng(0))
    expected = run_ort(model, {"x": data, "lens": lengths}, optimize=True)[0]
    assert_identical(_run(converter.convert(model), data, lengths), expected)


def test_invalid_lengths_clamp_as_the_decompositions_do():
    """Negative lengths reverse nothing, lengths above T everything: what revseq's inlined
    output computes, so the two never disagree."""
    converter = _converter()
    model = model_of([4, 5], "int64", 0, 1)
    data, lengths = _inputs([4, 5], "int64", 0, 1, np.random.default_rng(1), [-3, 9, 5, 2])
    expected = reverse_sequence(data, lengths, batch_axis=0, time_axis=1)
    assert_identical(_run(converter.convert(model), data, lengths), expected)
    from revseq.backends.onnx2torch import prepare

    inlined = prepare(revseq.inline(model, target="onnx2torch"))
    assert_identical(inlined({"x": data, "lens": lengths})[0], expected)


@pytest.mark.parametrize(("batch_axis", "time_axis"), [(2, -1), (-1, 0), (1, 3)])
def test_revseq_s_own_domain_any_axes_and_int32_lengths(batch_axis, time_axis):
    converter = _converter()
    dims = [3, 4, 5, 6]
    model = model_of(
        dims, "float32", batch_axis, time_axis, domain=REVSEQ_DOMAIN,
        lens_type=onnx.TensorProto.INT32,
    )  # fmt: skip
    data = random_array(np.random.default_rng(2), onnx.TensorProto.FLOAT, tuple(dims))
    steps = dims[time_axis]
    lengths = np.resize(np.array([0, 1, steps, 2], dtype=np.int32), dims[batch_axis])
    expected = reverse_sequence(data, lengths, batch_axis=batch_axis, time_axis=time_axis)
    assert_identical(_run(converter.convert(model), data, lengths), expected)


def test_register_is_idempotent_and_a_path_converts(tmp_path):
    converter = _converter()
    converter.register()
    converter.register()
    path = tmp_path / "rs.onnx"
    onnx.save(model_of(["T", "B"], "float32", 1, 0), path)
    assert isinstance(converter.convert(str(path)).rs, converter.ReverseSequence)


# --- Compiled and exported ---------------------------------------------------------------

COMPILED_CASES = [
    (rank, batch_axis, dtype, symbolic)
    for rank in (2, 3, 4)
    for batch_axis in (0, 1)
    for dtype in ("float32", "int64")
    for symbolic in (False, True)
]


def _reference(data, lengths, batch_axis):
    return reverse_sequence(data, lengths, batch_axis=batch_axis, time_axis=1 - batch_axis)


def _case_model(rank, batch_axis, dtype, symbolic):
    dims = _layout_dims(rank, batch_axis)
    if symbolic:
        dims = [f"d{i}" for i in range(rank)]
        dims[batch_axis], dims[1 - batch_axis] = "B", "T"
    return model_of(dims, dtype, batch_axis, 1 - batch_axis, own_lens_dim=True)


def _shapes(rank, batch_axis, symbolic):
    first = _layout_dims(rank, batch_axis)
    if not symbolic:
        return [first]
    second = [3] * rank
    second[batch_axis], second[1 - batch_axis] = 6, 9
    return [first, second]


@compiler_here
@pytest.mark.parametrize(("rank", "batch_axis", "dtype", "symbolic"), COMPILED_CASES)
def test_compiles_with_fullgraph_and_runs_exactly(rank, batch_axis, dtype, symbolic):
    import torch

    converter = _converter()
    module = converter.convert(_case_model(rank, batch_axis, dtype, symbolic))
    torch._dynamo.reset()
    compiled = torch.compile(module, fullgraph=True, dynamic=symbolic)
    rng = np.random.default_rng(rank)
    for dims in _shapes(rank, batch_axis, symbolic):
        data, lengths = _inputs(dims, dtype, batch_axis, 1 - batch_axis, rng)
        assert_identical(_run(compiled, data, lengths), _reference(data, lengths, batch_axis))


@pytest.mark.parametrize(("rank", "batch_axis", "dtype", "symbolic"), COMPILED_CASES)
def test_exports_with_the_lengths_own_dim_and_runs_exactly(rank, batch_axis, dtype, symbolic):
    """``torch.export`` with every dim a symbol, the lengths' dim one of its own."""
    import torch

    converter = _converter()
    module = converter.convert(_case_model(rank, batch_axis, dtype, symbolic))
    rng = np.random.default_rng(rank)
    shapes = _shapes(rank, batch_axis, symbolic)
    data, lengths = _inputs(shapes[0], dtype, batch_axis, 1 - batch_axis, rng)
    dynamic = None
    if symbolic:
        dims = {i: torch.export.Dim(f"d{i}") for i in range(rank)}
        dynamic = (dims, {0: torch.export.Dim("n")})
    from revseq.backends.onnx2torch import to_torch

    exported = torch.export.export(
        module, (to_torch(data), to_torch(lengths)), dynamic_shapes=dynamic
    ).module()
    for dims in shapes:
        data, lengths = _inputs(dims, dtype, batch_axis, 1 - batch_axis, rng)
        assert_identical(_run(exported, data, lengths), _reference(data, lengths, batch_axis))


@pytest.mark.parametrize("batch_axis", [0, 1])
def test_rows_are_taken_whole_except_where_inductor_fuses_the_gather(batch_axis):
    """Eager and exported: ``index_select`` of whole rows (ExecuTorch's portable gather
    is 8-13x slower); under ``torch.compile``: the element-wise gather,
    which inductor fuses into its copy."""
    import torch

    module = _converter().convert(_case_model(3, batch_axis, "float32", symbolic=True))
    data, lengths = _inputs(_layout_dims(3, batch_axis), "float32", batch_axis, 1 - batch_axis,
                            np.random.default_rng(0))  # fmt: skip
    args = (torch.from_numpy(data), torch.from_numpy(lengths))
    exported = torch.export.export(module, args).graph_module.code
    assert "index_select" in exported and "gather" not in exported
    traced: list[str] = []

    def record(graph_module, example_inputs):
        traced.append(graph_module.code)
        return graph_module

    torch._dynamo.reset()
    compiled = torch.compile(module, backend=record, fullgraph=True)
    assert_identical(_run(compiled, data, lengths), _reference(data, lengths, batch_axis))
    assert "gather" in traced[0]


@compiler_here
@pytest.mark.parametrize(
    "fixture", ["tf_reverse_sequence_opset13.onnx", "torch_dynamo_time_r3_dynamic.onnx"]
)
def test_exporters_models_compile_after_restore(fixture):
    """tf2onnx's op, and torch's home-made decomposition fused back by restore: each
    converts to the one module, compiles with fullgraph and runs as onnxruntime does."""
    import torch

    from revseq.backends.onnx2torch import on_host, to_torch
    from revseq.equivalence.inputs import InputGenerator

    converter = _converter()
    model = revseq.restore(onnx.load(FIXTURES / fixture))
    module = converter.convert(model)
    assert any(isinstance(m, converter.ReverseSequence) for m in module.modules())
    torch._dynamo.reset()
    compiled = torch.compile(module, fullgraph=True, dynamic=True)
    feeds = InputGenerator([model], seed=3).trial(2)
    expected = run_ort(model, feeds, optimize=False)
    names = [i.name for i in model.graph.input]
    with torch.no_grad():
        got = on_host(compiled(*[to_torch(feeds[n]) for n in names]))
    for g, e in zip(got, expected, strict=True):
        assert_identical(g, e)
