"""A form as emitted once for a signature, and what the emitted nodes hold.

The planner emits each candidate form once (:func:`traced`: a :class:`Template`, and
what the form lacked to compute its index), checks what it holds against the target's
profile (:func:`uses`: the op types and variants, the gathers that move the data), and
inline replays the template (:func:`recorded`) for every node of that signature.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Uses", "emitted", "gather_kind", "node_kinds", "recorded", "traced", "uses"]

import functools

import onnx_ir as ir

from revseq.errors import StrategyError
from revseq.ops import forms
from revseq.ops.signature import Signature
from revseq.ops.vocabulary import (
    CLIP_CAST,
    CONCAT_DATA,
    FLAT_GATHER_ELEMENTS,
    GATHER_CONSTANT_INDEX,
    GATHER_ND_BATCH_DIMS,
    GATHERS,
    RESHAPE_ALLOWZERO,
    RESHAPE_VIEW,
    REVERSING_SLICE,
    SLICE_DATA,
)
from revseq.passes.graph.builder import Template


@functools.lru_cache(maxsize=1024)
def traced(sig: Signature, strategy: str) -> tuple[Template, tuple[str, ...]]:
    """The form emitted for ``sig`` once, and what it lacked to compute its index.

    A lack does not stop the emission (the form says it through ``op.lacking`` and
    emits on): the template still shows the form's view of the data and its gathers.
    Without lacks it is the form as inline replays it.

    Raises:
        StrategyError: The form does not fit ``sig`` whatever the index (a name, an
            opset, a precondition of the form).
    """
    template = _smaller(sig, strategy)
    return template, template.lacks


def _smaller(sig: Signature, strategy: str, back_to: ir.DataType | None = None) -> Template:
    """The form for ``sig`` with its lengths aligned to the data's batch, or as declared.

    Lengths with a dim of their own are aligned by a gather at the batch's steps, which
    a form that counts the batch reads again; one that does not reads them as declared
    where it may (``forms.lengths_may_stay_declared``), five nodes fewer. Of the two,
    the one with fewer nodes and no more lacks; aligned on a tie.
    """

    def emitting(aligned: bool):
        def emit(op, data, lens):
            if back_to is not None:
                data = op.Cast(data, to=sig.dtype)
            reversed_ = forms.emit(op, data, lens, sig, strategy, aligned=aligned)
            return reversed_ if back_to is None else op.Cast(reversed_, to=back_to)

        return emit

    aligned = Template.record(emitting(True))
    if not forms.lengths_may_stay_declared(sig):
        return aligned
    declared = Template.record(emitting(False))
    if declared.lacks or (not aligned.lacks and declared.written >= aligned.written):
        return aligned
    return declared


@functools.lru_cache(maxsize=1024)
def recorded(sig: Signature, strategy: str, back_to: ir.DataType | None = None) -> Template:
    """The form emitted for ``sig``, once: the planner inspects it, inline replays it.

    With ``back_to``, ``sig`` holds the carrier type: the data is cast to it first and
    the result back to ``back_to``.

    Raises:
        StrategyError: The form does not fit ``sig``.
    """
    if back_to is None:
        template, lacks = traced(sig, strategy)
        if lacks:
            raise StrategyError(lacks[0])
        return template

    return _smaller(sig, strategy, back_to)


def emitted(sig: Signature, strategy: str) -> tuple[frozenset[str], frozenset[str]]:
    """(op types and variants, the gathers that move the data) of the form for ``sig``.

    Raises:
        StrategyError: The form does not fit ``sig``.
    """
    found = uses(recorded(sig, strategy), sig)
    return found.ops, found.gathers


@dataclasses.dataclass(frozen=True)
class Uses:
    """What a template holds, in a profile's names.

    ``ops``: its op types and variants; ``gathers``: the gathers that move the data;
    ``view``: the op types and variants on the data's way to the output, gathers aside
    (the Flatten or Reshape into rows, the Slices, the Reshape back).
    """

    ops: frozenset[str]
    gathers: frozenset[str]
    view: frozenset[str]


def uses(template: Template, sig: Signature) -> Uses:
    """What ``template``, emitted for ``sig``, holds.

    GatherND with ``batch_dims > 0``, Reshape with ``allowzero=1``, a Gather of the data
    by a constant index of two or more dims (constant lengths) and a Clip read through
    Casts count as their variants too: backends differ on them (one reads a constant
    Gather index of two dims as a flat list: docs/backends.md).
    """
    ops: set[str] = set()
    gathers: set[str] = set()
    view: set[str] = set()
    path = {id(template.data)}  # the data and what is made of it, first input by first
    for node, kinds in node_kinds(template, sig):
        ops |= kinds
        source = node.inputs[0] if node.inputs else None
        on_path = source is not None and id(source) in path
        if on_path:
            path.update(id(o) for o in node.outputs)
        if _moves_data(node, template):
            gathers.add(gather_kind(node))
        elif on_path:
            view |= kinds
    return Uses(frozenset(ops), frozenset(gathers), frozenset(view))


def node_kinds(template: Template, sig: Signature) -> list[tuple[ir.Node, frozenset[str]]]:
    """Each node of ``template``, emitted for ``sig``, and what it counts as (``uses``).

    The op probes read it too: each op type and variant is probed on the nodes that
    are it (``revseq.probe``).
    """
    pieces = {id(template.data): sig.rank}  # the data and pieces of it, moved: their ranks
    found = []
    for node in template.nodes:
        kinds = _kinds(node, pieces, sig)
        index = node.inputs[1] if len(node.inputs) > 1 else None
        if (
            node.op_type == "Gather"
            and _moves_data(node, template)
            and _constant_of_rank(index, at_least=2)
        ):
            kinds.add(GATHER_CONSTANT_INDEX)
        found.append((node, frozenset(kinds)))
    return found


def _moves_data(node: ir.Node, template: Template) -> bool:
    """Whether ``node`` is a gather of the data: not a look-up in a table or the lengths."""
    source = node.inputs[0] if node.inputs else None
    looks_up = source is None or source.const_value is not None or source is template.lengths
    return node.op_type in GATHERS and not looks_up


def _kinds(node: ir.Node, pieces: dict[int, int | None], sig: Signature) -> set[str]:
    """The op type and variants ``node`` counts as.

    Where it moves pieces of the data, its outputs join ``pieces``.
    """
    kinds = set()
    moved = _moves_pieces(node, pieces)
    if moved is not None:
        kinds.add(moved)
        rank = _rank_after(node, pieces)
        pieces.update((id(o), rank) for o in node.outputs)
    else:
        kinds.add(CLIP_CAST if _clip_cast(node) else node.op_type)
    if node.op_type == "GatherND" and node.attributes.get_int("batch_dims", 0):
        kinds.add(GATHER_ND_BATCH_DIMS)
    if node.op_type == "Reshape" and node.attributes.get_int("allowzero", 0):
        kinds.add(_allowzero_variant(node))
    if node.op_type == "Slice" and _reverses(node):
        rank = pieces.get(id(node.inputs[0]), sig.rank)  # a view of the data: its own
        kinds.update(forms.reversing_slice_variants(dataclasses.replace(sig, rank=rank)))
    return kinds


def gather_kind(gather: ir.Node) -> str:
    """The gather's kind in a profile's types: its op type, or ``GatherElements:flat``.

    A GatherElements of a Reshape to a one-element shape gathers a 1-D view.
    """
    source = gather.inputs[0] if gather.inputs else None
    view = None if source is None else source.producer()
    if gather.op_type == "GatherElements" and view is not None and view.op_type == "Reshape":
        target = view.inputs[1] if len(view.inputs) > 1 else None
        shape = None if target is None else ir.convenience.get_const_tensor(target)
        if shape is not None and shape.size == 1:
            return FLAT_GATHER_ELEMENTS
    return gather.op_type


def _clip_cast(node: ir.Node) -> bool:
    """Whether ``node`` is a Clip read only by Casts (the variant ``Clip:cast``)."""
    uses = node.outputs[0].uses() if node.op_type == "Clip" else ()
    return bool(uses) and all(use.node.op_type == "Cast" for use in uses)


def _allowzero_variant(reshape: ir.Node) -> str:
    """The variant a Reshape with ``allowzero`` is: ``Reshape:view`` or ``Reshape:allowzero``.

    The row form's ``[rows, *trailing]`` view reshapes to a Concat of dims; a Reshape
    back reshapes to a shape as read.
    """
    shape = reshape.inputs[1] if len(reshape.inputs) > 1 else None
    producer = None if shape is None else shape.producer()
    if producer is not None and producer.op_type == "Concat":
        return RESHAPE_VIEW
    return RESHAPE_ALLOWZERO


def _rank_after(node: ir.Node, pieces: dict[int, int | None]) -> int | None:
    """The rank of what ``node`` makes of pieces of the data (a Reshape: its shape's)."""
    if node.op_type != "Reshape":
        return pieces.get(id(node.inputs[0]))
    shape = ir.convenience.get_const_tensor(node.inputs[1])
    return None if shape is None else int(shape.numpy().size)


def _moves_pieces(node: ir.Node, pieces: dict[int, int | None]) -> str | None:
    """What ``node`` counts as where it slices, joins or views pieces of the data, else None.

    ``Slice:data``, ``Slice:reverse`` or ``Concat:data`` (a Slice of a shape is plain
    ``Slice``); an Identity of them as itself, a Reshape of them (a view) as itself.
    """
    first = node.inputs[0] if node.inputs else None
    if first is None or id(first) not in pieces:
        return None
    if node.op_type == "Slice":
        return REVERSING_SLICE if _reverses(node) else SLICE_DATA
    if node.op_type == "Concat" and all(
        v is not None and id(v) in pieces for v in node.inputs
    ):
        return CONCAT_DATA
    if node.op_type in ("Identity", "Reshape"):
        return node.op_type
    return None


def _reverses(node: ir.Node) -> bool:
    """Whether a Slice steps by -1 (``Slice:reverse``)."""
    steps = node.inputs[4] if len(node.inputs) > 4 else None
    array = None if steps is None else ir.convenience.get_const_tensor(steps)
    return array is not None and bool((array.numpy() < 0).any())


def _constant_of_rank(value: ir.Value | None, *, at_least: int) -> bool:
    return (
        value is not None
        and value.const_value is not None
        and len(value.const_value.shape) >= at_least
    )
