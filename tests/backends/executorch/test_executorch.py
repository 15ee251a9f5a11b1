"""ExecuTorch (revseq.backends.executorch): a model holding ReverseSequence converts with
revseq's converter, exports with symbolic dims and runs exactly, with the XNNPACK
delegate and with the portable kernels alone, at a second shape where dims are
symbolic. Runs where executorch is installed."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_identical, model_of

import revseq
from revseq import backends
from revseq.ops.reference import reverse_sequence

pytestmark = [
    pytest.mark.backend,
    pytest.mark.skipif(
        not backends.installed("executorch"), reason="executorch is not installed"
    ),
]
ADAPTERS = ["executorch", "executorch-portable"]
DTYPES = ("float32", "int64")
# Each (rank, batch axis, type, symbolic) case once, on one adapter or the other: the
# type alternates with the parity of the rest, so that on each adapter every rank,
# layout and static or symbolic shape meets both types (an export takes a second each).
CASES = [
    (adapter, rank, batch_axis, DTYPES[(i + rank + batch_axis + symbolic) % 2], symbolic)
    for i, adapter in enumerate(ADAPTERS)
    for rank in (2, 3, 4)
    for batch_axis in (0, 1)
    for symbolic in (False, True)
]


def _dims(rank, batch_axis, batch, steps, rest=2):
    dims = [rest] * rank
    dims[batch_axis], dims[1 - batch_axis] = batch, steps
    return dims


def _check(run, dims, dtype, batch_axis, rng):
    np_type = np.dtype(dtype)
    data = (rng.standard_normal(dims) * 1000).astype(np_type)
    steps = dims[1 - batch_axis]
    lengths = rng.integers(0, steps + 1, dims[batch_axis])
    lengths[:2] = [0, steps][: len(lengths)]
    got = run({"x": data, "lens": lengths})[0]
    time_axis = 1 - batch_axis
    assert_identical(
        got, reverse_sequence(data, lengths, batch_axis=batch_axis, time_axis=time_axis)
    )


@pytest.mark.parametrize(("adapter", "rank", "batch_axis", "dtype", "symbolic"), CASES)
def test_the_op_runs_exactly(adapter, rank, batch_axis, dtype, symbolic):
    first = _dims(rank, batch_axis, 3, 5)
    declared = first
    if symbolic:
        declared = [f"d{i}" for i in range(rank)]
        declared[batch_axis], declared[1 - batch_axis] = "B", "T"
    model = model_of(declared, dtype, batch_axis, 1 - batch_axis, own_lens_dim=True)
    run = backends.get(adapter).prepare(model)
    rng = np.random.default_rng(rank)
    _check(run, first, dtype, batch_axis, rng)
    if symbolic:  # a second shape, and one of size 1, through the same program
        _check(run, _dims(rank, batch_axis, 6, 9, rest=3), dtype, batch_axis, rng)
        _check(run, _dims(rank, batch_axis, 1, 1, rest=1), dtype, batch_axis, rng)


def test_the_delegation_is_reported():
    """XNNPACK takes no gather nor index_select: the reversal stays on the portable
    kernels, and the runner says so. The export takes whole rows (index_select), not
    the element-wise gather, which those kernels run 8-13x slower (docs/torch.md)."""
    model = model_of([5, 3, 2], "float32", 1, 0)
    run = backends.get("executorch").prepare(model)
    assert run.delegation == {}
    _check(run, [5, 3, 2], "float32", 1, np.random.default_rng(0))
    ops = [op for op, _ in run.delegation["portable"]]
    assert "aten.index_select" in ops and "aten.gather" not in ops


def test_a_static_inlined_model_runs_and_a_symbolic_one_is_refused_at_convert():
    """onnx2torch's Range reads its limit in Python, which torch.export cannot trace:
    the refusal comes as the convert stage's, with the reason."""
    static = revseq.inline(model_of([5, 3, 2], "float32", 1, 0))
    run = backends.get("executorch").prepare(static)
    _check(run, [5, 3, 2], "float32", 1, np.random.default_rng(1))
    symbolic = revseq.inline(model_of(["T", "B", 2], "float32", 1, 0), target="onnx2torch")
    run = backends.get("executorch").prepare(symbolic)
    with pytest.raises(backends.BackendError) as caught:
        _check(run, [5, 3, 2], "float32", 1, np.random.default_rng(1))
    assert caught.value.stage == "convert"


def test_xnnpack_takes_the_one_hot_product_whole_exact_on_finite_data_only():
    """The one form XNNPACK takes whole (a bmm by a 0/1 matrix, the torch page's
    ``ExecuTorch one-hot``): nothing of the reversal is left to the portable kernels
    but the float32 steps and lengths."""
    import torch

    from bench import _executorch_bench
    from revseq.backends.executorch import program_runner
    from revseq.measure._cases import Case

    model = model_of([5, 3, 2], "float32", 1, 0)

    class OneHot(torch.nn.Module):
        def forward(self, x, lens):
            return _executorch_bench.one_hot(Case((5, 3, 2), 1, 0, "float32"))(x, lens)

    run = program_runner(OneHot(), model)
    _check(run, [5, 3, 2], "float32", 1, np.random.default_rng(0))
    taken = [op for op, _ in run.delegation["XnnpackBackend"]]
    left = [op for op, _ in run.delegation["portable"]]
    assert "aten.bmm" in taken and "aten.abs" in taken
    assert not {"aten.bmm", "aten.gather", "aten.index_select"} & set(left)
    data = np.zeros([5, 3, 2], np.float32)
    data[1, 0, 0] = -0.0
    lengths = np.array([2, 2, 2])
    got = run({"x": data, "lens": lengths})[0]
    assert got.tobytes() != reverse_sequence(data, lengths).tobytes()  # -0.0 came back +0.0
