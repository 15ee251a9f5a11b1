"""Carrier types: a type no gather of the target moves is reversed in one that carries it.

Synthetic profiles (a probed onnxruntime profile whose gathers are said to lack a type)
steer the planner; onnxruntime then runs the output, and it must equal the reference
bit for bit, the carrier's Casts included, and restore to the op.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from helpers import all_op_types, assert_identical, model_of, run_ort

import revseq
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import TARGETS, combine
from revseq.ops.targets.carriers import CARRIERS, carrier_pair, carrier_variant
from revseq.ops.vocabulary import ELEMENT_TYPES

LAYOUTS = {"time_major": (1, 0), "batch_major": (0, 1)}


def lacking(dtype: str, *, carries: bool, name: str = "lacking"):
    """The onnxruntime profile with no gather moving ``dtype``, and the round trip
    through its carrier run exactly (``carries``) or not."""
    shipped = TARGETS["onnxruntime"]
    assert shipped.dtypes is not None
    dtypes = {g: types - {dtype} for g, types in shipped.dtypes.items()}
    variant = {carrier_variant(dtype)}
    static = (shipped.static_ops or frozenset()) - variant
    dynamic = (shipped.dynamic_ops or frozenset()) - variant
    if carries:
        static, dynamic = static | variant, dynamic | variant
    return dataclasses.replace(
        shipped,
        name=name,
        backend_version=f"{name} 1.0",
        dtypes=dtypes,
        static_ops=static,
        dynamic_ops=dynamic,
    )


def extremes(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random values of ``dtype`` with its least and greatest (uint64's top bit set)."""
    np_type = onnx.helper.tensor_dtype_to_np_dtype(ELEMENT_TYPES[dtype])
    if np_type == np.bool_:
        return rng.random(shape) < 0.5
    info = np.iinfo(np_type)
    x = rng.integers(info.min, info.max, size=shape, dtype=np_type, endpoint=True)
    x.reshape(-1)[:3] = [info.min, info.max, info.max // 2 + 1]
    return x


def dims_of(rank: int, layout: str, dims_kind: str) -> tuple[tuple, tuple]:
    """(declared dims, run-time shape) of a rank-``rank`` model in ``layout``."""
    batch_axis, time_axis = LAYOUTS[layout]
    shape = [5 if a == time_axis else 4 if a == batch_axis else 2 for a in range(rank)]
    declared: list = list(shape)
    if dims_kind != "static":
        declared[time_axis], declared[batch_axis] = "T", "B"
    if dims_kind == "all":
        declared = [d if isinstance(d, str) else f"d{i}" for i, d in enumerate(declared)]
    return tuple(declared), tuple(shape)


def run_exact(inlined: onnx.ModelProto, x: np.ndarray, layout: str) -> None:
    batch_axis, time_axis = LAYOUTS[layout]
    for lens in ([5, 0, 1, 3], [0, 5, 5, 1]):
        lengths = np.array(lens, np.int64)
        expected = reverse_sequence(x, lengths, batch_axis=batch_axis, time_axis=time_axis)
        for optimize in (False, True):
            got = run_ort(inlined, {"x": x, "lens": lengths}, optimize=optimize)[0]
            assert_identical(got, expected)


@pytest.mark.parametrize("dims_kind", ["static", "time+batch", "all"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
@pytest.mark.parametrize("dtype", sorted(CARRIERS))
def test_a_type_no_gather_moves_is_reversed_in_its_carrier(dtype, rank, layout, dims_kind):
    declared, shape = dims_of(rank, layout, dims_kind)
    batch_axis, time_axis = LAYOUTS[layout]
    model = model_of(declared, dtype, batch_axis, time_axis)
    inlined = revseq.inline(model, target=lacking(dtype, carries=True))
    nodes = [n for n in inlined.graph.node if n.op_type != "Constant"]
    carrier = ELEMENT_TYPES[CARRIERS[dtype]]
    first = next(n for n in nodes if "x" in n.input)
    assert (first.op_type, first.attribute[0].i) == ("Cast", carrier)
    assert (nodes[-1].op_type, nodes[-1].attribute[0].i) == ("Cast", ELEMENT_TYPES[dtype])
    run_exact(inlined, extremes(dtype, shape, np.random.default_rng(rank)), layout)
    restored = revseq.restore(inlined)
    assert [n.op_type for n in restored.graph.node if n.op_type != "Constant"] == [
        "ReverseSequence"
    ]
    assert list(restored.graph.node[-1].input) == ["x", "lens"]


@pytest.mark.parametrize("dtype", sorted(CARRIERS))
def test_without_the_round_trip_the_target_refuses_as_before(dtype):
    model = model_of(("T", "B", 3), dtype, 1, 0)
    with pytest.raises(revseq.RevseqError, match=f"moves no {dtype}"):
        revseq.inline(model, target=lacking(dtype, carries=False))


def test_a_type_a_gather_moves_takes_no_carrier():
    """The Casts cost two passes over the data: only where no gather moves the type."""
    model = model_of(("T", "B", 3), "uint16", 1, 0)
    plain = revseq.inline(model, target="onnxruntime")
    assert "Cast" not in [n.op_type for n in plain.graph.node if "x" in n.input]
    assert plain.graph.node[-1].op_type != "Cast"


def test_the_default_carries_where_no_gather_moves_a_type_on_every_member():
    """One member moves uint16 with Gather only, the other with GatherElements only: no
    form fits both, and both run the round trip through int32; every member that has
    uint16 must have run it."""
    gather_only, elements_only = (
        lacking("uint16", carries=True, name=n) for n in ("alpha", "beta")
    )
    assert gather_only.dtypes is not None and elements_only.dtypes is not None
    gather_only = dataclasses.replace(
        gather_only,
        dtypes={**gather_only.dtypes, "Gather": gather_only.dtypes["Gather"] | {"uint16"}},
    )
    elements_only = dataclasses.replace(
        elements_only,
        dtypes={
            **elements_only.dtypes,
            "GatherElements": elements_only.dtypes["GatherElements"] | {"uint16"},
        },
    )
    # A member with no uint16 at all never receives it: it has no say, round trip or not.
    without = lacking("uint16", carries=False, name="delta")
    both = combine([gather_only, elements_only, without], name="both")
    model = model_of(("T", "B", 3), "uint16", 1, 0)
    inlined = revseq.inline(model, target=both)
    assert all_op_types(inlined).count("Cast") >= 2
    run_exact(inlined, extremes("uint16", (5, 4, 3), np.random.default_rng(0)), "time_major")
    # A member that moves uint16 (with GatherElements) but never ran the round trip.
    no_round_trip = dataclasses.replace(
        elements_only,
        name="gamma",
        static_ops=(elements_only.static_ops or frozenset()) - {carrier_variant("uint16")},
        dynamic_ops=(elements_only.dynamic_ops or frozenset()) - {carrier_variant("uint16")},
    )
    one_lacks = combine([gather_only, no_round_trip], name="mixed")
    with pytest.raises(revseq.RevseqError, match="moves no uint16"):
        revseq.inline(model, target=one_lacks)


def test_a_carried_function_takes_the_nodes_type():
    model = model_of(("T", "B", 3), "uint64", 1, 0)
    inlined = revseq.inline(model, target=lacking("uint64", carries=True), as_function=True)
    (function,) = inlined.functions
    assert function.input[0] == "input"
    casts = [n for n in function.node if n.op_type == "Cast" and "input" in n.input]
    assert [n.attribute[0].i for n in casts] == [onnx.TensorProto.INT64]
    assert function.node[-1].op_type == "Cast"
    run_exact(inlined, extremes("uint64", (5, 4, 3), np.random.default_rng(1)), "time_major")
    restored = revseq.restore(inlined)
    assert [n.op_type for n in restored.graph.node] == ["ReverseSequence"]


def test_restore_does_not_see_through_a_cast_that_loses_values():
    """int32 is no carrier of float32 (nor int8 of int32): those Casts stay outside."""
    model = model_of((5, 4, 3), "float32", 1, 0)
    inlined = revseq.inline(model)
    graph = inlined.graph
    graph.node.insert(0, onnx.helper.make_node("Cast", ["x"], ["x_int"], to=6))
    for node in graph.node[1:]:
        node.input[:] = ["x_int" if i == "x" else i for i in node.input]
    graph.node[-1].output[0] = "y_int"
    graph.node.append(onnx.helper.make_node("Cast", ["y_int"], ["y"], to=1))
    restored = revseq.restore(inlined)
    ops = [n.op_type for n in restored.graph.node if n.op_type != "Constant"]
    assert ops == ["Cast", "ReverseSequence", "Cast"]
    assert carrier_pair(onnx.TensorProto.UINT64, onnx.TensorProto.INT64)
    assert not carrier_pair(onnx.TensorProto.INT32, onnx.TensorProto.INT8)
    assert not carrier_pair(onnx.TensorProto.FLOAT, onnx.TensorProto.INT32)


def test_onnxruntime_runs_every_round_trip_exactly():
    """The probe of the carriers on the control: every type's round trip, extremes
    included, through each gather that moves the carrier there."""
    from revseq.backends import get
    from revseq.probe._runs import run_carrier_probes, run_dtype_probes

    backend = get("onnxruntime")
    results = run_carrier_probes(backend, run_dtype_probes(backend))
    assert {r.name for r in results if r.failure is None} == {
        carrier_variant(t) for t in CARRIERS
    }
    shipped = TARGETS["onnxruntime"]
    assert {carrier_variant(t) for t in CARRIERS} <= (shipped.dynamic_ops or frozenset())


def test_onnxscript_rules_fuse_a_carried_decomposition():
    """The rewrite rules (restore's matcher inside onnxscript's rewriter) take the Casts
    in too, and still fuse a decomposition whose result is cast to another type."""
    import onnx_ir as ir
    from onnxscript import rewriter

    from revseq.passes.restore.rules import rules

    model = model_of(("T", "B", 3), "uint16", 1, 0)
    carried = revseq.inline(model, target=lacking("uint16", carries=True))
    fused = rewriter.rewrite(ir.from_proto(carried), pattern_rewrite_rules=rules)
    ops = [n.op_type for n in fused.graph if n.op_type != "Constant"]
    assert ops == ["ReverseSequence"]
    plain = revseq.inline(model_of((5, 4, 3), "float32", 1, 0))
    graph = plain.graph
    graph.node[-1].output[0] = "y_before"
    graph.node.append(onnx.helper.make_node("Cast", ["y_before"], ["y"], to=10))
    graph.output[0].type.tensor_type.elem_type = 10
    fused = rewriter.rewrite(ir.from_proto(plain), pattern_rewrite_rules=rules)
    assert [n.op_type for n in fused.graph if n.op_type != "Constant"] == [
        "ReverseSequence",
        "Cast",
    ]
