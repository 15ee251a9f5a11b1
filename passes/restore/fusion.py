"""What a proven decomposition fuses into: the match, its node's domain, its lengths.

A :class:`Match` says ``output == ReverseSequence(data, lengths)`` over the nodes
between them; restore (and the onnxscript rules) replace those nodes with one
ReverseSequence in ONNX's domain where its op can say it, else in ``revseq``'s.
"""

from __future__ import annotations

__all__ = [
    "Match",
    "NoMatch",
    "can_be",
    "discard",
    "fused_domain",
    "made_lengths",
    "shaped_as",
    "through_carrier",
    "with_onnx_lengths",
]

import dataclasses
from collections.abc import Sequence

import onnx_ir as ir

from revseq.ops.targets.carriers import carrier_pair
from revseq.ops.vocabulary import ONNX_DOMAINS, REVSEQ_DOMAIN


@dataclasses.dataclass(frozen=True)
class Match:
    """A proven decomposition: ``output == ReverseSequence(data, lengths)``."""

    output: ir.Value
    data: ir.Value
    lengths: ir.Value
    batch_axis: int
    time_axis: int
    nodes: tuple[ir.Node, ...]


def shaped_as(data: ir.Value) -> ir.Value:
    """The value whose declared shape is the data's: itself, or what a Cast read.

    A Cast keeps the shape; inside a function only the inputs are shaped (from the call
    site), so a carrier's Cast of one has its shape.
    """
    while data.shape is None:
        producer = data.producer()
        if producer is None or producer.op_type != "Cast" or producer.inputs[0] is None:
            break
        data = producer.inputs[0]
    return data


def through_carrier(match: Match) -> Match:
    """The match widened to the Casts around it where it runs in a carrier type.

    ``Cast(ReverseSequence(Cast(X, C)), D)`` is ``ReverseSequence(X)`` when ``C`` is the
    carrier of ``X``'s type ``D`` (``ops/targets/carriers.py``): the round trip gives every
    value back, and a gather moves elements without looking at them. The Cast back must
    be the result's only use, not a graph output.
    """
    into = match.data.producer()
    output = match.output
    if (
        into is None
        or into.op_type != "Cast"
        or into.domain not in ONNX_DOMAINS
        or into.inputs[0] is None
        or output.is_graph_output()
        or len(output.uses()) != 1
    ):
        return match
    back = next(iter(output.uses())).node
    source = into.inputs[0]
    carrier = ir.DataType(into.attributes.get_int("to", 0))
    if (
        back.op_type != "Cast"
        or back.domain not in ONNX_DOMAINS
        or back.attributes.get_int("to", 0) != source.dtype
        or not carrier_pair(source.dtype, carrier)
    ):
        return match
    nodes = (into, *match.nodes, back)
    return dataclasses.replace(match, output=back.outputs[0], data=source, nodes=nodes)


def can_be(declared: Sequence[int | str | None], dims: Sequence[int]) -> bool:
    """Whether declared dims (each a size, a symbol or None) can be ``dims``."""
    return len(declared) == len(dims) and all(
        not isinstance(d, int) or d == want for d, want in zip(declared, dims, strict=True)
    )


def made_lengths(match: Match) -> list[ir.Node]:
    """The nodes that make the fused node's lengths and are in no graph yet, in order.

    The matcher makes them (lengths read back from a constant index, the full lengths
    of a flip); whoever fuses places them.
    """
    made: list[ir.Node] = []

    def visit(value: ir.Value | None) -> None:
        producer = None if value is None else value.producer()
        if producer is None or producer.graph is not None or producer in made:
            return
        for source in producer.inputs:
            visit(source)
        made.append(producer)  # after what it reads

    visit(match.lengths)
    return made


def fused_domain(match: Match) -> str:
    """The domain of the node a match fuses into: ONNX's where its op can say it.

    That is axes {0, 1}: ONNX's op takes int64 lengths only, so int32 lengths are cast
    to it (``with_onnx_lengths``), which changes no value. Other axes are the ``revseq``
    domain's op, which takes int32 and int64 lengths as they are.
    """
    return "" if {match.batch_axis, match.time_axis} == {0, 1} else REVSEQ_DOMAIN


def with_onnx_lengths(match: Match) -> Match:
    """The match with int32 lengths cast to int64 where it fuses into ONNX's op."""
    lengths = match.lengths
    if fused_domain(match) != "" or lengths.dtype != ir.DataType.INT32:
        return match
    cast = ir.node("Cast", [lengths], attributes={"to": ir.DataType.INT64})
    wide = cast.outputs[0]
    wide.name = f"{lengths.name}/int64"
    wide.type, wide.shape = ir.TensorType(ir.DataType.INT64), lengths.shape
    return dataclasses.replace(match, lengths=wide)


def discard(match: Match) -> None:
    """Let go of the nodes made for a match that is not fused: they read graph values."""
    for node in made_lengths(match):
        for i in range(len(node.inputs)):
            node.replace_input_with(i, None)


@dataclasses.dataclass(frozen=True)
class NoMatch:
    """Why a candidate is not (provably) a ReverseSequence."""

    reason: str
    subject: ir.Value | ir.Node | None = None
