"""Recognise a ReverseSequence decomposition ending at a gather, by evaluating it.

A candidate is a value ``Y`` computed by a gather (GatherElements, GatherND or Gather),
possibly through views of the data before it and of its result after it (the row
form's reshapes, the matrix form's squeeze and transposes). Its *backward slice* is
every node ``Y`` depends on, stopping at run-time values. The candidate is a
ReverseSequence when:

1. the slice reads exactly two run-time values: the data ``X`` (only through ``Shape``,
   ``Size`` and the views that feed the gather, so the index never depends on the data)
   and one 1-D integer vector ``L``; everything else is a constant;
2. every op in the slice is one the evaluator models (shape, index and gather ops);
3. evaluated on probe inputs, ``Y`` equals ``reverse_sequence(X, L)`` for a
   (batch_axis, time_axis) pair: ``X`` holds distinct ids, symbolic dims take two
   sizes, and the lengths run over 0, 1, the full length, a ramp and random values.

Condition 3 is where off-by-one index arithmetic (``len - t``), ``<=`` for ``<``, a range
starting at 1, a gather on the wrong axis or lengths broadcast on the wrong axis all fail:
their outputs differ from the reversal, and the reason names the first probe that shows
it. The verdict for a slice is cached by its structure, so a model with thousands of
identical decompositions is probed once.
"""

from __future__ import annotations

__all__ = ["Match", "NoMatch", "Matcher", "GATHER_OPS"]

import dataclasses
import hashlib
import itertools
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from revseq.ops.reference import reverse_sequence
from revseq.passes._evaluate import SUPPORTED_OPS, UnsupportedOp, evaluate_node
from revseq.passes._shape_reads import scalar_dim, shape_dim_read
from revseq.passes._shapes import ShapeTable

GATHER_OPS = frozenset({"GatherElements", "GatherND", "Gather"})
_SHAPE_READERS = frozenset({"Shape", "Size"})
_LENGTH_TYPES = (ir.DataType.INT64, ir.DataType.INT32)


@dataclasses.dataclass(frozen=True)
class Match:
    """A proven decomposition: ``output == ReverseSequence(data, lengths)``."""

    output: ir.Value
    data: ir.Value
    lengths: ir.Value
    batch_axis: int
    time_axis: int
    nodes: tuple[ir.Node, ...]


@dataclasses.dataclass(frozen=True)
class NoMatch:
    """Why a candidate is not (provably) a ReverseSequence."""

    reason: str
    subject: ir.Value | ir.Node | None = None


@dataclasses.dataclass(frozen=True)
class _Verdict:
    axes: tuple[int, int] | None
    reason: str


# Views a form puts between the data and its gather (a row view, a matrix without its
# trailing size-1 axes, a time-major matrix transposed) and after it (their inverses).
_DATA_VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Transpose"})
_OUTPUT_VIEWS = frozenset({"Reshape", "Unsqueeze", "Transpose"})
_MAX_VIEWS = 2


def _data_sources(gather: ir.Node) -> list[ir.Value]:
    """The tensors a gather may read the data as, farthest first.

    The gather's input, and the inputs of up to two views above it (``_DATA_VIEWS``):
    the row form reads a ``[rows, rest]`` view, the matrix form a squeezed and possibly
    transposed one. The proof decides which reading holds.
    """
    value = gather.inputs[0] if gather.inputs else None
    if value is None:
        return []
    found = [value]
    while len(found) <= _MAX_VIEWS:
        node = found[-1].producer()
        if (
            node is None
            or node.domain not in ("", "ai.onnx")
            or node.op_type not in _DATA_VIEWS
            or not node.inputs
            or node.inputs[0] is None
        ):
            break
        found.append(node.inputs[0])
    return found[::-1]


def _may_be_data(value: ir.Value) -> bool:
    """Whether a gather's source may be run-time data: not a constant nor a shape."""
    producer = value.producer()
    return value.const_value is None and (
        producer is None or producer.op_type not in _SHAPE_READERS
    )


def _slice_of(
    output: ir.Value, data: ir.Value, stop: ir.Value | None = None
) -> tuple[list[ir.Node], list[ir.Value]] | NoMatch:
    """The nodes ``output`` depends on (topological order) and its run-time leaves.

    ``stop``, if given, is a leaf too: the value taken as the lengths.
    """
    order: list[ir.Node] = []
    leaves: list[ir.Value] = []
    seen_nodes: set[int] = set()
    seen_values: set[int] = set()
    stack: list[tuple[ir.Value, bool]] = [(output, False)]
    while stack:
        value, expanded = stack.pop()
        node = value.producer()
        if expanded:
            assert node is not None
            if id(node) not in seen_nodes:
                seen_nodes.add(id(node))
                order.append(node)
            continue
        if id(value) in seen_values:
            continue
        seen_values.add(id(value))
        if value is data or value is stop or value.const_value is not None or node is None:
            if value.const_value is None:
                leaves.append(value)
            continue
        if node.domain not in ("", "ai.onnx") or node.op_type not in SUPPORTED_OPS:
            leaves.append(value)
            continue
        stack.append((value, True))
        for source in node.inputs:
            if source is not None:
                stack.append((source, False))
    return order, leaves


def _check_data_use(nodes: Sequence[ir.Node], data: ir.Value, gather: ir.Node) -> str | None:
    """The data may only feed Shape/Size and the views (``_data_sources``) into the gather."""
    sources = _data_sources(gather)
    after = next((i + 1 for i, v in enumerate(sources) if v is data), len(sources))
    allowed = {id(gather)} | {id(v.producer()) for v in sources[after:]}
    in_slice = {id(n) for n in nodes}
    for user, index in data.uses():
        if id(user) not in in_slice:
            continue
        if user.op_type in _SHAPE_READERS:
            continue
        if id(user) in allowed and index == 0:
            continue
        return f"the index depends on the data's values (through {user.op_type})"
    return None


def _read_by_shapes_only(value: ir.Value, nodes: Sequence[ir.Node]) -> bool:
    """Whether the slice reads ``value`` through Shape/Size alone."""
    in_slice = {id(n) for n in nodes}
    return all(
        user.op_type in _SHAPE_READERS for user, _ in value.uses() if id(user) in in_slice
    )


def _lengths_from_shapes(nodes: Sequence[ir.Node]) -> list[ir.Value]:
    """Values in the slice that hold one dim in every element: candidate lengths.

    Lengths built from a shape (``Expand(Gather(Shape(x), k), ...)``, as tf2onnx exports
    ``tf.reverse``) are such a value. Broadcasts (Expand, Tile) come first, latest first:
    the decomposition's own dims (a Squeeze for Range) are such values too, and are
    tried after them.
    """
    table = ShapeTable()
    found = [
        value
        for node in reversed(nodes)
        if node.op_type not in _SHAPE_READERS and node.op_type != "Constant"
        for value in node.outputs
        if ir.convenience.get_const_tensor(value) is None
        and scalar_dim(value, table) is not None
    ]
    return sorted(found, key=lambda v: v.producer().op_type not in ("Expand", "Tile"))  # type: ignore[union-attr]


_TensorKeys = dict[int, tuple[ir.TensorProtocol, bytes]]
_DECLARED = ShapeTable()
DimReads = dict[int, int]
"""Shape nodes (by id) that read another tensor's dim equal to a data axis: that axis."""


def _tensor_key(tensor: ir.TensorProtocol, cache: _TensorKeys) -> bytes:
    """Content key of a tensor; tensors shared between nodes are hashed once.

    The cache holds the tensor too, so its id cannot be reused while the cache lives.
    """
    entry = cache.get(id(tensor))
    if entry is None:
        array = tensor.numpy()
        digest = hashlib.sha1(f"{array.dtype}{array.shape}".encode() + array.tobytes())
        entry = cache[id(tensor)] = (tensor, digest.digest())
    return entry[1]


def _fingerprint(
    nodes: Sequence[ir.Node],
    data: ir.Value,
    lengths: ir.Value,
    output: ir.Value,
    tensor_keys: _TensorKeys,
    *,
    dims: list[int | str] | None,
) -> str:
    """A key that is equal for structurally identical slices on same-shaped data."""
    ids: dict[int, bytes] = {id(data): b"X", id(lengths): b"L"}
    digest = hashlib.sha1(repr((tuple(dims or ()), lengths.dtype)).encode())
    for i, node in enumerate(nodes):
        digest.update(node.op_type.encode())
        for value in node.inputs:
            if value is None:
                digest.update(b"-")
            elif id(value) in ids:
                digest.update(ids[id(value)])
            elif value.const_value is not None:
                digest.update(_tensor_key(value.const_value, tensor_keys))
            else:
                digest.update(b"?")
        for name, attr in sorted(node.attributes.items()):
            digest.update(name.encode())
            if not isinstance(attr, ir.Attr):
                digest.update(repr(attr).encode())
            elif attr.type == ir.AttributeType.TENSOR:
                digest.update(_tensor_key(attr.value, tensor_keys))
            else:
                digest.update(repr(attr.value).encode())
        for j, out in enumerate(node.outputs):
            ids[id(out)] = f"n{i}.{j}".encode()
        digest.update(b"|")
    digest.update(ids.get(id(output), b""))
    return digest.hexdigest()


def _dims(value: ir.Value, shapes: ShapeTable) -> list[int | str] | None:
    """The data's dims, symbols renamed in order of appearance (``s0``, ``s1``, ...).

    Only which dims are equal matters to the probes; the names would make identical
    slices on differently named dims miss the verdict cache.
    """
    dims = shapes.dims(value)
    if dims is None:
        return None
    names: dict[str, str] = {}
    canonical: list[int | str] = []
    for i, dim in enumerate(dims):
        if isinstance(dim, int):
            canonical.append(dim)
        else:
            canonical.append(names.setdefault(dim or f"?{i}", f"s{len(names)}"))
    return canonical


def _probe_shapes(dims: list[int | str]) -> list[tuple[int, ...]]:
    """Concrete shapes: static dims kept, each symbol a distinct size in two patterns."""
    symbols = sorted({d for d in dims if isinstance(d, str)})
    if not symbols:
        return [tuple(int(d) for d in dims)]
    shapes = []
    for sizes in ((2, 3, 4, 5, 6, 7), (5, 4, 3, 2, 6, 7)):
        chosen = {s: sizes[i % len(sizes)] + i // len(sizes) for i, s in enumerate(symbols)}
        shapes.append(tuple(d if isinstance(d, int) else chosen[d] for d in dims))
    return shapes


# Up to these sizes every length value is tried at every batch position.
EXHAUSTIVE_TIME = 64
EXHAUSTIVE_BATCH = 256


def _probe_lengths(rng: np.random.Generator, batch: int, time: int) -> list[np.ndarray]:
    """Length vectors to test a candidate on, valid ones only (ONNX defines no others).

    Up to ``EXHAUSTIVE_TIME`` steps and ``EXHAUSTIVE_BATCH`` batch entries: one vector
    per length value 0 .. T (every value at every batch position) and mixed vectors
    (ramps both ways, two random); larger shapes get the mixed vectors and the
    constant vectors 0, 1 and T only.
    """
    if time <= EXHAUSTIVE_TIME and batch <= EXHAUSTIVE_BATCH:
        constant = [np.full(batch, value) for value in range(time + 1)]
    else:
        constant = [np.full(batch, time), np.zeros(batch), np.ones(batch)]
    ramp = np.arange(batch) % (time + 1)
    vectors = [
        *constant,
        ramp,
        time - ramp,
        rng.integers(0, time, batch, endpoint=True),
        rng.integers(0, time, batch, endpoint=True),
    ]
    return [v.astype(np.int64) for v in vectors]


def _evaluate(
    nodes: Sequence[ir.Node],
    *,
    data: ir.Value,
    x: np.ndarray,
    lengths: ir.Value,
    lens: np.ndarray,
    output: ir.Value,
    dim_reads: DimReads,
) -> np.ndarray:
    values: dict[int, np.ndarray] = {id(data): x, id(lengths): lens}
    for node in nodes:
        axis = dim_reads.get(id(node))
        if axis is not None:  # a read of another tensor's dim, equal to this one
            values[id(node.outputs[0])] = np.array([x.shape[axis]], np.int64)
            continue
        args: list[np.ndarray | None] = []
        for value in node.inputs:
            if value is None:
                args.append(None)
            elif id(value) in values:
                args.append(values[id(value)])
            elif value.const_value is not None:
                args.append(value.const_value.numpy())
            else:
                raise UnsupportedOp(f"value {value.name!r} has no probe")
        values[id(node.outputs[0])] = evaluate_node(node, args)
    return values[id(output)]


def _axis_pairs(rank: int) -> list[tuple[int, int]]:
    pairs = [(1, 0), (0, 1)]
    pairs += [p for p in itertools.permutations(range(rank), 2) if p not in pairs]
    return pairs


def _surviving_axes(
    nodes: Sequence[ir.Node],
    data: ir.Value,
    lengths: ir.Value,
    output: ir.Value,
    dims: list[int | str],
    *,
    dim_reads: DimReads,
) -> tuple[set[tuple[int, int]], str]:
    """The axis pairs under which the slice equals ReverseSequence on every probe."""
    rng = np.random.default_rng(0)
    rank = len(dims)
    lens_type = (lengths.dtype or ir.DataType.INT64).numpy()
    surviving = set(_axis_pairs(rank))
    first_failure = ""
    for shape in _probe_shapes(dims):
        x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        for batch_axis, time_axis in sorted(surviving):
            batch, time = shape[batch_axis], shape[time_axis]
            for lens in _probe_lengths(rng, batch, time):
                try:
                    got = _evaluate(
                        nodes,
                        data=data,
                        x=x,
                        lengths=lengths,
                        lens=lens.astype(lens_type),
                        output=output,
                        dim_reads=dim_reads,
                    )
                except UnsupportedOp as e:
                    surviving.discard((batch_axis, time_axis))
                    first_failure = first_failure or (
                        f"cannot evaluate it on a probe of shape {list(shape)} with lengths "
                        f"{lens.tolist()}: {e}"
                    )
                    break
                expected = reverse_sequence(
                    x, lens, batch_axis=batch_axis, time_axis=time_axis
                )
                if got.shape != expected.shape or not np.array_equal(got, expected):
                    surviving.discard((batch_axis, time_axis))
                    first_failure = first_failure or (
                        f"differs from ReverseSequence on a probe of shape {list(shape)} "
                        f"with lengths {lens.tolist()}"
                    )
                    break
    return surviving, first_failure


# With the data's rank unknown, a decomposition must hold at every one of these ranks.
_UNKNOWN_RANKS = (2, 3, 4, 5)


def _verdict(
    nodes: Sequence[ir.Node],
    data: ir.Value,
    lengths: ir.Value,
    output: ir.Value,
    dims: list[int | str] | None,
    *,
    dim_reads: DimReads,
) -> _Verdict:
    if dims is not None:
        if len(dims) < 2:
            return _Verdict(None, f"the data has rank {len(dims)}; ReverseSequence needs >= 2")
        surviving, failure = _surviving_axes(
            nodes, data, lengths, output, dims, dim_reads=dim_reads
        )
        rank = len(dims)
    else:
        # Rank-generic decompositions (inside functions, or after a Reshape to a
        # computed shape) must hold for every rank the axes allow.
        surviving = set(_axis_pairs(max(_UNKNOWN_RANKS)))
        failure = ""
        for rank in _UNKNOWN_RANKS:
            symbols = [f"d{i}" for i in range(rank)]
            here, reason = _surviving_axes(
                nodes, data, lengths, output, symbols, dim_reads=dim_reads
            )
            failure = failure or reason
            surviving = {p for p in surviving if max(p) >= rank or p in here}
        rank = max(_UNKNOWN_RANKS)
    if not surviving:
        return _Verdict(None, failure or "no axes fit")
    # Only degenerate shapes (a size-1 time axis) leave several readings; prefer the
    # ONNX layouts, in the spec's default order.
    ordered = [p for p in _axis_pairs(rank) if p in surviving]
    return _Verdict(ordered[0], "")


class Matcher:
    """Recognises decompositions; one instance caches verdicts across a model."""

    def __init__(self, model: ir.Model | None = None) -> None:
        self._verdicts: dict[str, _Verdict] = {}
        self._tensor_keys: _TensorKeys = {}
        self._model = model
        self._inferred: dict[int, ShapeTable] = {}

    def _shapes_for(self, data: ir.Value) -> ShapeTable:
        """Declared shapes, or, for data declaring none, what inference finds (once).

        Without a model (onnxscript's rewriter hands rules nodes, not models), the
        graph holding the data is inferred on its own.
        """
        if data.shape is not None:
            return _DECLARED
        return self._inferred_table(data)

    def _inferred_table(self, data: ir.Value) -> ShapeTable:
        graph = self._model.graph if self._model is not None else data.graph
        if graph is None:
            return _DECLARED
        table = self._inferred.get(id(graph))
        if table is None:
            model = self._model if self._model is not None else ir.Model(graph, ir_version=10)
            table = self._inferred[id(graph)] = ShapeTable.infer(model)
        return table

    def candidates(self, gather: ir.Node) -> list[ir.Value]:
        """Values to test for a gather, farthest first: its output and up to two views.

        A view is taken in only where it is the single use of a value that is not a graph
        output: the row form's Reshape back, the matrix form's Transpose and Unsqueeze.
        """
        found = [gather.outputs[0]]
        while len(found) <= _MAX_VIEWS:
            value = found[-1]
            if value.is_graph_output() or len(value.uses()) != 1:
                break
            user = next(iter(value.uses())).node
            if user.op_type not in _OUTPUT_VIEWS or user.domain not in ("", "ai.onnx"):
                break
            found.append(user.outputs[0])
        return found[::-1]

    def match(self, gather: ir.Node) -> Match | NoMatch:
        """Prove that the gather (or a view of its result) is a ReverseSequence.

        Readings of the data and of the result are tried with the most views taken in
        first, so a decomposition fuses whole where it can.
        """
        if gather.op_type not in GATHER_OPS or gather.domain not in ("", "ai.onnx"):
            return NoMatch("not a gather", gather)
        sources = [data for data in _data_sources(gather) if _may_be_data(data)]
        if not sources:
            return NoMatch("the gather reads a shape or a constant, not data", gather)
        outputs = self.candidates(gather)
        pairs = sorted(
            itertools.product(enumerate(sources), enumerate(outputs)),
            key=lambda p: (p[0][0] + p[1][0], p[0][0]),
        )
        reasons = []
        for (_, data), (_, output) in pairs:
            result = self._match_output(output, data, gather)
            if isinstance(result, Match):
                return result
            reasons.append(result.reason)
        return NoMatch(reasons[-1], gather)

    def _match_output(
        self, output: ir.Value, data: ir.Value, gather: ir.Node
    ) -> Match | NoMatch:
        found = _slice_of(output, data)
        if isinstance(found, NoMatch):
            return found
        nodes, leaves = found
        if data not in leaves:
            return NoMatch("the data is not read by the gather", output)
        others = [v for v in leaves if v is not data]
        if all(_read_by_shapes_only(v, nodes) for v in others):
            # No run-time lengths: the lengths are computed from shapes (tf.reverse).
            result: Match | NoMatch = NoMatch("no lengths value", output)
            for lengths in _lengths_from_shapes(nodes):
                result = self._match_with_lengths(output, data, gather, lengths)
                if isinstance(result, Match):
                    return result
            return result
        return self._judge(output, data, gather, nodes, others)

    def _match_with_lengths(
        self, output: ir.Value, data: ir.Value, gather: ir.Node, lengths: ir.Value
    ) -> Match | NoMatch:
        found = _slice_of(output, data, stop=lengths)
        if isinstance(found, NoMatch):
            return found
        nodes, leaves = found
        return self._judge(output, data, gather, nodes, [v for v in leaves if v is not data])

    def _dim_reads(
        self, data: ir.Value, nodes: list[ir.Node], others: list[ir.Value]
    ) -> tuple[DimReads, list[ir.Value]]:
        """Reads of other tensors' dims provably equal to a data dim, and what is left.

        Decompositions that share index arithmetic (``revseq.passes._share``) read the
        time and batch dims of the first node's data; they are evaluated as reads of
        this data's dims, where both dims have the same name (``ShapeTable.named_dim``).
        """
        in_slice = {id(n) for n in nodes}
        reads: DimReads = {}
        left = []
        axes: dict[object, int] | None = None  # data's named dims; inferred when needed
        for value in others:
            found: DimReads = {}
            for user, _ in value.uses():
                if id(user) not in in_slice:
                    continue
                read = shape_dim_read(user)
                if read is None:
                    break
                if axes is None:
                    table = self._inferred_table(data)
                    axes = {
                        table.named_dim(data, axis): axis
                        for axis in range(table.rank(data) or 0)
                    }
                    axes.pop(None, None)
                key = table.named_dim(value, read[1])
                if key is None or key not in axes:
                    break
                found[id(user)] = axes[key]
            else:
                reads.update(found)
                continue
            left.append(value)
        return reads, left

    def _judge(
        self,
        output: ir.Value,
        data: ir.Value,
        gather: ir.Node,
        nodes: list[ir.Node],
        others: list[ir.Value],
    ) -> Match | NoMatch:
        dim_reads, others = self._dim_reads(data, nodes, others)
        if len(others) != 1:
            names = ", ".join(repr(v.name) for v in others) or "none"
            return NoMatch(
                f"the index must depend on exactly one run-time lengths value, found {names}",
                output,
            )
        lengths = others[0]
        if lengths.dtype is not None and lengths.dtype not in _LENGTH_TYPES:
            return NoMatch(f"the lengths {lengths.name!r} are not int32/int64", lengths)
        if lengths.shape is not None and len(lengths.shape) != 1:
            return NoMatch(f"the lengths {lengths.name!r} are not 1-D", lengths)
        problem = _check_data_use(nodes, data, gather)
        if problem is not None:
            return NoMatch(problem, output)
        dims = _dims(data, self._shapes_for(data))
        key = _fingerprint(nodes, data, lengths, output, self._tensor_keys, dims=dims)
        if dim_reads:
            key += repr(
                sorted((nodes.index(n), dim_reads[id(n)]) for n in nodes if id(n) in dim_reads)
            )
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = _verdict(nodes, data, lengths, output, dims, dim_reads=dim_reads)
            self._verdicts[key] = verdict
        if verdict.axes is None:
            return NoMatch(verdict.reason, output)
        batch_axis, time_axis = verdict.axes
        return Match(output, data, lengths, batch_axis, time_axis, tuple(nodes))
