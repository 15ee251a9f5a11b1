"""Restore pass: fuse proven ReverseSequence decompositions back into one node.

Every gather in every scope (main graph, If/Loop/Scan bodies, model-local functions) is a
candidate; :class:`revseq.passes.restore.match.Matcher` proves by evaluation that the value it
computes is ``ReverseSequence(X, L)`` and finds the axes. The result is one
``ReverseSequence`` node: in the ONNX domain when the axes are {0, 1} and the lengths
int64, else in the ``revseq`` domain. The nodes of the decomposition that nothing else
reads are removed; values other nodes still use are kept.

Calls to the functions ``revseq.inline`` emits with ``as_function=True`` are recognised
from the function body and replaced by the op; functions left unused are dropped.

The fused node keeps the lengths as they were. revseq's own decompositions clamp
lengths to [0, T]; ONNX leaves lengths outside that range unspecified, so dropping the
clamp changes nothing the specification defines.
"""

from __future__ import annotations

__all__ = ["RestorePassResult", "RestoreReverseSequencePass"]

import dataclasses
import logging

import onnx_ir as ir

from revseq.ops.vocabulary import FUNCTION_DOMAIN, ONNX_DOMAINS, REVSEQ_DOMAIN
from revseq.passes.graph.builder import gc_paused
from revseq.passes.graph.names import EMITTED_NAME
from revseq.passes.graph.reverse_sequence import remove_if_dead, validate_all
from revseq.passes.graph.scopes import walk
from revseq.passes.restore.backward_slice import GATHER_OPS
from revseq.passes.restore.fusion import (
    Match,
    NoMatch,
    fused_domain,
    made_lengths,
    with_onnx_lengths,
)
from revseq.passes.restore.match import Matcher

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class RestorePassResult(ir.passes.PassResult):
    """The pass result, with why each gather that was not fused was refused.

    Attributes:
        reasons: (node name, scope, reason) for every gather left alone; this is how a
            near-miss says why it stays.
    """

    reasons: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)


class RestoreReverseSequencePass(ir.passes.InPlacePass):
    """Fuse every proven ReverseSequence decomposition back into the op."""

    def call(self, model: ir.Model) -> RestorePassResult:
        """Fuse in every scope; ``modified`` is False when nothing was fused."""
        with gc_paused():
            return self._restore_all(model)

    def _restore_all(self, model: ir.Model) -> RestorePassResult:
        matcher = Matcher(model)
        reasons: list[tuple[str, str, str]] = []
        fused = 0
        needs_revseq_import: list[ir.Graph | ir.Function] = []
        scoped_nodes = list(walk(model))
        # The ReverseSequence nodes already there are validated as inline validates them,
        # before anything changes: a model holding an invalid node is refused whole
        # (writing it back out would pass the problem on; onnxruntime aborts on rank 1).
        # Here rather than in requires(), so that the model is walked once.
        validate_all(scoped_nodes)
        for scoped in scoped_nodes:
            node = scoped.node
            if node.graph is None:  # removed by an earlier fusion
                continue
            if node.domain == FUNCTION_DOMAIN:
                result = _match_call(node, model, matcher)
            elif node.op_type in GATHER_OPS and node.domain in ONNX_DOMAINS:
                result = matcher.match(node)
            elif node.op_type == "Slice" and node.domain in ONNX_DOMAINS:
                result = matcher.match_slice(node)
                if isinstance(result, NoMatch):
                    continue  # a Slice is no candidate to give reasons for
            else:
                continue
            if isinstance(result, NoMatch):
                reasons.append((node.name or "", scoped.scope, result.reason))
                continue
            if _fuse(node, result):
                needs_revseq_import.append(scoped.owner)
            fused += 1
        for owner in needs_revseq_import:
            owner.opset_imports.setdefault(REVSEQ_DOMAIN, 1)
        if fused:
            _drop_unused_functions(model)
        logger.info("restored %d ReverseSequence node(s)", fused)
        return RestorePassResult(model, modified=fused > 0, reasons=reasons)


def _match_call(call: ir.Node, model: ir.Model, matcher: Matcher) -> Match | NoMatch:
    """Match the body of a ``revseq.inline`` function, typed from the call site."""
    function = model.functions.get(call.op_identifier())
    if function is None or len(function.inputs) != 2 or len(function.outputs) != 1:
        return NoMatch("not a call to a revseq.inline function", call)
    producer = function.outputs[0].producer()
    gathers = [producer] if producer is not None else []
    while gathers and gathers[0].op_type not in GATHER_OPS:
        node = gathers[0]
        source = node.inputs[0] if node.inputs else None
        gathers = [source.producer()] if source is not None and source.producer() else []
    if not gathers:
        return NoMatch("the function body does not end in a gather", call)
    saved = [(v.type, v.shape) for v in function.inputs]
    try:
        for inner, outer in zip(function.inputs, call.inputs, strict=True):
            if outer is not None:
                inner.type, inner.shape = outer.type, outer.shape
        result = matcher.match(gathers[0])
    finally:
        for inner, (type_, shape) in zip(function.inputs, saved, strict=True):
            inner.type, inner.shape = type_, shape
    if isinstance(result, NoMatch):
        return result
    if result.output is not function.outputs[0] or result.data is not function.inputs[0]:
        return NoMatch("the function is more than a ReverseSequence", call)
    if result.lengths is not function.inputs[1]:
        return NoMatch("the function computes its lengths", call)
    assert call.inputs[0] is not None and call.inputs[1] is not None
    return with_onnx_lengths(
        Match(
            call.outputs[0],
            call.inputs[0],
            call.inputs[1],
            result.batch_axis,
            result.time_axis,
            (call,),
        )
    )


def _original_name(match: Match, anchor: ir.Node) -> str | None:
    producer = match.output.producer()
    for node in (producer, anchor):
        if node is not None and node.name:
            found = EMITTED_NAME.match(node.name)
            if found:
                return found.group("prefix")
            if node.domain == FUNCTION_DOMAIN or node.op_type == "Slice":
                return node.name  # a call, or a full reversal's Slice, keeps the name
    return None


def _fuse(anchor: ir.Node, match: Match) -> bool:
    """Replace the matched value by a ReverseSequence node; True if it is revseq-domain."""
    domain = fused_domain(match)
    producer = match.output.producer()
    assert producer is not None
    graph = producer.graph
    assert graph is not None
    node = ir.Node(
        domain,
        "ReverseSequence",
        [match.data, match.lengths],
        attributes=[
            ir.AttrInt64("batch_axis", match.batch_axis),
            ir.AttrInt64("time_axis", match.time_axis),
        ],
        name=_original_name(match, anchor),
        num_outputs=1,
    )
    made = made_lengths(match)
    for i, maker in enumerate(made):
        suffix = "" if len(made) == 1 else f"_{i}"
        maker.name = f"{node.name or match.output.name}/lengths{suffix}"
    new_nodes = [*made, node]
    ir.convenience.replace_nodes_and_values(
        graph, producer, [], new_nodes, [match.output], [node.outputs[0]]
    )
    remove_if_dead(match.output)  # the decomposition, as far as nothing else reads it
    return domain == REVSEQ_DOMAIN


def _drop_unused_functions(model: ir.Model) -> None:
    """Remove ``revseq.inline`` functions no call uses, and then their opset import."""
    called = {s.node.op_identifier() for s in walk(model) if s.node.domain == FUNCTION_DOMAIN}
    for identifier in [i for i in model.functions if i[0] == FUNCTION_DOMAIN]:
        if identifier not in called:
            del model.functions[identifier]
    if not called:
        model.opset_imports.pop(FUNCTION_DOMAIN, None)
        for function in model.functions.values():
            function.opset_imports.pop(FUNCTION_DOMAIN, None)
