"""A call's path stays short: ``revseq.inline`` and ``revseq.check`` each run code in
fewer than 20 of revseq's modules on a bundled model (``python -m bench.reader_path``
lists them; docs/architecture.md)."""

from __future__ import annotations

import helpers
import onnx
import pytest

import revseq
from bench.reader_path import modules_run

MOST = 19


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return onnx.load(helpers.ROOT / "models" / "bidirectional_rnn.onnx")


def test_inline_runs_code_in_fewer_than_20_modules(model):
    revseq.inline(model)  # imports and caches filled, as a warm call finds them
    modules, _ = modules_run(lambda: revseq.inline(model))
    assert "revseq.passes.inline.inline" in modules
    assert len(modules) <= MOST, modules


def test_check_runs_code_in_fewer_than_20_modules(model):
    inlined = revseq.inline(model)
    revseq.check(model, inlined, trials=1)
    modules, _ = modules_run(lambda: revseq.check(model, inlined, trials=1))
    assert "revseq.equivalence._check" in modules
    assert len(modules) <= MOST, modules


def test_the_count_sees_every_module_a_call_enters():
    """The measure itself: a call into two modules counts both, in the order entered."""
    from revseq.ops import vocabulary
    from revseq.passes.graph import scopes

    modules, reentries = modules_run(
        lambda: (vocabulary.dtype_name(None), scopes.run_time_inputs(_empty_graph()))
    )
    assert modules == ["revseq.ops.vocabulary", "revseq.passes.graph.scopes"]
    assert reentries == 0


def _empty_graph():
    import onnx_ir as ir

    return ir.Graph([], [], nodes=[])
