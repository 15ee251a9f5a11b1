"""Passes that inline ReverseSequence into standard ops, simplify it, and fuse it back.

All are onnx-ir in-place passes: they compose with ``onnx_ir.passes.PassManager``. The
helpers below are what the layer above (checking, ``info``) reads of a model the way the
passes do: the nodes of every scope, their validation and their shapes.
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
    "walk",
]

from revseq.passes._builder import gc_paused
from revseq.passes._emitted import gather_kind
from revseq.passes._inference import Dim
from revseq.passes._node import (
    DECOMPOSITION_MIN_OPSET,
    is_reverse_sequence,
    node_label,
    signature_of,
)
from revseq.passes._planner import STRATEGIES
from revseq.passes._scopes import ScopedNode, walk
from revseq.passes._shapes import ShapeTable
from revseq.passes.inline import InlineReverseSequencePass
from revseq.passes.restore import RestoreReverseSequencePass
from revseq.passes.simplify import SimplifyReverseSequencePass
