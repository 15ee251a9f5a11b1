"""revseq's output on real backends: bit for bit against the truth, on the backend itself.

The default output and every form each profile allows, every type, rank and layout.
The check, the runners and each backend's own quirks: ``test_adapters.py``.
"""

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
    default_not_for,
    dims_for,
    run_and_compare,
)
from helpers import assert_identical, full_lengths_model, model_of

import revseq
from bench.sweep import types_of
from revseq.equivalence.inputs.values import random_array
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import ELEMENT_TYPES


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
