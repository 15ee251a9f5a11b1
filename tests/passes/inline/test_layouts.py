"""The layouts and index types the forms choose for speed: each exact, each restorable.

Large static indexes run their arithmetic in int32 where the target allows it (and
provably fits); time-major single-element rows with a short batch are gathered on the
data's transpose; trailing size-1 axes are squeezed off. None of it may change a value
(invalid lengths included) or keep restore from fusing the node back whole.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest
from helpers import constants_of, model_of, run_ort
from onnxscript import rewriter

import revseq
from revseq.ops import forms
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.signature import Signature
from revseq.passes.graph.builder import NodeBuilder
from revseq.passes.restore.rules import rules


def _model(dims, batch_axis: int, time_axis: int, *, int32_lens: bool = False):
    if not int32_lens:
        return model_of(dims, "float32", batch_axis, time_axis)
    return model_of(
        dims,
        "float32",
        batch_axis,
        time_axis,
        domain="revseq",
        lens_type=onnx.TensorProto.INT32,
    )


def _run(model: onnx.ModelProto, feeds, *, optimized: bool) -> np.ndarray:
    return run_ort(model, feeds, optimize=optimized)[0]


def _int32_casts(model: onnx.ModelProto) -> int:
    return sum(
        n.op_type == "Cast" and n.attribute[0].i == onnx.TensorProto.INT32
        for n in model.graph.node
    )


def _reads_of_x(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node if "x" in n.input]


CASES = [
    # dims, batch_axis, time_axis, what reads x first
    ((2000, 16), 1, 0, "Transpose"),
    ((600, 8, 1), 1, 0, "Squeeze"),
    ((8, 600, 1, 1), 0, 1, "Squeeze"),
    ((512, 64), 1, 0, "GatherElements"),
    ((64, 512), 0, 1, "GatherElements"),
    ((700, 6, 2), 1, 0, "Flatten"),
    ((700, 6, 2, 1), 1, 0, "Reshape"),
]


@pytest.mark.parametrize("int32_lens", [False, True], ids=["int64-lens", "int32-lens"])
@pytest.mark.parametrize(("dims", "batch_axis", "time_axis", "first"), CASES)
def test_large_static_indexes_are_exact_in_int32(
    dims, batch_axis, time_axis, first, int32_lens
):
    model = _model(dims, batch_axis, time_axis, int32_lens=int32_lens)
    inlined = revseq.inline(model, target="any")
    assert _int32_casts(inlined) == (0 if int32_lens else 1)
    assert _reads_of_x(inlined) == [first]
    time_len, batch = dims[time_axis], dims[batch_axis]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(dims).astype(np.float32)
    lens_type = np.int32 if int32_lens else np.int64
    big = np.iinfo(lens_type).max
    # Valid lengths, and invalid ones that must clamp: below 0 and above T, as far as
    # the lengths' type goes (an int64 length must not wrap in the cast to int32).
    valid = rng.integers(0, time_len, batch, endpoint=True)
    valid[:3] = [time_len, 0, 1]
    invalid = valid.copy()
    invalid[:4] = [-1, time_len + 1, big, -big - 1]
    if not int32_lens:
        invalid[4:6] = [(1 << 32) + 2, -(1 << 32) + 2]
    for values in (valid, invalid):
        lens = values.astype(lens_type)
        clamped = np.clip(lens.astype(np.int64), 0, time_len)
        expected = reverse_sequence(x, clamped, batch_axis=batch_axis, time_axis=time_axis)
        for optimized in (False, True):
            got = _run(inlined, {"x": x, "lens": lens}, optimized=optimized)
            assert got.tobytes() == expected.tobytes(), (lens[:6], optimized)


@pytest.mark.parametrize(("dims", "batch_axis", "time_axis", "first"), CASES)
def test_every_layout_restores_to_one_node(dims, batch_axis, time_axis, first):
    model = _model(dims, batch_axis, time_axis)
    for target in (None, "any"):
        inlined = revseq.inline(model, target=target)
        assert [n.op_type for n in revseq.restore(inlined).graph.node] == ["ReverseSequence"]
        fused = rewriter.rewrite(ir.from_proto(inlined), pattern_rewrite_rules=rules)
        assert [n.op_type for n in fused.graph if n.op_type != "Identity"] == [
            "ReverseSequence"
        ]


@pytest.mark.parametrize(("dims", "narrow"), [((20, 3, 10), False), ((30, 3, 10), True)])
def test_static_indexes_of_256_elements_and_more_are_int32(dims, narrow):
    """Below 256 index elements int32 saves nothing (docs/choices.md). A batch axis after
    a trailing one: no constant table stands for the index (two leading axes only), so
    its arithmetic shows the type: 20 x 10 elements int64, 30 x 10 int32, both exact."""
    model = reverse_sequence_model(
        dims, onnx.TensorProto.FLOAT, batch_axis=2, time_axis=0, domain="revseq"
    )
    inlined = revseq.inline(model, target="any")
    assert (_int32_casts(inlined) > 0) == narrow
    rng = np.random.default_rng(3)
    x = rng.standard_normal(dims).astype(np.float32)
    lens = rng.integers(0, dims[0], dims[2], endpoint=True)
    lens[:3] = [dims[0], 0, 1]
    expected = reverse_sequence(x, lens, batch_axis=2, time_axis=0)
    assert (
        _run(inlined, {"x": x, "lens": lens}, optimized=False).tobytes() == expected.tobytes()
    )


def _emitted_casts(dims, batch_axis: int, time_axis: int, allowed) -> list[int]:
    """The Cast target types of the row form emitted for a static signature."""
    sig = Signature(
        batch_axis=batch_axis,
        time_axis=time_axis,
        rank=len(dims),
        dims=tuple(dims),
        dtype=ir.DataType.FLOAT,
        lens_dtype=ir.DataType.INT64,
        lens=None,
        opset=18,
        allowed=allowed,
    )
    op = NodeBuilder("probe")
    output = forms.emit(op, ir.Value(name="x"), ir.Value(name="lens"), sig, "gather_rows")
    return [n.attributes["to"].value for n in op.finish(output) if n.op_type == "Cast"]


def test_int32_only_where_the_index_fits_and_the_target_allows_it():
    int32, int64 = ir.DataType.INT32, ir.DataType.INT64
    onnxruntime = frozenset(revseq.TARGETS["onnxruntime"].allowed(dynamic=False) or ())
    # 600 x 8 rows: int32 arithmetic, read by the Gather as it is.
    assert _emitted_casts((600, 8, 2), 1, 0, None) == [int32]
    assert _emitted_casts((600, 8, 2), 1, 0, onnxruntime) == [int32]
    # A target whose Gather takes no int32 indices gets them cast back.
    assert _emitted_casts((600, 8, 2), 1, 0, onnxruntime - {"Gather:int32"}) == [int32, int64]
    assert _emitted_casts((600, 8, 2), 1, 0, onnxruntime - {"Index:int32"}) == []
    # 40,000 x 60,000 rows overflow int32: int64 throughout.
    assert _emitted_casts((40_000, 60_000, 2), 1, 0, None) == []


def test_the_transpose_needs_a_target_that_has_it():
    model = _model((2000, 16), 1, 0)
    allowed = set(revseq.TARGETS["onnxruntime"].allowed(dynamic=False) or ()) - {"Transpose"}
    inlined = revseq.inline(model, target=allowed)
    assert "Transpose" not in {n.op_type for n in inlined.graph.node}
    x = np.random.default_rng(1).standard_normal((2000, 16)).astype(np.float32)
    lens = np.arange(16, dtype=np.int64) * 125
    expected = reverse_sequence(x, lens)
    assert _run(inlined, {"x": x, "lens": lens}, optimized=True).tobytes() == (
        expected.tobytes()
    )


def test_dynamic_time_with_a_short_static_batch_is_gathered_transposed():
    model = _model(("T", 8), 1, 0)
    inlined = revseq.inline(model)
    assert _reads_of_x(inlined)[0] == "Transpose"
    for time_len in (1, 8, 9, 300):
        x = np.random.default_rng(time_len).standard_normal((time_len, 8)).astype(np.float32)
        lens = np.minimum(np.arange(8, dtype=np.int64) * 40, time_len)
        got = _run(inlined, {"x": x, "lens": lens}, optimized=False)
        assert got.tobytes() == reverse_sequence(x, lens).tobytes()
    assert [n.op_type for n in revseq.restore(inlined).graph.node] == ["ReverseSequence"]


@pytest.mark.parametrize(
    ("dims", "first"), [((300, 3), "GatherElements"), ((512, 2), "Transpose")]
)
def test_small_static_data_transposes_its_index_not_itself(dims, first):
    """Below 1,024 elements the data's two Transposes save nothing (docs/choices.md): the
    index is transposed, once for every reversal by the same lengths; at 1,024 and more
    the short batch is gathered on the data's transpose. Both exact."""
    model = _model(dims, 1, 0)
    inlined = revseq.inline(model)
    assert _reads_of_x(inlined) == [first]
    x = np.random.default_rng(4).standard_normal(dims).astype(np.float32)
    lens = np.array([dims[0], 0, 1][: dims[1]], dtype=np.int64)
    expected = reverse_sequence(x, lens)
    assert _run(inlined, {"x": x, "lens": lens}, optimized=False).tobytes() == (
        expected.tobytes()
    )
    if first == "GatherElements":  # two reversals: one Transpose, of the shared index
        twice = oh.make_model(
            oh.make_graph(
                [
                    oh.make_node("ReverseSequence", ["x", "lens"], ["y0"]),
                    oh.make_node("Neg", ["x"], ["n"]),
                    oh.make_node("ReverseSequence", ["n", "lens"], ["y1"]),
                ],
                "g",
                list(model.graph.input),
                [
                    oh.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, dims)
                    for i in (0, 1)
                ],
            ),
            opset_imports=[oh.make_opsetid("", 18)],
        )
        ops = [n.op_type for n in revseq.inline(twice).graph.node]
        assert ops.count("Transpose") == 1 and ops.count("GatherElements") == 2


@pytest.mark.parametrize("dims", [(70_000, 2), (70_000, 2, 2)])
def test_a_static_time_beyond_the_folding_limit_is_an_index_computed_at_run_time(dims):
    """Int32 index arithmetic with a run-time iota: its Range (int64, like the shape it
    reads) is cast to int32; no constant larger than the folding limit is written."""
    from revseq.ops.signature import MAX_FOLDED_ELEMENTS

    model = _model(dims, 1, 0)
    inlined = revseq.inline(model)
    assert "Range" in {n.op_type for n in inlined.graph.node}
    largest = max(int(np.prod(t.dims)) for t in constants_of(inlined).values())
    assert largest <= MAX_FOLDED_ELEMENTS
    x = np.random.default_rng(3).standard_normal(dims).astype(np.float32)
    lens = np.array([dims[0], 3], dtype=np.int64)
    expected = reverse_sequence(x, lens)
    for optimized in (False, True):
        assert _run(inlined, {"x": x, "lens": lens}, optimized=optimized).tobytes() == (
            expected.tobytes()
        )


def _op_types(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node if n.op_type != "Constant"]


def _reshapes_back(model: onnx.ModelProto) -> bool:
    """Whether a Reshape takes the data's shape (the row form's Reshape back)."""
    nodes = model.graph.node
    shapes = {n.output[0] for n in nodes if n.op_type == "Shape" and list(n.input) == ["x"]}
    return any(n.op_type == "Reshape" and n.input[1] in shapes for n in model.graph.node)


@pytest.mark.parametrize(
    ("dims", "batch_axis", "time_axis"),
    [
        (("T", "B", 6), 1, 0),
        (("B", "T", 6), 0, 1),
        (("T", "B", 2, 3), 1, 0),
        (("T", "B", "F"), 1, 0),
    ],
)
def test_symbolic_row_form_is_not_reshaped_back(dims, batch_axis, time_axis):
    """Its Gather's output already has the data's shape: no Reshape back, no allowzero.

    One trailing dim, static or not, is viewed by Flatten where the target Flattens
    symbolic dims; several static trailing dims are kept by a ``[-1, *trailing]`` view,
    as is one for tract, which infers that view but cannot Flatten symbolic dims. The
    stride and the batch offset are applied once, after the select: one Mul, one Add
    of the offset (a Mul per branch before). A time-major node with a symbolic batch
    computes its index as [B, T] and transposes it (two nodes more).
    """
    model = _model(dims, batch_axis, time_axis)
    inlined = revseq.inline(model, strategy="gather_rows", target="onnxruntime")
    ops = _op_types(inlined)
    assert not _reshapes_back(inlined)
    assert ("Flatten" in ops) == (len(dims) == 3)
    if "F" not in dims:
        on_tract = revseq.inline(model, strategy="gather_rows", target="tract")
        assert "Flatten" not in _op_types(on_tract) and not _reshapes_back(on_tract)
    assert ops.count("Mul") == 1
    assert len(ops) <= (23 if time_axis == 0 else 21)
    rng = np.random.default_rng(0)
    rows = (2, 3) if len(dims) == 4 else (6,)
    for time_len, batch in ((5, 3), (1, 4), (7, 1), (0, 2), (3, 0)):
        lead = (time_len, batch) if time_axis == 0 else (batch, time_len)
        x = rng.standard_normal((*lead, *rows)).astype(np.float32)
        lens = np.array([time_len, 0, 1, min(2, time_len)] * batch, np.int64)[:batch]
        expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
        for optimized in (False, True):
            got = _run(inlined, {"x": x, "lens": lens}, optimized=optimized)
            assert got.tobytes() == expected.tobytes()
    assert [n.op_type for n in revseq.restore(inlined).graph.node] == ["ReverseSequence"]


@pytest.mark.parametrize("opset", [14, 18])
@pytest.mark.parametrize(
    ("dims", "batch_axis", "time_axis"),
    [
        (("T", "B", "C", 3), 1, 0),
        (("B", "T", "C", "D"), 0, 1),
        (("T", "B", "C", "D", 2), 1, 0),
    ],
)
def test_symbolic_row_form_with_symbolic_trailing_axes_keeps_them_in_its_view(
    dims, batch_axis, time_axis, opset
):
    """Its view is ``[rows, *trailing]`` read from the shape, allowzero: nothing to reshape.

    A Reshape back would copy the output (it is the graph output); a 0 anywhere in the
    shape, leading or trailing, must survive the view.
    """
    model = reverse_sequence_model(
        dims, onnx.TensorProto.FLOAT, batch_axis=batch_axis, time_axis=time_axis,
        opset=opset, name="rs",
    )  # fmt: skip
    inlined = revseq.inline(model, strategy="gather_rows", target="onnxruntime")
    assert not _reshapes_back(inlined)
    assert "Flatten" not in _op_types(inlined)
    (view,) = [n for n in inlined.graph.node if n.op_type == "Reshape" and "x" in n.input]
    assert onnx.helper.get_attribute_value(view.attribute[0]) == 1  # allowzero
    with pytest.raises(revseq.StrategyError, match="Reshape:allowzero"):
        revseq.inline(model, strategy="gather_rows", target="onnx2torch")
    rng = np.random.default_rng(0)
    for lead, trailing in (((5, 3), (2, 3, 2)), ((3, 0), (2, 3, 2)), ((4, 2), (0, 3, 2))):
        time_len = lead[time_axis]
        shape = (*lead, *trailing[: len(dims) - 2])
        x = rng.standard_normal(shape).astype(np.float32)
        lens = np.array([time_len, 0, 1] * 2, np.int64)[: lead[batch_axis]]
        expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
        for optimized in (False, True):
            got = _run(inlined, {"x": x, "lens": lens}, optimized=optimized)
            assert got.shape == expected.shape
            assert got.tobytes() == expected.tobytes()
    assert [n.op_type for n in revseq.restore(inlined).graph.node] == ["ReverseSequence"]
    static_rows = revseq.inline(
        _model(("T", "B", 2, 3), 1, 0), strategy="gather_rows", target="onnx2torch"
    )
    assert not _reshapes_back(static_rows)


@pytest.mark.parametrize(
    ("dims", "most"), [(("T", "B", 6), 28), (("T", "B", "F"), 27), (("B", "T", 6), 27)]
)
def test_symbolic_default_node_counts_do_not_grow(dims, most):
    """The default's shape and index arithmetic with symbolic dims, node by node.

    Some backends pay per node (onnx2torch, onnxruntime on small tensors): 28 for a
    time-major rank-3 node, two of them for computing its index with time innermost
    and transposing it (a symbolic batch counts as short), and two for clamping the
    lengths at 0 by a select (onnx2torch's Max costs it more than a Less and a Where).
    """
    batch_axis, time_axis = (1, 0) if dims[0] == "T" else (0, 1)
    inlined = revseq.inline(_model(dims, batch_axis, time_axis))
    assert len(_op_types(inlined)) <= most
