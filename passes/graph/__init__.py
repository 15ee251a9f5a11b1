"""Graph tooling that inline and restore share: reading a model the way the passes do.

``scopes`` walks every node of every scope; ``reverse_sequence`` reads and validates a
ReverseSequence node; ``shapes`` (onnx's inference, the shape table) and ``producers``
(what a value's producer says) reason about dims;
``evaluate`` folds constants; ``builder`` emits a form's nodes into a graph and
``index_sharing`` keeps one copy of index arithmetic that two forms compute alike;
``names`` gives emitted nodes and values names of their own; ``fixed_shapes`` fixes
input shapes before a rewrite.
"""

from __future__ import annotations

__all__ = [
    "DECOMPOSITION_MIN_OPSET",
    "Dim",
    "FixInputShapesPass",
    "ScopedNode",
    "ShapeTable",
    "gc_paused",
    "is_reverse_sequence",
    "node_label",
    "signature_of",
    "validate_all",
    "walk",
]

from revseq.passes.graph.builder import gc_paused
from revseq.passes.graph.fixed_shapes import FixInputShapesPass
from revseq.passes.graph.reverse_sequence import (
    DECOMPOSITION_MIN_OPSET,
    is_reverse_sequence,
    node_label,
    signature_of,
    validate_all,
)
from revseq.passes.graph.scopes import ScopedNode, walk
from revseq.passes.graph.shapes import Dim, ShapeTable
