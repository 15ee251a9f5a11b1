"""Input shapes fixed before inlining, for runtimes that build for fixed shapes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import revseq
from revseq.cli import main
from revseq.ops.reference import reverse_sequence, reverse_sequence_model

INT32 = onnx.TensorProto.INT32


def _dims(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param
            for d in value.type.tensor_type.shape.dim]  # fmt: skip


def test_fixed_sizes_bind_their_symbols_and_give_a_static_form():
    model = reverse_sequence_model(["T", "B", 4], INT32, batch_axis=1, time_axis=0)
    inlined = revseq.inline(model, input_shapes={"x": [6, 3, 4]})
    assert [_dims(v) for v in inlined.graph.input] == [[6, 3, 4], [3]]  # B bound for lens
    assert _dims(inlined.graph.output[0]) == [6, 3, 4]
    assert "Shape" not in {n.op_type for n in inlined.graph.node}  # nothing read at run time
    assert not revseq.inline(model).graph.input[0].type.tensor_type.shape.dim[0].dim_value
    import onnxruntime as ort

    x = np.arange(72, dtype=np.int32).reshape(6, 3, 4)
    lens = np.array([0, 4, 6], np.int64)
    got = ort.InferenceSession(inlined.SerializeToString()).run(None, {"x": x, "lens": lens})
    want = reverse_sequence(x, lens, batch_axis=1, time_axis=0)
    assert got[0].tobytes() == want.tobytes()


@pytest.mark.parametrize(
    "shapes, message",
    [
        ({"q": [1]}, "'q': no such input"),
        ({"x": [6, 3]}, "2 dims given, the model declares 3"),
        ({"x": [6, 3, 5]}, "dim 2 is 4 in the model, 5 given"),
        ({"x": [6, 3, 4], "lens": [2]}, "symbol 'B' is given 3 and 2"),
    ],
)
def test_a_shape_that_does_not_fit_is_one_line_and_nothing_is_written(
    shapes, message, tmp_path, capsys
):
    model = reverse_sequence_model(["T", "B", 4], INT32, batch_axis=1, time_axis=0)
    with pytest.raises(revseq.RevseqError, match=message):
        revseq.inline(model, input_shapes=shapes)
    onnx.save(model, tmp_path / "m.onnx")
    flags = [f"{name}:[{','.join(map(str, dims))}]" for name, dims in shapes.items()]
    out = tmp_path / "out.onnx"
    assert main(["inline", str(tmp_path / "m.onnx"), "-o", str(out), "-q",
                 "--overwrite-input-shape", *flags]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not out.exists()


def test_inline_check_runs_at_the_fixed_sizes(tmp_path, capsys):
    model = reverse_sequence_model(["T", "B", 4], INT32, batch_axis=1, time_axis=0)
    onnx.save(model, tmp_path / "m.onnx")
    out = tmp_path / "out.onnx"
    assert main(["inline", str(tmp_path / "m.onnx"), "-o", str(out), "--check",
                 "--target", "rknn", "--overwrite-input-shape", "x:[6,3,4]"]) == 0  # fmt: skip
    # At other sizes the candidate, fixed at [6, 3, 4], could not run: exit 2.
    assert "check: OK" in capsys.readouterr().err
    assert [_dims(v) for v in onnx.load(out).graph.input] == [[6, 3, 4], [3]]


def test_check_feeds_an_input_the_candidate_fixed_at_its_sizes_unasked():
    """REF keeps its symbols, CAND was inlined at fixed sizes: CAND runs at those."""
    model = reverse_sequence_model(["T", "B", 3], onnx.TensorProto.FLOAT)
    fixed = revseq.inline(model, input_shapes={"x": [5, 2, 3]})
    report = revseq.check(model, fixed, trials=2)
    assert report.ok and report.exercised, report
    assert {"dim T: 5, 5 (given)", "dim B: 2, 2 (given)"} <= set(report.inputs), report
