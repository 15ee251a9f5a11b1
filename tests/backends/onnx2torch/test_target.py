"""The onnx2torch room's target: what revseq writes for onnx2torch converts and runs there."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_identical, onnx2torch_here

import revseq
from revseq import backends
from revseq.ops.reference import reverse_sequence, reverse_sequence_model

pytestmark = [onnx2torch_here, pytest.mark.backend]


@pytest.mark.parametrize("opset", [18, 21, 23])
def test_a_model_past_the_converter_s_opsets_is_written_at_the_latest_it_converts(opset):
    """onnx2torch converts no Shape or Cast of opset 19 or later: the target's output is
    converted down to 18, and runs there exactly, at two sizes of its symbolic dims."""
    model = reverse_sequence_model(["T", "B", 3], onnx.TensorProto.FLOAT, opset=opset)
    inlined = revseq.inline(model, target="onnx2torch")
    assert {o.domain: o.version for o in inlined.opset_import}[""] == 18
    runner = backends.get("onnx2torch").prepare(inlined)
    rng = np.random.default_rng(opset)
    for steps, batch in ((5, 4), (2, 3)):
        x = rng.standard_normal((steps, batch, 3)).astype(np.float32)
        lens = rng.integers(0, steps + 1, batch)
        assert_identical(runner({"x": x, "lens": lens})[0], reverse_sequence(x, lens))
