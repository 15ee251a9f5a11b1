"""Templates: lengths with a dim of their own, aligned to the data's batch or as declared."""

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from helpers import assert_identical, run_ort
from onnx import TensorProto as TP

import revseq
from revseq.ops import forms
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.signature import Signature
from revseq.passes.inline.templates import traced


def _exported(time_major: bool) -> onnx.ModelProto:
    """A reversal whose int32 lengths have a symbol of their own (``L``), as tf2onnx's."""
    dims = ["T", "B"] if time_major else ["B", "T"]
    axes = {"time_axis": 0 if time_major else 1, "batch_axis": 1 if time_major else 0}
    return reverse_sequence_model(dims, TP.FLOAT, lens_dim="L", lens_elem=TP.INT32, **axes)


def _gathers_lengths(model: onnx.ModelProto) -> bool:
    """Whether some node gathers the lengths input (at the batch's steps)."""
    return any(n.op_type == "Gather" and n.input[0] == "lens" for n in model.graph.node)


@pytest.mark.parametrize("target", [None, "onnxruntime", "tract", "tvm", "webgpu"])
@pytest.mark.parametrize("time_major", [True, False])
def test_a_form_that_counts_no_batch_reads_the_lengths_as_declared(time_major, target):
    """GatherElements reads no batch coordinate: the lengths' gather at the batch's steps
    would be five nodes more (Shape, Cast, Squeeze, Range, Gather) for nothing."""
    model = _exported(time_major)
    inlined = revseq.inline(model, target=target, strategy="gather_elements")
    assert not _gathers_lengths(inlined)
    x = np.random.default_rng(0).standard_normal((7, 6) if time_major else (6, 7))
    x = x.astype(np.float32)
    lens = np.array([0, 1, 7, 4, 12, -3], dtype=np.int32)
    axes = {"time_axis": 0 if time_major else 1, "batch_axis": 1 if time_major else 0}
    for optimize in (False, True):
        (got,) = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)
        assert_identical(got, reverse_sequence(x, lens, **axes))


def test_of_the_two_templates_the_smaller_is_kept():
    """Both ways are emitted; GatherElements keeps the lengths as declared (fewer nodes),
    and its only Range is T's steps."""
    kept, lacks = traced(_signature(time_axis=1, batch_axis=0, own=True), "gather_elements")
    assert not lacks
    ops = [n.op_type for n in kept.nodes if n.op_type != "Constant"]
    assert "Gather" not in ops and ops.count("Range") == 1


def test_lengths_stay_aligned_where_other_axes_lead():
    """revseq's op with a leading axis besides time and batch: the lengths are gathered
    at the batch's steps whatever the form, as a runtime that tracks symbols needs."""
    model = reverse_sequence_model(
        ["d0", "T", "d2", "B"], TP.FLOAT, lens_dim="L", lens_elem=TP.INT32,
        domain="revseq", time_axis=1, batch_axis=3,
    )  # fmt: skip
    for strategy in ("gather_elements", "gather_nd", "gather_rows"):
        try:
            inlined = revseq.inline(model, strategy=strategy)
        except revseq.RevseqError:
            continue
        assert _gathers_lengths(inlined), strategy


def test_only_the_op_as_onnx_defines_it_may_read_its_lengths_as_declared():
    """The predicate: a dim of their own, and time and batch the only leading axes."""
    assert forms.lengths_may_stay_declared(_signature(0, 1, own=True))
    assert forms.lengths_may_stay_declared(_signature(1, 0, own=True))
    assert not forms.lengths_may_stay_declared(_signature(0, 1, own=False))
    assert not forms.lengths_may_stay_declared(_signature(2, 0, own=True))


def _signature(time_axis: int, batch_axis: int, *, own: bool) -> Signature:
    """float32 data of rank 3, every dim symbolic, int32 lengths at run time."""
    return Signature(
        batch_axis=batch_axis,
        time_axis=time_axis,
        rank=3,
        dims=(None, None, 4),
        dtype=ir.DataType.FLOAT,
        lens_dtype=ir.DataType.INT32,
        lens=None,
        opset=18,
        lens_own_dim=own,
    )
