"""What is known about the dims of values: declared, inferred, and provably equal.

Models often declare their inputs' shapes and nothing in between. :class:`ShapeTable`
keeps what onnx's shape inference finds (:func:`infer_types`) beside the declared shapes:
the user's model never receives the inferred ``value_info``.

Inference runs with data propagation on a serialised copy, in the main graph and every
If/Loop/Scan body (model-local functions are generic, onnx infers nothing in them).
Where every graph input has fixed sizes and that leaves a dim unknown (a Reshape to a
shape computed by Shape, Gather, Concat and Cast, as tf2onnx writes Tensordot), a second
copy has its constants folded by onnxscript's optimizer first, as onnxsim's
``--overwrite-input-shape`` does: the computed shapes become constants there.

:meth:`ShapeTable.dim_key` (and :func:`revseq.passes.graph.producers.scalar_dim`) reason
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

__all__ = [
    "Dim",
    "DimKey",
    "infer_types",
    "ShapeTable",
]

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import onnx
import onnx.shape_inference
import onnx_ir as ir
from onnxscript import optimizer

from revseq.passes.graph.producers import DimKey, producer, structural_dim, structural_rank
from revseq.passes.graph.scopes import run_time_inputs, walk

logger = logging.getLogger(__name__)

# --- onnx's shape inference on a copy of the model, weights left out --------------------
Dim = int | str | None
"""One dim as inference knows it: static size, symbol name, or unknown."""


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _graphs(sub)


# In-memory initializers larger than this are serialised for inference as references to
# external data that is never read: inference needs their types and dims, not their
# bytes, and copying a model's weights would double its memory for the moment.
_MAX_COPIED_BYTES = 1 << 16


@contextlib.contextmanager
def _weights_left_out(model: ir.Model) -> Iterator[None]:
    """Stand large in-memory initializers in by unread external references meanwhile."""
    swapped: list[tuple[ir.Value, ir.TensorProtocol]] = []
    graphs = {id(model.graph): model.graph}
    for scoped in walk(model):  # every graph that holds a node, subgraphs included
        if scoped.node.graph is not None:
            graphs.setdefault(id(scoped.node.graph), scoped.node.graph)
    try:
        for graph in graphs.values():
            for value in graph.initializers.values():
                tensor = value.const_value
                if tensor is None or isinstance(tensor, ir.ExternalTensor):
                    continue
                if tensor.nbytes <= _MAX_COPIED_BYTES:
                    continue
                swapped.append((value, tensor))
                value.const_value = ir.ExternalTensor(
                    "revseq-shape-inference-only",
                    0,
                    tensor.nbytes,
                    tensor.dtype,
                    shape=tensor.shape,
                    name=tensor.name or value.name or "",
                )
        yield
    finally:
        for value, tensor in swapped:
            value.const_value = tensor


def _dims_of(info: onnx.ValueInfoProto) -> tuple[ir.DataType | None, tuple[Dim, ...] | None]:
    if not info.type.HasField("tensor_type"):
        return None, None
    tensor = info.type.tensor_type
    dtype = ir.DataType(tensor.elem_type) if tensor.elem_type else None
    if not tensor.HasField("shape"):
        return dtype, None
    dims: list[Dim] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param") and dim.dim_param:
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return dtype, tuple(dims)


def infer_types(
    model: ir.Model,
) -> tuple[dict[str, tuple[Dim, ...]], dict[str, ir.DataType]] | None:
    """Dims and element types by value name, as onnx infers them; None where it cannot.

    A model onnx cannot infer (an op it does not know, inconsistent shapes) gives None:
    the passes then go by the declared shapes, as without inference.
    """
    try:
        with _weights_left_out(model):
            proto = ir.to_proto(model)
        found = _types_of(_inferred(proto))
    except Exception as e:  # onnx raises several kinds; any means "no inference"
        logger.info("shape inference failed, using declared shapes: %s", e)
        return None
    if _inputs_fixed(model) and not _all_static(found[0]):
        try:
            folded = _types_of(_inferred(_folded(proto)))
        except Exception as e:  # the folding or its inference: keep what onnx found
            logger.info("shape inference after folding failed: %s", e)
        else:  # the folded copy's dims where they say more: static, or known at all
            shapes, dtypes = found
            for name, dims in folded[0].items():
                if name not in shapes or (_static(dims) and not _static(shapes[name])):
                    shapes[name] = dims
            for name, dtype in folded[1].items():
                dtypes.setdefault(name, dtype)
    return found


def _inferred(proto: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.shape_inference.infer_shapes(
        proto, check_type=False, strict_mode=False, data_prop=True
    )


def _folded(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose constant computations (shapes of fixed-size values) are folded."""
    copy = ir.from_proto(proto)
    optimizer.fold_constants(copy, onnx_shape_inference=True)
    return ir.to_proto(copy)


def _types_of(
    inferred: onnx.ModelProto,
) -> tuple[dict[str, tuple[Dim, ...]], dict[str, ir.DataType]]:
    shapes: dict[str, tuple[Dim, ...]] = {}
    dtypes: dict[str, ir.DataType] = {}
    for graph in _graphs(inferred.graph):
        for info in (*graph.input, *graph.value_info, *graph.output):
            dtype, dims = _dims_of(info)
            if dtype is not None:
                dtypes[info.name] = dtype
            if dims is not None:
                shapes[info.name] = dims
    return shapes, dtypes


def _static(dims: tuple[Dim, ...]) -> bool:
    return all(isinstance(d, int) for d in dims)


def _inputs_fixed(model: ir.Model) -> bool:
    inputs = run_time_inputs(model.graph)
    return bool(inputs) and all(v.shape is not None and v.shape.is_static() for v in inputs)


def _all_static(shapes: dict[str, tuple[Dim, ...]]) -> bool:
    return all(_static(dims) for dims in shapes.values())


# --- The shape table ---------------------------------------------------------------------
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
