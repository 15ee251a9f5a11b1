"""What a candidate declares of itself that the check honours: its inputs' types, its domain.

A model inlined for a ``-finite`` target (``NAME-finite``) reads its lengths as a float32
input (a float-only runtime's interface) and is exact on finite data only, which its
metadata says (``revseq.domain``): the check feeds it the reference's values in its own
types and draws its data there.
"""

from __future__ import annotations

__all__ = ["as_declared", "declared_domain", "declared_types", "fed_as_declared"]

import numpy as np
import onnx

from revseq.equivalence._runners import Inputs, Runner
from revseq.ops.vocabulary import DOMAIN_KEY


def declared_domain(proto: onnx.ModelProto) -> str | None:
    """The data ``proto`` says its decompositions are exact on, where not every value."""
    return next((p.value for p in proto.metadata_props if p.key == DOMAIN_KEY), None)


def declared_types(proto: onnx.ModelProto) -> dict[str, int]:
    """Each graph input's declared element type, by name."""
    return {i.name: i.type.tensor_type.elem_type for i in proto.graph.input}


def as_declared(feeds: Inputs, declared: dict[str, int]) -> Inputs:
    """``feeds`` in the element types ``declared`` names, where an integer input differs.

    A ``-finite`` target makes a lengths input float32 (a float-only runtime's
    interface): it is fed the reference's integer values as float32, which holds each
    exactly below 2**24 (larger lengths are beyond any time axis such a form takes).
    """
    fed = dict(feeds)
    for name, elem in declared.items():
        value = fed.get(name)
        if value is None or elem != onnx.TensorProto.FLOAT or value.dtype.kind not in "iu":
            continue
        fed[name] = np.clip(value.astype(np.int64), -(2**24), 2**24).astype(np.float32)
    return fed


def fed_as_declared(proto: onnx.ModelProto, runner: Runner) -> Runner:
    """``runner`` fed its inputs in the types ``proto`` declares (``as_declared``)."""
    declared = declared_types(proto)
    return lambda feeds: runner(as_declared(feeds, declared))
