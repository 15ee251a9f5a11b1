"""Models as exporters write them: tf2onnx's exports (tests/fixtures/make_tf_fixtures.py).

Lengths declared with a symbol of their own, int32 lengths cast to int64, full
reversals with lengths read from the data's shape, a masked bidirectional GRU: inlined
for every kind of target and restored, each ReverseSequence comes back, bit-identical.
"""

from __future__ import annotations

import helpers
import onnx
import onnx_ir as ir
import pytest

import revseq
from revseq.passes import walk

FIXTURES = helpers.FIXTURES
EXPORTS = sorted(p.name for p in FIXTURES.glob("tf_*_opset*.onnx"))


def _reversals(model: onnx.ModelProto) -> list[ir.Node]:
    return [s.node for s in walk(ir.from_proto(model)) if s.node.op_type == "ReverseSequence"]


def test_the_exports_are_there():
    assert len(EXPORTS) == 9  # three models at opsets 10, 13 and 18


@pytest.mark.parametrize("target", [None, "onnxruntime", "tract", "mnn"])
@pytest.mark.parametrize("export", EXPORTS)
def test_inline_then_restore_gives_back_every_reversal(export, target):
    """Full reversals too: where the target has a step -1 Slice (onnxruntime) and where
    it has none (the default and tract with symbolic dims take reverse_all's Gather)."""
    model = onnx.load(FIXTURES / export)
    inlined = revseq.inline(model, target=target)
    assert not _reversals(inlined)
    restored = revseq.restore(inlined)
    assert len(_reversals(restored)) == len(_reversals(model))
    onnx.checker.check_model(restored, full_check=True)
    assert revseq.check(model, restored, trials=2).ok


@pytest.mark.parametrize("export", [e for e in EXPORTS if "reverse_sequence" in e])
def test_int32_lengths_restore_into_onnx_s_op_through_a_cast(export):
    """ONNX's ReverseSequence takes int64 lengths only: a decomposition that reads int32
    lengths on axes {0, 1} comes back as ONNX's op reading them cast to int64 (never as
    an ONNX node reading int32, an invalid model)."""
    restored = revseq.restore(revseq.inline(onnx.load(FIXTURES / export)))
    (node,) = _reversals(restored)
    assert node.domain == ""
    lengths = node.inputs[1]
    assert lengths.producer().op_type == "Cast" and lengths.producer().inputs[0].name == "lens"
    onnx.checker.check_model(restored, full_check=True)
