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

Where the slice reads no run-time lengths, they are computed from shapes (tf2onnx's
``tf.reverse``) or constant (``revseq.inline`` of constant lengths): with static dims the
lengths are read back from the constant index by one evaluation on distinct ids, with a
symbolic dim a 1-D integer constant the slice reads stands for ``L`` (``_match_constant``).
"""

from __future__ import annotations

__all__ = ["Matcher"]

import itertools

import numpy as np
import onnx_ir as ir

from revseq.ops.vocabulary import ONNX_DOMAINS
from revseq.passes.graph.producers import shape_dim_read
from revseq.passes.graph.shapes import ShapeTable
from revseq.passes.restore.backward_slice import (
    GATHER_OPS,
    LENGTH_TYPES,
    MAX_VIEWS,
    OUTPUT_VIEWS,
    check_data_use,
    constant_lengths,
    data_sources,
    lengths_from_shapes,
    may_be_data,
    read_by_shapes_only,
    shape_reads_only,
    slice_of,
)
from revseq.passes.restore.full_reversals import match_slice, reversal_match
from revseq.passes.restore.fusion import (
    Match,
    NoMatch,
    can_be,
    shaped_as,
    through_carrier,
    with_onnx_lengths,
)
from revseq.passes.restore.proof import (
    DECLARED,
    DimReads,
    TensorKeys,
    Verdict,
    dims_of,
    fingerprint,
    prove,
    read_back_lengths,
    tensor_key,
)


class Matcher:
    """Recognises decompositions; one instance caches verdicts across a model."""

    def __init__(self, model: ir.Model | None = None) -> None:
        self._verdicts: dict[str, Verdict] = {}
        self._read_back: dict[str, tuple[tuple[int, int], np.ndarray] | str] = {}
        self._tensor_keys: TensorKeys = {}
        self._model = model
        self._inferred: dict[int, ShapeTable] = {}

    def _shapes_for(self, data: ir.Value) -> ShapeTable:
        """Declared shapes, or, for data declaring none, what inference finds (once).

        Without a model (onnxscript's rewriter hands rules nodes, not models), the
        graph holding the data is inferred on its own.
        """
        if data.shape is not None:
            return DECLARED
        return self._inferred_table(data)

    def _inferred_table(self, data: ir.Value) -> ShapeTable:
        graph = self._model.graph if self._model is not None else data.graph
        if graph is None:
            return DECLARED
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
        while len(found) <= MAX_VIEWS:
            value = found[-1]
            if value.is_graph_output() or len(value.uses()) != 1:
                break
            user = next(iter(value.uses())).node
            if user.op_type not in OUTPUT_VIEWS or user.domain not in ONNX_DOMAINS:
                break
            found.append(user.outputs[0])
        return found[::-1]

    def match(self, gather: ir.Node) -> Match | NoMatch:
        """Prove that the gather (or a view of its result) is a ReverseSequence.

        Readings of the data and of the result are tried with the most views taken in
        first, so a decomposition fuses whole where it can.
        """
        if gather.op_type not in GATHER_OPS or gather.domain not in ONNX_DOMAINS:
            return NoMatch("not a gather", gather)
        sources = [data for data in data_sources(gather) if may_be_data(data)]
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
                return with_onnx_lengths(through_carrier(result))
            reasons.append(result.reason)
        return NoMatch(reasons[-1], gather)

    def _match_output(
        self, output: ir.Value, data: ir.Value, gather: ir.Node
    ) -> Match | NoMatch:
        found = slice_of(output, data)
        if isinstance(found, NoMatch):
            return found
        nodes, leaves = found
        shape_only = shape_reads_only(nodes, data)
        if shape_only:  # another tensor's dims, read in the graph: stop at that tensor
            nodes, leaves = slice_of(output, data, stops=shape_only)
        if data not in leaves:
            return NoMatch("the data is not read by the gather", output)
        others = [v for v in leaves if v is not data]
        if all(read_by_shapes_only(v, nodes) for v in others):
            # No run-time lengths: the lengths are computed from shapes (tf.reverse), or
            # folded into a constant index, or the node reversed everything (a flip).
            result = self._match_any(output, data, gather, lengths_from_shapes(nodes))
            if isinstance(result, Match):
                return result
            if not others:
                result = self._match_constant(output, data, gather, nodes)
                if isinstance(result, Match):
                    return result
            flip = self._match_flip(output, data, gather, nodes, others)
            return flip if isinstance(flip, Match) else result
        return self._judge(output, data, gather, nodes, others)

    def _match_flip(
        self,
        output: ir.Value,
        data: ir.Value,
        gather: ir.Node,
        nodes: list[ir.Node],
        others: list[ir.Value],
    ) -> Match | NoMatch:
        """``reverse_all``'s gather (``restore.full_reversals``), as a full reversal.

        Its index may read the dims of another node's data where they provably equal
        this data's (an index shared between two reversals).
        """
        dim_reads, left = self._dim_reads(data, nodes, others)
        if left:
            return NoMatch(f"the index reads {left[0].name!r}, not only the data", output)
        problem = check_data_use(nodes, data, gather)
        if problem is not None:
            return NoMatch(problem, output)
        dims = self.dims(data)
        return reversal_match(output, data, nodes, dims, gather, dim_reads=dim_reads)

    def dims(self, data: ir.Value) -> list[int | str] | None:
        """The data's dims as the proofs read them (declared, else inferred)."""
        shaped = shaped_as(data)
        return dims_of(shaped, self._shapes_for(shaped))

    def match_slice(self, node: ir.Node) -> Match | NoMatch:
        """A step -1 Slice inline wrote for a full reversal (``restore.full_reversals``)."""
        data = node.inputs[0] if node.inputs else None
        return match_slice(node, None if data is None else self.dims(data))

    def _match_constant(
        self, output: ir.Value, data: ir.Value, gather: ir.Node, nodes: list[ir.Node]
    ) -> Match | NoMatch:
        """A slice that reads no lengths: constant lengths, as ``revseq.inline`` emits them.

        With static dims the index is a constant (the lengths folded in): the lengths
        are read back from it. With a symbolic dim the index is computed from the
        lengths' values: each 1-D integer constant the slice reads is tried as them
        (``constant_lengths``).
        """
        problem = check_data_use(nodes, data, gather)
        if problem is not None:
            return NoMatch(problem, output)
        shaped = shaped_as(data)
        dims = dims_of(shaped, self._shapes_for(shaped))
        if dims is None:
            return NoMatch("no lengths value, and the data's rank is unknown", output)
        if all(isinstance(d, int) for d in dims):
            return self._read_lengths_back(output, data, nodes, [int(d) for d in dims])
        return self._match_any(output, data, gather, constant_lengths(nodes))

    def _match_any(
        self, output: ir.Value, data: ir.Value, gather: ir.Node, candidates: list[ir.Value]
    ) -> Match | NoMatch:
        """The match with the first candidate lengths it is proven for, or the last why not."""
        result: Match | NoMatch = NoMatch("no lengths value", output)
        for lengths in candidates:
            result = self._match_with_lengths(output, data, gather, lengths)
            if isinstance(result, Match):
                return result
        return result

    def _read_lengths_back(
        self, output: ir.Value, data: ir.Value, nodes: list[ir.Node], dims: list[int]
    ) -> Match | NoMatch:
        """Lengths read back from a constant index (``read_back_lengths``).

        A proof for that shape; fused as a Constant, made here and placed by the restore
        pass.
        """
        if len(dims) < 2:
            return NoMatch(
                f"the data has rank {len(dims)}; ReverseSequence needs >= 2", output
            )
        declared = DECLARED.dims(output)  # before evaluating anything
        if declared is not None and not can_be(declared, dims):
            return NoMatch(
                "no lengths value, and the result is not shaped as the data", output
            )
        key = fingerprint(nodes, data, None, output, self._tensor_keys, dims=dims)
        found = self._read_back.get(key)
        if found is None:
            found = self._read_back[key] = read_back_lengths(nodes, data, output, tuple(dims))
        if isinstance(found, str):
            return NoMatch(f"no lengths value, and {found}", output)
        (batch_axis, time_axis), lens = found
        constant = ir.node("Constant", [], attributes={"value": ir.tensor(lens)})
        constant.outputs[0].name = f"{output.name}/lengths"
        constant.outputs[0].type = ir.TensorType(ir.DataType.INT64)
        constant.outputs[0].shape = ir.Shape([len(lens)])
        return Match(output, data, constant.outputs[0], batch_axis, time_axis, tuple(nodes))

    def _match_with_lengths(
        self, output: ir.Value, data: ir.Value, gather: ir.Node, lengths: ir.Value
    ) -> Match | NoMatch:
        found = slice_of(output, data, stop=lengths)
        if isinstance(found, NoMatch):
            return found
        nodes, leaves = found
        return self._judge(output, data, gather, nodes, [v for v in leaves if v is not data])

    def _dim_reads(
        self, data: ir.Value, nodes: list[ir.Node], others: list[ir.Value]
    ) -> tuple[DimReads, list[ir.Value]]:
        """Reads of other tensors' dims provably equal to a data dim, and what is left.

        Decompositions that share index arithmetic (``graph.index_sharing``) read the
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
        if lengths.dtype is not None and lengths.dtype not in LENGTH_TYPES:
            return NoMatch(f"the lengths {lengths.name!r} are not int32/int64", lengths)
        if lengths.shape is not None and len(lengths.shape) != 1:
            return NoMatch(f"the lengths {lengths.name!r} are not 1-D", lengths)
        problem = check_data_use(nodes, data, gather)
        if problem is not None:
            return NoMatch(problem, output)
        shaped = shaped_as(data)
        dims = dims_of(shaped, self._shapes_for(shaped))
        key = fingerprint(nodes, data, lengths, output, self._tensor_keys, dims=dims)
        if dim_reads:
            key += repr(
                sorted((nodes.index(n), dim_reads[id(n)]) for n in nodes if id(n) in dim_reads)
            )
        # Lengths given as a constant (``constant_lengths``): the index may have folded
        # their values in, so a proof for other lengths may fail where one for these holds.
        given = ir.convenience.get_const_tensor(lengths)
        if given is not None:
            key += tensor_key(given, self._tensor_keys).hex()
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = prove(nodes, data, lengths, output, dims, dim_reads=dim_reads)
            if verdict.axes is None and given is not None:
                as_given = prove(
                    nodes,
                    data,
                    lengths,
                    output,
                    dims,
                    dim_reads=dim_reads,
                    given=given.numpy(),
                )
                verdict = as_given if as_given.axes is not None else verdict
            self._verdicts[key] = verdict
        if verdict.axes is None:
            return NoMatch(verdict.reason, output)
        batch_axis, time_axis = verdict.axes
        return Match(output, data, lengths, batch_axis, time_axis, tuple(nodes))
