"""ncnn through pnnx: what its refusals name, read without ncnn installed."""

from __future__ import annotations

import pytest

from revseq.backends.ncnn import lacking_named

_LACKS = "run failed: RuntimeError: pnnx wrote layers ncnn lacks: "


@pytest.mark.parametrize(
    ("layers", "named"),
    [
        ("Gather, torch.lt, torch.where", {"Gather", "Less", "Where"}),
        ("GatherND, Tensor.to", {"GatherND", "Cast"}),
        ("pnnx.Expression", {"Add", "Sub", "Mul", "Div", "Neg", "Mod"}),
    ],
)
def test_a_refusal_names_the_onnx_op_types_of_the_layers_ncnn_lacks(layers, named):
    assert lacking_named(_LACKS + layers) == named


@pytest.mark.parametrize(
    "failure",
    [
        _LACKS + "Gather, torch.unheard_of",  # one unknown: it says nothing of which
        "run failed: RuntimeError: ncnn extract of output 0 failed (status -100)",
        "wrong values (got float32 [5, 4, 3]) at {'x': [5, 4, 3], 'lens': [4]}",
    ],
)
def test_a_failure_naming_no_known_layer_names_nothing(failure):
    assert lacking_named(failure) is None
