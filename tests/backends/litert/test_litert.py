"""LiteRT through onnx2tf: its target, its own op, what XNNPACK takes, whole models there.

They run where ``REVSEQ_LITERT_PYTHON`` names an environment with onnx2tf and
ai-edge-litert (docs/backends.md#litert), and skip with the reason elsewhere.
"""

from __future__ import annotations

import hashlib
import itertools
import pathlib

import numpy as np
import onnx
import pytest

import revseq
from revseq.backends import get, unavailable
from revseq.ops.reference import reverse_sequence_model
from revseq.ops.targets import TARGETS

_FIXTURES = pathlib.Path(__file__).parents[2] / "fixtures"
_TYPES = {"float32": onnx.TensorProto.FLOAT, "int32": onnx.TensorProto.INT32}


def _litert_or_skip():
    why = unavailable("litert")
    if why is not None:
        pytest.skip(why)
    return get("litert")


def _small(layout: tuple[int, int], lengths: str, dims: str, dtype: str) -> onnx.ModelProto:
    """One reversal as the issue's small cases hold it: [T, B, 4] or [B, T, 4]."""
    batch_axis, time_axis = layout
    sizes = [0, 0, 4]
    sizes[batch_axis], sizes[time_axis] = 3, 6
    shape = sizes if dims == "static" else [*(["T", "B"] if time_axis == 0 else ["B", "T"]), 4]
    constant = np.array([6, 0, 2], np.int64) if lengths == "constant" else None
    return reverse_sequence_model(
        shape, _TYPES[dtype], batch_axis=batch_axis, time_axis=time_axis, lens=constant
    )


_CASES = list(
    itertools.product([(1, 0), (0, 1)], ["constant", "run-time"], ["static", "symbolic"],
                      ["float32", "int32"])
)  # fmt: skip
_SIZES = {"T": 6, "B": 3}
"""The sizes symbolic cases run at: the constant lengths are three."""
_IDS = [
    f"{'time' if b else 'batch'}-major-{lens}-{dims}-{t}" for (b, _), lens, dims, t in _CASES
]


def test_litert_s_profile_keeps_it_out_of_the_default():
    profile = TARGETS["litert"]
    assert profile.yields and profile.native is True
    assert "litert" not in {m.name for m in TARGETS["portable"].members}
    assert "onnx2tf" in profile.backend_version


@pytest.mark.backend
@pytest.mark.parametrize(("layout", "lengths", "dims", "dtype"), _CASES, ids=_IDS)
def test_every_small_case_is_exact_on_litert_with_the_op_kept_as_revseq_recommends(
    layout, lengths, dims, dtype
):
    """onnx2tf writes LiteRT's own REVERSE_SEQUENCE, exact in every small case."""
    _litert_or_skip()
    model = _small(layout, lengths, dims, dtype)
    sizes = _SIZES if dims == "symbolic" else None
    report = revseq.check(model, model, backend="litert", trials=2, dims=sizes)
    assert report.ok and report.exercised, report


_SYMBOLIC = [(c, i) for c, i in zip(_CASES, _IDS, strict=True) if c[2] == "symbolic"]


@pytest.mark.backend
@pytest.mark.parametrize(
    ("layout", "lengths", "dims", "dtype"),
    [c for c, _ in _SYMBOLIC],
    ids=[i for _, i in _SYMBOLIC],
)
def test_its_target_inlines_every_small_case_exactly_there_at_fixed_shapes(
    layout, lengths, dims, dtype
):
    """Each symbolic case with its shapes fixed: the static case, once fixed, is the same."""
    _litert_or_skip()
    model = _small(layout, lengths, dims, dtype)
    fixed = {"x": [6, 3, 4] if layout == (1, 0) else [3, 6, 4]}
    inlined = revseq.inline(model, target="litert", input_shapes=fixed)
    assert "ReverseSequence" not in {n.op_type for n in inlined.graph.node}
    report = revseq.check(model, inlined, backend="litert", trials=2, input_shapes=fixed)
    assert report.ok and report.exercised, report


def test_its_target_at_symbolic_dims_names_both_ways_out():
    model = _small((1, 0), "run-time", "symbolic", "float32")
    with pytest.raises(revseq.StrategyError) as refused:
        revseq.inline(model, target="litert")
    assert "--overwrite-input-shape" in str(refused.value)
    assert "keep the op" in str(refused.value)


@pytest.mark.backend
def test_the_default_s_time_major_select_fails_there_at_symbolic_dims():
    """onnx2tf lowers the default's Where on [T, B] with a symbolic batch to a SELECT
    LiteRT refuses at prepare (the op kept, or the target at fixed shapes, runs)."""
    _litert_or_skip()
    model = _small((1, 0), "run-time", "symbolic", "float32")
    with pytest.raises(revseq.RevseqError, match=r"(?i)select"):
        revseq.check(model, revseq.inline(model), backend="litert", trials=1, dims=_SIZES)


@pytest.mark.backend
def test_what_xnnpack_takes_is_said_after_a_run():
    backend = _litert_or_skip()
    model = _small((0, 1), "run-time", "static", "float32")
    run = backend.prepare(revseq.inline(model, target="litert"))
    assert run.delegation == {}  # nothing said before a run
    x = np.arange(72, dtype=np.float32).reshape(3, 6, 4)
    run({"x": x, "lens": np.array([6, 0, 2], np.int64)})
    taken = run.delegation
    assert set(taken) <= {"xnnpack", "litert"} and sum(map(len, taken.values())) >= 2
    assert all(op.isupper() for ops in taken.values() for op in ops)  # TFLite's op names


@pytest.mark.backend
def test_the_file_checked_is_left_as_it_was(tmp_path):
    """onnx2tf rewrites the file it converts: the adapter hands it a copy."""
    _litert_or_skip()
    from revseq.cli import main

    model = _small((0, 1), "run-time", "static", "float32")
    ref, cand = tmp_path / "ref.onnx", tmp_path / "cand.onnx"
    onnx.save(model, ref)
    onnx.save(revseq.inline(model, target="litert"), cand)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (ref, cand)}
    assert main(["check", str(ref), str(cand), "--backend", "litert", "--trials", "1"]) == 0
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (ref, cand)} == before
    assert sorted(tmp_path.iterdir()) == [cand, ref]


@pytest.mark.backend
def test_a_go_backwards_lstm_s_wrong_shape_is_reported_as_the_model_s_own():
    """At symbolic steps onnx2tf's LSTM gives [1, 1, 8] for [1, T, 8], with or without
    the reversal: the model's own, said so, not revseq's."""
    _litert_or_skip()
    model = onnx.load(_FIXTURES / "tf_go_backwards.onnx")
    steps = model.graph.input[0].type.tensor_type.shape.dim[1]
    steps.Clear()
    steps.dim_param = "steps"
    batch = model.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    for candidate in (model, revseq.inline(model)):  # the op kept, and inlined
        report = revseq.check(
            model, candidate, backend="litert", whole_model=True, dims={batch: 1, "steps": 4}
        )
        assert report.verdict == "RUNTIME-DIFFERS", report
        assert "written by the model's own LSTM" in str(report), report
