"""What is known about the dims of values: declared, inferred, and provably equal.

Models often declare their inputs' shapes and nothing in between. :class:`ShapeTable`
keeps what onnx's shape inference finds (:mod:`revseq.passes.graph.inference`) beside the
declared shapes: the user's model never receives the inferred ``value_info``.

:meth:`ShapeTable.dim_key` (and :func:`revseq.passes.graph.shape_reads.scalar_dim`) reason
about dims symbolically: two dims with equal keys are provably equal at run time. A key
is the static size (an int), a symbol name (``("sym", "T")``), or the dim of the source
it is derived from through its producers (shape-keeping ops, Transpose, broadcasts,
Expand, Unsqueeze/Squeeze, Range, Reshape, the gathers), the dim itself (``("dim",
id(value), axis)``) where nothing else names it; :meth:`ShapeTable.named_dim` says which
dims a name stands for. The passes use them for lengths that equal the time length
(tf2onnx's ``tf.reverse`` export), and to share index arithmetic between nodes whose time
and batch dims are equal.
"""

from __future__ import annotations

__all__ = ["Dim", "DimKey", "ShapeTable"]

import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

import onnx_ir as ir

from revseq.passes.graph.inference import Dim, infer_types
from revseq.passes.graph.producers import producer, structural_dim, structural_rank
from revseq.passes.graph.shape_reads import DimKey

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# Ops whose output has their first input's shape: a dim passes through them unchanged.
_SAME_SHAPE = frozenset(
    {
        "ReverseSequence", "Identity", "Cast", "CastLike", "Relu", "Neg", "Abs",
        "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Not", "Sign", "Floor", "Ceil",
        "Round", "LeakyRelu", "Elu", "Selu", "Softplus", "Softsign", "HardSigmoid",
        "Clip", "Dropout",
    }
)  # fmt: skip


class ShapeTable:
    """Inferred element types and dims by value name, consulted beside the declared ones."""

    def __init__(
        self,
        shapes: dict[str, tuple[Dim, ...]] | None = None,
        dtypes: dict[str, ir.DataType] | None = None,
        functions: frozenset[int] = frozenset(),
    ) -> None:
        self._shapes = shapes or {}
        self._dtypes = dtypes or {}
        # Function bodies have their own names, which may repeat the graph's: the
        # inferred names never apply there.
        self._functions = functions
        self._memos: dict[tuple, tuple[ir.Value, object]] = {}

    def _inferred(self, value: ir.Value, table: dict[str, _T]) -> _T | None:
        if not value.name or not table:
            return None
        graph = value.graph
        if graph is not None and id(graph) in self._functions:
            return None
        return table.get(value.name)

    @classmethod
    def infer(cls, model: ir.Model) -> ShapeTable:
        """Run onnx's shape inference with data propagation on a copy of ``model``.

        A model onnx cannot infer (an op it does not know, inconsistent shapes) gives an
        empty table: the passes then go by the declared shapes, as without inference.
        """
        found = infer_types(model)
        if found is None:
            return cls()
        shapes, dtypes = found
        functions = frozenset(id(f.graph) for f in model.functions.values())
        return cls(shapes, dtypes, functions)

    @classmethod
    def where_needed(cls, model: ir.Model, nodes: Iterable[ir.Node]) -> ShapeTable:
        """Inferred shapes when some node's data leaves a dim or its type undeclared.

        Otherwise the declared ones alone: inference serialises the whole model.
        """
        for node in nodes:
            data = node.inputs[0] if node.inputs else None
            if data is None:
                continue
            if data.dtype is None or data.shape is None or not data.shape.is_static():
                return cls.infer(model)
        return cls()

    def dims(self, value: ir.Value) -> tuple[Dim, ...] | None:
        """The value's dims: each the most specific of declared and inferred."""
        declared: tuple[Dim, ...] | None = None
        if value.shape is not None:
            declared = tuple(
                d if isinstance(d, int) else (d.value if d.value else None)
                for d in value.shape
            )
        inferred = self._inferred(value, self._shapes)
        if declared is None or (inferred is not None and len(inferred) != len(declared)):
            return inferred if inferred is not None else declared
        if inferred is None:
            return declared
        return tuple(_more_specific(a, b) for a, b in zip(declared, inferred, strict=True))

    def dtype(self, value: ir.Value) -> ir.DataType | None:
        """The value's element type, declared or inferred."""
        if value.dtype is not None:
            return value.dtype
        return self._inferred(value, self._dtypes)

    # --- Symbolic reasoning ---------------------------------------------------------

    def rank(self, value: ir.Value) -> int | None:
        """The value's rank: declared, inferred, or derived from its producer."""
        walked: list[ir.Value] = []
        while True:  # a loop, not recursion: chains of shape-keeping ops run long
            found = self._memos.get(("rank", id(value)))
            if found is not None:
                rank = found[1]
                break
            dims = self.dims(value)
            if dims is not None:
                rank = len(dims)
                break
            walked.append(value)
            node = producer(value)
            if node is None or not node.inputs or node.inputs[0] is None:
                rank = None
                break
            if node.op_type not in _SAME_SHAPE and node.op_type != "Transpose":
                rank = self._memo(
                    ("rank", id(value)), value, lambda v=value: structural_rank(v, self)
                )
                break
            value = node.inputs[0]
        for each in walked:  # every value on the way has that rank: later walks stop here
            self._memos[("rank", id(each))] = (each, rank)
        return rank  # type: ignore[return-value]

    def dim_key(self, value: ir.Value, axis: int) -> DimKey | None:
        """A key such that equal keys mean provably equal dims; None if ``axis`` is unknown.

        In order: a static size; a symbol name (from the model or from inference, not
        onnx's anonymous ``unk__`` ones); the dim it is derived from through its
        producer (same-shape and broadcasting ops, Transpose, Expand, Unsqueeze,
        Squeeze, Range, Reshape and the gathers); the anonymous symbol; the dim itself.
        """
        rank = self.rank(value)
        if rank is not None:
            if not -rank <= axis < rank:
                return None
            axis %= rank
        elif axis < 0:
            return None
        return self._walk_dim(value, axis)

    def named_dim(self, value: ir.Value, axis: int) -> DimKey | None:
        """The dim's key if a size or a symbol names it, else None.

        Reads of dims named alike may stand for one another (shared index arithmetic);
        a dim known only as itself stands for nothing else.
        """
        key = self.dim_key(value, axis)
        if isinstance(key, int) or (isinstance(key, tuple) and key[0] == "sym"):
            return key
        return None

    def _walk_dim(self, value: ir.Value, axis: int) -> DimKey:
        walked: list[tuple[ir.Value, int]] = []
        key = self._follow_dim(value, axis, walked)
        for each, each_axis in walked:  # one dim all the way: later walks stop here
            self._memos[("dim", id(each), each_axis)] = (each, key)
        return key

    def _follow_dim(
        self, value: ir.Value, axis: int, walked: list[tuple[ir.Value, int]]
    ) -> DimKey:
        anonymous: str | None = None
        while True:  # follow shape-keeping ops and Transposes back, without recursion
            found = self._memos.get(("dim", id(value), axis))
            if found is not None and found[1] is not None:
                return found[1]  # type: ignore[return-value]
            walked.append((value, axis))
            dims = self.dims(value)
            dim = dims[axis] if dims is not None and axis < len(dims) else None
            if isinstance(dim, int):
                return dim
            if isinstance(dim, str):
                if not dim.startswith("unk__"):
                    return ("sym", dim)
                anonymous = anonymous or dim
            node = producer(value)
            if node is None or not node.inputs or node.inputs[0] is None:
                break
            if node.op_type in _SAME_SHAPE:
                value = node.inputs[0]
                continue
            if node.op_type != "Transpose":
                break
            perm = node.attributes.get_ints("perm", None)
            if perm is None:
                source_rank = self.rank(node.inputs[0])
                perm = list(reversed(range(source_rank))) if source_rank is not None else None
            if not perm or axis >= len(perm):
                break
            value, axis = node.inputs[0], perm[axis]
        walked.pop()  # the structural rule memoises the last one itself
        key = self._memo(
            ("dim", id(value), axis), value, lambda: structural_dim(value, axis, self)
        )
        if key is not None:
            return key
        if anonymous is not None:
            return ("sym", anonymous)
        return ("dim", id(value), axis)

    def _memo(self, key: tuple, value: ir.Value, compute: Callable[[], _T]) -> _T:
        """Memoised per value (kept alive, so that its id is never reused meanwhile)."""
        found = self._memos.get(key)
        if found is not None:
            return found[1]
        result = compute()
        self._memos[key] = (value, result)
        return result


def _more_specific(declared: Dim, inferred: Dim) -> Dim:
    if isinstance(declared, int):
        return declared
    if isinstance(inferred, int):
        return inferred
    return declared if declared is not None else inferred
