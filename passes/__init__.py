"""Passes that inline ReverseSequence into standard ops, simplify it, and fuse it back.

All are onnx-ir in-place passes: they compose with ``onnx_ir.passes.PassManager``. Each
job has its room: ``inline`` (the pass, its planning, simplify), ``restore`` (the pass,
its rules, matching, proof and fusion), and ``graph``, the tooling both read models
with. The helpers re-exported here are what the layers above (checking, ``info``) read
of a model the way the passes do: the nodes of every scope, their validation and their
shapes.
"""

from __future__ import annotations

__all__ = [
    "DECOMPOSITION_MIN_OPSET",
    "STRATEGIES",
    "Dim",
    "InlineReverseSequencePass",
    "RestoreReverseSequencePass",
    "ScopedNode",
    "ShapeTable",
    "SimplifyReverseSequencePass",
    "gather_kind",
    "gc_paused",
    "is_reverse_sequence",
    "node_label",
    "signature_of",
    "validate_all",
    "walk",
]

from revseq.passes.graph import (
    DECOMPOSITION_MIN_OPSET,
    Dim,
    ScopedNode,
    ShapeTable,
    gc_paused,
    is_reverse_sequence,
    node_label,
    signature_of,
    validate_all,
    walk,
)
from revseq.passes.inline import (
    STRATEGIES,
    InlineReverseSequencePass,
    SimplifyReverseSequencePass,
    gather_kind,
)
from revseq.passes.restore import RestoreReverseSequencePass
