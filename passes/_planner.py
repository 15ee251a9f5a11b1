"""The plan for one node: which form it becomes against a target's profile, emitted once.

The planner is the one place that reads a target's capabilities: it copies the op types
the profile allows into the node's :class:`Signature` (forms read only the signature, and
say "does not fit" by raising :class:`StrategyError`), records each candidate form once
as a :class:`Template`, and checks what the template holds (op types, the gathers that
move the data and the types they move) against the profile.
"""

from __future__ import annotations

__all__ = [
    "AUTO_PREFERENCE",
    "STRATEGIES",
    "Plan",
    "check_name",
    "emitted_op_types",
    "is_dynamic",
    "plan",
    "reversal_plan",
    "runs_trivial",
    "shape_class",
]

import dataclasses
import functools

import onnx_ir as ir

from revseq.ops import forms
from revseq.ops._emit import CLIP_CAST
from revseq.ops._index import INDEX_IN_PLACE, INT64_INDEX
from revseq.ops.carriers import CARRIERS, carrier_variant
from revseq.ops.errors import StrategyError
from revseq.ops.profiles import (
    ELEMENT_TYPES,
    GATHER_ELEMENTS_KINDS,
    GATHER_KINDS,
    GATHERS,
    MATRIX,
    MATRIX_STATIC,
    Profile,
    gather_kind,
)
from revseq.ops.targets import dtype_name
from revseq.passes._builder import Template
from revseq.passes._node import node_label
from revseq.passes._scopes import ScopedNode

STRATEGIES: tuple[str, ...] = ("auto", *forms.FORMS)
"""The names ``strategy=`` accepts."""

AUTO_PREFERENCE: tuple[str, ...] = ("gather_nd", "gather_elements", "gather_rows")
"""The order "auto" tries forms in where a shape is dynamic and the target's profile
has no costs (documented profiles, op sets): the best worst case over the backends
first. Where it has costs (``revseq probe`` times every form it ran), they decide
(``Profile.cheapest``): for a named backend its own, for the default the worst over the
probed backends; with symbolic dims a form also timed with its index in int32
(``form@int32``), with the lean index (``form@lean``: ``LEAN_VARIANTS``) or both is a
candidate of its own. With dynamic shapes the row form views the
data as ``[-1, *rows]`` (static rows), Flattens it (one symbolic axis trails the
leading ones) or reads ``[rows, *trailing]`` from its shape (several, or where the
target cannot Flatten: ``Reshape:view``), GatherND gathers the rows of the data itself,
GatherElements needs an index as large as the data. ``python -m
revseq.bench --backend NAME`` ([64, 32, 256] float32, time and batch symbolic, x the
copy floor, GatherND vs GatherElements): onnxruntime 1.5 vs 5.3, TVM 1.9 vs 6.7,
onnx2torch 7.4 vs 38.8, tract 5.9 vs 258, tinygrad 9.7 vs 7.9.

Single-element rows over two leading axes (``Signature.index_covers_data``):
GatherElements needs no data-sized index there (it gathers the data as a matrix,
trailing size-1 axes squeezed off, and so does the row form; with static dims, where
GatherElements moves the type on 1-D data only, ``GatherElements:flat``, the matrix's
1-D view, whose costs the matrix's stand for). The profile's ``matrix``
and ``matrix:static`` costs (timed on such rows, symbolic and static) order
GatherElements against GatherND's tuple per element and the row form's Gather of single
elements (timed, and emitted by ``auto``, with GatherElements withheld: the cheapest on
tract and MNN with static dims, IREE with symbolic, OpenVINO with both), and the index
type with symbolic dims; where a profile has none, GatherElements goes first, its index
type by the form's costs for its shape class.
"""

STATIC_PREFERENCE: tuple[str, ...] = ("gather_rows", "gather_nd", "gather_elements")
"""The order for static shapes without costs: the row form's Gather reads a view with
the data's own trailing dims, so its output needs no Reshape. ``python -m revseq.bench``
(onnxruntime 1.32, 1 thread): geomean 0.95x native for the row form, 1.59x GatherND,
2.64x GatherElements.
"""


def shape_class(sig: forms.Signature) -> str:
    """The class a form's cost was measured for (``SHAPE_CLASSES``)."""
    if not is_dynamic(sig):
        return "static"
    if sig.row_size() is None:  # some dim after the leading axes is symbolic
        return "all"
    return "time+batch"


def cost_class(sig: forms.Signature) -> str:
    """The class a form for ``sig`` was timed in (its costs' and layout's).

    ``shape_class``'s, but single-element rows' own (``MATRIX``, ``MATRIX_STATIC``).
    """
    if sig.index_covers_data():
        return MATRIX if is_dynamic(sig) else MATRIX_STATIC
    return shape_class(sig)


def _auto_order(sig: forms.Signature, profile: Profile) -> tuple[str, ...]:
    if sig.index_covers_data():  # single-element rows
        # GatherElements on the data as a matrix, GatherND's tuple per element, or the
        # row form's Gather of single elements (``_row_gather``), as timed on such rows.
        ranked = ("gather_elements", "gather_nd", "gather_rows")
        dynamic = is_dynamic(sig)
        timed = cost_class(sig)
        if profile.has_costs(timed):  # timed on such rows: the form (and index type)
            return profile.cheapest(timed, ranked, narrow=not sig.allows(INT64_INDEX))
        if dynamic and sig.allows(INT64_INDEX):  # the index type by its class's costs
            return profile.int32_where_cheaper(shape_class(sig), ranked)
        return ranked
    if not is_dynamic(sig):
        return profile.cheapest("static", STATIC_PREFERENCE)
    # Without int64 index arithmetic the index is int32 whatever the form: members'
    # int32 timings stand for it. With it, a form timed faster in int32 is a candidate.
    narrow = not sig.allows(INT64_INDEX)
    return profile.cheapest(shape_class(sig), AUTO_PREFERENCE, narrow=narrow)


# Constants are weights to every backend: a target never has to list them.


def runs_trivial(kind: str, sig: forms.Signature, profile: Profile) -> bool:
    """Whether the target runs a trivial node's replacement (``simplify.trivial_form``).

    An Identity everywhere; a step -1 Slice where the profile lists ``Slice:reverse``
    for the node's dims, and over data of rank 4 and more (or of a rank unknown) its
    ``Slice:reverse:high_rank``: tract 0.23.9 has the Slice with static dims only
    ("Streaming dimensions with strides are not supported"), MNN 3.6.1 up to rank 3.
    """
    if kind != "Slice":
        return True
    allowed = profile.allowed(dynamic=is_dynamic(sig))
    needed = {forms.REVERSING_SLICE}
    if sig.rank is None or sig.rank > 3:
        needed.add(forms.REVERSING_SLICE_HIGH_RANK)
    return allowed is None or needed <= allowed


def reversal_plan(sig: forms.Signature, profile: Profile) -> Plan | None:
    """A node whose lengths all reach T, where the target lacks ``Slice:reverse``.

    The Gather along time of ``forms.REVERSE_ALL`` where the target has its op types and
    its Gather moves the type, else None (the node is then decomposed as any other).
    """
    fitted = dataclasses.replace(sig, allowed=_capabilities(sig, profile))
    if _misfit(fitted, forms.REVERSE_ALL, profile, probed=False) is not None:
        return None
    return Plan(fitted, forms.REVERSE_ALL, _recorded(fitted, forms.REVERSE_ALL))


_ALWAYS_ALLOWED = frozenset({"Constant"})


def check_name(strategy: str) -> None:
    """Raise StrategyError unless ``strategy`` is one of STRATEGIES."""
    if strategy not in STRATEGIES:
        raise StrategyError(
            f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one node becomes.

    Attributes:
        sig: The node's signature, with the op types the target allows.
        replacement: A form's name, or "Identity" or "Slice" for a trivial node.
        template: The form as emitted once for ``sig`` (None for a trivial node).
        carried: Where the data is reversed in its carrier type (``ops/carriers.py``),
            the signature the form was emitted for (``sig`` with the carrier's type);
            the template casts to it and back.
    """

    sig: forms.Signature
    replacement: str
    template: Template | None = None
    carried: forms.Signature | None = None

    def for_function(self) -> Plan:
        """The plan for a model-local function's body: the lengths stay its argument.

        Constant lengths are folded into a form's index; a function shared between
        calls must not capture them. Where the lengths are not constant this is the
        same template (recorded once).
        """
        sig = dataclasses.replace(self.sig, lens=None)
        if self.carried is None:
            return Plan(sig, self.replacement, _recorded(sig, self.replacement))
        carried = dataclasses.replace(self.carried, lens=None)
        template = _recorded(carried, self.replacement, sig.dtype)
        return Plan(sig, self.replacement, template, carried)


@functools.lru_cache(maxsize=1024)
def _recorded(
    sig: forms.Signature, strategy: str, back_to: ir.DataType | None = None
) -> Template:
    """The form emitted for ``sig``, once: the planner inspects it, inline replays it.

    With ``back_to``, ``sig`` holds the carrier type: the data is cast to it first and
    the result back to ``back_to``.
    """

    def emitted(op, data, lens):
        if back_to is None:
            return forms.emit(op, data, lens, sig, strategy)
        reversed_ = forms.emit(op, op.Cast(data, to=sig.dtype), lens, sig, strategy)
        return op.Cast(reversed_, to=back_to)

    return Template.record(emitted)


def _emitted(sig: forms.Signature, strategy: str) -> tuple[frozenset[str], frozenset[str]]:
    """(op types, the gathers that move the data) of the form emitted for ``sig``."""
    used = set()
    moving = set()
    for node in _recorded(sig, strategy).nodes:
        used.add(CLIP_CAST if _clip_cast(node) else node.op_type)
        if node.op_type == "GatherND" and node.attributes.get_int("batch_dims", 0):
            used.add("GatherND:batch_dims")
        if node.op_type == "Reshape" and node.attributes.get_int("allowzero", 0):
            used.add(_allowzero_variant(node))
        source = node.inputs[0] if node.inputs else None
        if node.op_type in GATHERS and source is not None and source.const_value is None:
            moving.add(gather_kind(node))  # not a lookup in a constant table of indices
            index = node.inputs[1] if len(node.inputs) > 1 else None
            if node.op_type == "Gather" and _constant_of_rank(index, at_least=2):
                used.add("Gather:constant_index")
    return frozenset(used), frozenset(moving)


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
        return "Reshape:view"
    return "Reshape:allowzero"


def _constant_of_rank(value: ir.Value | None, *, at_least: int) -> bool:
    return (
        value is not None
        and value.const_value is not None
        and len(value.const_value.shape) >= at_least
    )


def emitted_op_types(sig: forms.Signature, strategy: str) -> frozenset[str]:
    """The op types the form emits for ``sig`` (its recorded template's).

    GatherND with ``batch_dims > 0``, Reshape with ``allowzero=1`` and a Gather of the
    data by a constant index of two or more dims (constant lengths) are reported as the
    variants ``GatherND:batch_dims``, ``Reshape:allowzero`` (``Reshape:view`` for the
    row form's view of run-time trailing dims) and ``Gather:constant_index`` too:
    backends differ on them (tinygrad reads a constant Gather index as a flat list).
    """
    return _emitted(sig, strategy)[0]


def is_dynamic(sig: forms.Signature) -> bool:
    """Whether some data dim is not static (the form then computes shapes at run time)."""
    return sig.static_dims() is None


def _misfit(
    sig: forms.Signature,
    strategy: str,
    profile: Profile,
    ran_as: str | None = None,
    *,
    probed: bool = True,
) -> str | None:
    """None if the form fits the node and the target, else why not.

    ``ran_as``: the name the form's end-to-end probe ran under (``form@int32``,
    ``form@lean``). ``probed``: whether the probe ran the form end to end (else its op
    types and its gather's type are all there is to check).
    """
    try:
        used, moving = _emitted(sig, strategy)
    except StrategyError as e:
        return str(e)
    dynamic = is_dynamic(sig)
    shapes = "dynamic" if dynamic else "static"
    if sig.allowed is not None:
        missing = sorted(used - sig.allowed - _ALWAYS_ALLOWED)
        if missing:
            blamed = sorted(
                {b for op in missing for b in profile.lacking(op, dynamic=dynamic)}
            )
            who = ", ".join(blamed) or "the target"
            return f"strategy {strategy!r} needs {', '.join(missing)}, which {who} lacks"
    dtype = dtype_name(sig.dtype)
    for gather in sorted(moving):
        if not profile.moves(gather, dtype):
            who = ", ".join(profile.not_moving(gather, dtype)) or "the target"
            return (
                f"strategy {strategy!r} gathers with {gather}, which moves no {dtype} on {who}"
            )
    ran = ran_as or strategy
    if probed and not profile.ran(ran, dynamic=dynamic):
        return f"strategy {ran!r} did not run exactly there with {shapes} shapes"
    return None


def _capabilities(sig: forms.Signature, profile: Profile) -> frozenset[str] | None:
    """The op types the target accepts for this node (None: any op, any type).

    With ``<gather>:data`` for each gather that moves the node's element type there, so
    a form picks a gather the target has for this data, and ``Index:in_place`` where
    the target's probe timed the index cheaper in place for the node's cost class.
    """
    allowed = profile.allowed(dynamic=is_dynamic(sig))
    if allowed is None:
        return None
    dtype = dtype_name(sig.dtype)
    implied = {CLIP_CAST} if "Clip" in allowed else set()  # exact Clip: exact once cast
    if profile.in_place(cost_class(sig)):  # the layout its probe timed cheaper there
        implied.add(INDEX_IN_PLACE)
    return allowed | implied | {f"{g}:data" for g in GATHER_KINDS if profile.moves(g, dtype)}


def _fit(
    strategy: str, sig: forms.Signature, profile: Profile
) -> tuple[Plan | None, list[str]]:
    """The first candidate form that fits the node and the target, and why others do not."""
    fitted = dataclasses.replace(sig, allowed=_capabilities(sig, profile))
    candidates = _auto_order(fitted, profile) if strategy == "auto" else (strategy,)
    reasons = []
    for name in candidates:
        # form@int32: the form as emitted for the profile without int64 index arithmetic;
        # form@lean with the lean index; a form's own name without it.
        form, emitted_for = profile.variant(name)
        if emitted_for is None:
            continue
        candidate = (
            fitted
            if emitted_for is profile
            else dataclasses.replace(sig, allowed=_capabilities(sig, emitted_for))
        )
        if form == "gather_rows" and strategy == "auto":
            candidate = _row_gather(candidate)
        reason = _misfit(candidate, form, profile, ran_as=name)
        if reason is None:
            return Plan(candidate, form, _recorded(candidate, form)), reasons
        if form == name:  # a form@int32 that does not fit: its form says why
            reasons.append(reason)
    return None, reasons


def _row_gather(sig: forms.Signature) -> forms.Signature:
    """``sig`` for the row form as ``auto`` ranks it on single-element rows: by Gather.

    Where GatherElements moves the type, the row form would gather such rows as it
    does (the same model); the ``matrix`` costs timed the row form's Gather of single
    elements instead (emitted with GatherElements withheld), which some backends run
    cheaper (tract and MNN with static dims, IREE, OpenVINO), so ``auto`` emits what
    was timed.
    """
    if not sig.index_covers_data() or sig.allowed is None:
        return sig
    withheld = {f"{g}:data" for g in GATHER_ELEMENTS_KINDS}
    return dataclasses.replace(sig, allowed=sig.allowed - withheld)


def _runs_round_trip(profile: Profile, dtype: str, *, dynamic: bool) -> bool:
    """Whether the target runs ``dtype``'s round trip through its carrier exactly.

    A named target itself; a combined one (the default) on each member that has the
    type at all (moves it with some gather): a member without it never receives it.
    """
    variant = carrier_variant(dtype)
    if not profile.members:
        allowed = profile.allowed(dynamic=dynamic)
        return allowed is not None and variant in allowed
    having = profile.having(dtype)
    return all(variant in (m.allowed(dynamic=dynamic) or {variant}) for m in having)


def _carried(strategy: str, sig: forms.Signature, profile: Profile) -> Plan | None:
    """The plan that reverses the data in its carrier type, where the target runs that.

    Only where no form moves the type itself: the two Casts cost a pass over the data
    each (``_runs_round_trip`` says where a target has run it exactly).
    """
    dtype = dtype_name(sig.dtype)
    if dtype not in CARRIERS or not _runs_round_trip(profile, dtype, dynamic=is_dynamic(sig)):
        return None
    carried_sig = dataclasses.replace(sig, dtype=ir.DataType(ELEMENT_TYPES[CARRIERS[dtype]]))
    found, _ = _fit(strategy, carried_sig, profile)
    if found is None:
        return None
    assert sig.dtype is not None
    template = _recorded(found.sig, found.replacement, sig.dtype)
    own = dataclasses.replace(found.sig, dtype=sig.dtype)
    return Plan(own, found.replacement, template, found.sig)


def plan(strategy: str, sig: forms.Signature, scoped: ScopedNode, profile: Profile) -> Plan:
    """The form for one node: ``strategy`` itself, or the best fit for "auto".

    Where no form moves the node's element type on the target, the data is reversed in
    its carrier type if the target runs that exactly (``ops/carriers.py``).

    Raises:
        StrategyError: No form fits the node and the target; the message gives each
            form's reason.
    """
    found, reasons = _fit(strategy, sig, profile)
    if found is not None:
        return found
    carried = _carried(strategy, sig, profile)
    if carried is not None:
        return carried
    # No form fits every member: members that run what their device lacks on the CPU
    # (WebGPU) yield to those that would fail, so the node still inlines.
    yielding = profile.without_fallbacks()
    if yielding is not None:
        return plan(strategy, sig, scoped, yielding)
    sig = dataclasses.replace(sig, allowed=_capabilities(sig, profile))
    shapes = "dynamic" if is_dynamic(sig) else "static"
    where = f"target {profile.name!r} with {shapes} shapes"
    if profile.backend_version:
        where += f" (probed with {profile.backend_version})"
    options = []
    if shapes == "dynamic" and (profile.verified or profile.members):
        options.append("declare static input shapes")
    if profile.members:
        options.append("name the backend you run on (target=...)")
    hint = f"; {', or '.join(options)}" if options else ""
    raise StrategyError(
        f"{node_label(scoped)}: no decomposition fits {where}: {'; '.join(reasons)}{hint}"
    )
