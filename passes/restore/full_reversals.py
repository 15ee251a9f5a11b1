"""Full reversals inline wrote, read back as ReverseSequence with full lengths.

A node whose lengths all reach T becomes a step -1 Slice along time, or where the
target has no such Slice, ``reverse_all``: one Gather along time at T-1 .. 0. Neither
reads the lengths, so restore cannot prove them against any; but a flip is the
reversal by the full length, so where inline wrote it (its constants, or its gather,
carry inline's names: ``EMITTED_NAME``) it is fused back into a ReverseSequence whose
lengths are T for every batch entry, computed from the data's shape (a constant where
its dims are static). A flip written by anything else (``torch.flip``) is left alone:
it needs no ReverseSequence.
"""

from __future__ import annotations

__all__ = ["match_slice", "reversal_match"]

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from revseq.ops.vocabulary import ONNX_DOMAINS
from revseq.passes.graph.evaluate import UnsupportedOp
from revseq.passes.graph.names import EMITTED_NAME
from revseq.passes.graph.producers import single_int
from revseq.passes.restore.fusion import Match, NoMatch
from revseq.passes.restore.proof import DimReads, evaluate_slice, probe_shapes

_INT64_MIN = np.iinfo(np.int64).min


def flip_axis(
    nodes: Sequence[ir.Node],
    data: ir.Value,
    output: ir.Value,
    dims: list[int | str],
    *,
    dim_reads: DimReads,
) -> int | str:
    """The axis the slice reverses whole at every probe shape, or why none.

    The data holds distinct ids, each symbolic dim two sizes (2 to 7): only a flip
    along one axis gives back the data flipped along it at every probe.
    """
    if len(dims) < 2:
        return f"the data has rank {len(dims)}; ReverseSequence needs >= 2"
    axes = set(range(len(dims)))
    for shape in probe_shapes(dims):
        x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        try:
            got = evaluate_slice(
                nodes,
                data=data,
                x=x,
                lengths=None,
                lens=None,
                output=output,
                dim_reads=dim_reads,
            )
        except UnsupportedOp as e:
            return f"cannot evaluate it: {e}"
        axes = {a for a in axes if shape[a] > 1 and np.array_equal(got, np.flip(x, a))}
    if len(axes) != 1:
        return "it reverses no one axis whole"
    return axes.pop()


def _axes_for(time_axis: int) -> tuple[int, int]:
    """(batch, time) axes of a full reversal along ``time_axis``: ONNX's where they can be."""
    return (1 - time_axis if time_axis < 2 else 0), time_axis


def full_lengths(
    data: ir.Value, batch_axis: int, time_axis: int, dims: Sequence[int | str | None] | None
) -> ir.Value:
    """Lengths of T for every batch entry, made by nodes not yet in a graph.

    A constant where both dims are static; else ``Expand`` of the data's time dim to its
    batch dim, each sliced out of ``Shape`` (any opset the decomposition had).
    """
    name = f"{data.name}/full_lengths"
    time_len = dims[time_axis] if dims is not None else None
    batch = dims[batch_axis] if dims is not None else None
    if isinstance(time_len, int) and isinstance(batch, int):
        tensor = ir.tensor(np.full(batch, time_len, np.int64))
        made = ir.node("Constant", [], attributes={"value": tensor})
    else:
        shape = ir.node("Shape", [data]).outputs[0]
        reads = [
            ir.node(
                "Slice",
                [
                    shape,
                    _constant([axis], f"{name}/start{axis}"),
                    _constant([axis + 1], f"{name}/end{axis}"),
                ],
            ).outputs[0]
            for axis in (time_axis, batch_axis)
        ]
        made = ir.node("Expand", reads)
    lengths = made.outputs[0]
    lengths.name = name
    lengths.type = ir.TensorType(ir.DataType.INT64)
    lengths.shape = ir.Shape([batch])
    return lengths


def _constant(values: list[int], name: str) -> ir.Value:
    constant = ir.node(
        "Constant", [], attributes={"value": ir.tensor(np.array(values, np.int64))}
    )
    constant.outputs[0].name = name
    return constant.outputs[0]


def _emitted(value: ir.Value | None) -> bool:
    """Whether ``value`` is a constant named as inline names what it writes."""
    return (
        value is not None
        and ir.convenience.get_const_tensor(value) is not None
        and EMITTED_NAME.match(value.name or "") is not None
    )


def match_slice(node: ir.Node, dims: Sequence[int | str | None] | None) -> Match | NoMatch:
    """A step -1 Slice of the whole of one axis that inline wrote, as a full reversal.

    ``dims``: the data's dims (None where unknown). Its starts, ends, axes and steps
    must be constants inline named (``EMITTED_NAME``), one element each.
    """
    if node.op_type != "Slice" or node.domain not in ONNX_DOMAINS or len(node.inputs) != 5:
        return NoMatch("not a step -1 Slice of one axis", node)
    data, *bounds = node.inputs
    if data is None or not all(_emitted(v) for v in bounds):
        return NoMatch("a Slice inline did not write", node)
    start, end, axis, step = (single_int(v) for v in bounds)
    if start != -1 or end != _INT64_MIN or step != -1 or axis is None:
        return NoMatch("not a step -1 Slice of the whole axis", node)
    rank = len(dims) if dims is not None else None
    if rank is not None:
        if rank < 2 or not -rank <= axis < rank:
            return NoMatch("the data has no batch axis beside the reversed one", node)
        axis %= rank
    elif axis < 0:
        return NoMatch("a negative axis of data of unknown rank", node)
    batch_axis, time_axis = _axes_for(axis)
    lengths = full_lengths(data, batch_axis, time_axis, dims)
    return Match(node.outputs[0], data, lengths, batch_axis, time_axis, (node,))


_PROBED_RANKS = (2, 3, 4)
"""The ranks a flip of data of unknown rank is proven at (ReverseSequence needs 2)."""


def reversal_match(
    output: ir.Value,
    data: ir.Value,
    nodes: Sequence[ir.Node],
    dims: list[int | str] | None,
    gather: ir.Node,
    *,
    dim_reads: DimReads,
) -> Match | NoMatch:
    """``reverse_all``'s gather, proven a flip along one axis, as a full reversal.

    Where the data's rank is unknown (``dims`` None: shape inference stopped before it,
    as it does in tf2onnx's exports), the flip is proven at ranks 2, 3 and 4 and must
    reverse the same axis at each: inline wrote the gather for a ReverseSequence, whose
    data has rank 2 or more.
    """
    if EMITTED_NAME.match(gather.name or "") is None:
        return NoMatch("a flip inline did not write: no ReverseSequence needed", output)
    ranks = (
        [list(dims)]
        if dims is not None
        else [[f"rank{rank}_dim{axis}" for axis in range(rank)] for rank in _PROBED_RANKS]
    )
    axes = {flip_axis(nodes, data, output, each, dim_reads=dim_reads) for each in ranks}
    found = axes.pop() if len(axes) == 1 else "it reverses no one axis at every rank"
    if isinstance(found, str):
        return NoMatch(found, output)
    batch_axis, time_axis = _axes_for(found)
    lengths = full_lengths(data, batch_axis, time_axis, dims)
    return Match(output, data, lengths, batch_axis, time_axis, tuple(nodes))
