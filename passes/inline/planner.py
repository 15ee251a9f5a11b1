"""The plan for one node: which form it becomes against a target's profile, emitted once.

The planner is the one place that reads a target's capabilities: it copies the op types
and variants the profile allows into the node's :class:`Signature` (forms read only the
signature, and say "does not fit" by raising :class:`StrategyError`), tries the
candidate forms in ``auto``'s order (``ranking``), records each once
(``templates.recorded``) and checks what it holds against the profile: its view of the
data (the op kinds ``Form.view`` names), the gathers that move the data and the types
they move, then every op type it emits.
"""

from __future__ import annotations

__all__ = [
    "STRATEGIES",
    "Plan",
    "plan",
    "reversal_plan",
    "runs_trivial",
]

import dataclasses
import math

import onnx_ir as ir

from revseq.errors import StrategyError
from revseq.ops import forms
from revseq.ops.signature import Signature
from revseq.ops.targets import combine
from revseq.ops.targets.carriers import CARRIERS, carrier_variant
from revseq.ops.targets.profile import DEFAULT_TUNING, Profile
from revseq.ops.vocabulary import (
    CLIP_CAST,
    DYNAMIC,
    ELEMENT_TYPES,
    FINITE,
    GATHER_ELEMENTS_KINDS,
    GATHER_KINDS,
    GATHER_ROWS,
    INDEX_IN_PLACE,
    ONE_HOT,
    REVERSE_ALL,
    SLICES,
    STATIC,
    data_variant,
    dtype_name,
)
from revseq.passes.graph.builder import Template
from revseq.passes.graph.scopes import ScopedNode
from revseq.passes.inline.ranking import (
    auto_order,
    cost_class,
    in_place,
    is_dynamic,
    weighed,
    weighs_nodes,
)
from revseq.passes.inline.refusal import refusal
from revseq.passes.inline.simplify import batch_leading
from revseq.passes.inline.templates import recorded, traced, uses

STRATEGIES = forms.STRATEGIES
"""The names ``strategy=`` accepts (``revseq.ops.forms.STRATEGIES``)."""

_ALWAYS_ALLOWED = frozenset({"Constant"})
"""Constants are weights to every backend: a target never has to list them."""

_CHECKED_BY_REFERENCE = frozenset({"complex64", "complex128"})
"""Types onnxruntime lacks, which only ``onnx.reference`` runs where revseq checks them."""

_REFERENCE_CHOICES = 63
"""onnx.reference's GatherElements takes the gathered axis's entries as ``np.choose``'s
choices, 64 arrays at most with the index: a longer axis fails there (but for 2-D data)."""


def _beyond_the_reference(sig: Signature) -> set[str]:
    """The GatherElements kinds ``onnx.reference`` cannot run for ``sig``'s type and dims.

    None for types onnxruntime has. For the others: GatherElements along a time axis
    not known to hold at most ``_REFERENCE_CHOICES`` steps (a matrix, which it gathers
    row by row, aside), and on a 1-D view larger than that.
    """
    if dtype_name(sig.dtype) not in _CHECKED_BY_REFERENCE:
        return set()
    beyond = set()
    time_len = sig.dim(sig.time_axis)
    short = time_len is not None and time_len <= _REFERENCE_CHOICES
    if not (short or sig.index_covers_data()):
        beyond.add(GATHER_ELEMENTS_KINDS[0])
    size = sig.static_dims()
    if size is None or math.prod(size) > _REFERENCE_CHOICES:
        beyond.add(GATHER_ELEMENTS_KINDS[1])
    return beyond


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one node becomes.

    Attributes:
        sig: The node's signature, with the op types the target allows.
        replacement: A form's name, or "Identity" or "Slice" for a trivial node.
        template: The form as emitted once for ``sig`` (None for a trivial node).
        carried: Where the data is reversed in its carrier type (``ops/targets/carriers.py``),
            the signature the form was emitted for (``sig`` with the carrier's type);
            the template casts to it and back.
        lengths: Where the form reads the lengths from another value than the node's
            own: the int32 value they were cast from (``int32_source``).
    """

    sig: Signature
    replacement: str
    template: Template | None = None
    carried: Signature | None = None
    lengths: ir.Value | None = None

    def for_function(self) -> Plan:
        """The plan for a model-local function's body: the lengths stay its argument.

        Constant lengths are folded into a form's index; a function shared between
        calls must not capture them. Where the lengths are not constant this is the
        same template (recorded once).
        """
        sig = dataclasses.replace(self.sig, lens=None)
        if self.carried is None:
            template = recorded(sig, self.replacement)
            return Plan(sig, self.replacement, template, lengths=self.lengths)
        carried = dataclasses.replace(self.carried, lens=None)
        template = recorded(carried, self.replacement, sig.dtype)
        return Plan(sig, self.replacement, template, carried, self.lengths)


def runs_trivial(
    kind: str, sig: Signature, profile: Profile, node: ir.Node | None = None
) -> bool:
    """Whether the target runs a trivial node's replacement (``simplify.trivial_form``).

    An Identity everywhere; a step -1 Slice where the profile lists ``Slice:reverse``
    for the node's dims, and over data of rank 4 and more (or of a rank unknown) its
    ``Slice:reverse:high_rank`` (some backends have the Slice with static dims only, or
    up to rank 3: their profiles say which). Not where the target's converter drops a
    leading batch of 1 (``Profile.batch_leads``) and the batch is symbolic: whether the
    batch-leading view is needed is known only at fixed sizes.
    """
    if kind != "Slice":
        return True
    if (
        profile.batch_leads
        and sig.rank is not None
        and sig.batch_axis != 0
        and sig.dim(sig.batch_axis) is None  # 1 at run time: a view is not proven
    ):
        return False
    allowed = profile.allowed(dynamic=is_dynamic(sig))
    needed = forms.reversing_slice_variants(sig)
    if batch_leading(sig, profile, node) is not None:
        needed |= {"Transpose"}
    return allowed is None or needed <= allowed


def reversal_plan(sig: Signature, profile: Profile) -> Plan | None:
    """A node whose lengths all reach T, where the target lacks ``Slice:reverse``.

    The Gather along time of ``REVERSE_ALL`` where the target has its op types and
    its Gather moves the type, else None (the node is then decomposed as any other).
    """
    return _unprobed_plan(REVERSE_ALL, sig, profile)


def _unprobed_plan(form: str, sig: Signature, profile: Profile) -> Plan | None:
    """A form the planner takes by itself (``REVERSE_ALL``, ``SLICES``), or None.

    Its op types and variants are each probed on the target, the form itself is not
    (a probe's lengths are given at run time, not all of them T, not constant).
    """
    return _unprobed(form, sig, profile)[0]


def _unprobed(form: str, sig: Signature, profile: Profile) -> tuple[Plan | None, str | None]:
    """``_unprobed_plan``, and why the form does not fit where it does not."""
    fitted = _as_the_target_sees(sig, profile)
    why = _why_not_fitting(fitted, form, profile, probed=False)
    if why is not None:
        return None, why
    return Plan(fitted, form, recorded(fitted, form)), None


def _why_not_fitting(
    sig: Signature,
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
    dynamic = is_dynamic(sig)
    try:
        template, lacks = traced(sig, strategy)
    except StrategyError as e:
        return str(e)
    found = uses(template, sig)
    # Its view of the data first (what most often decides), then the gathers that move
    # the data, then what its index lacked, then everything else it emits.
    view = found.view & forms.view_kinds(strategy)
    reason = _why_ops_missing(sig, strategy, view, profile, dynamic=dynamic)
    reason = reason or _why_gathers_misfit(sig, strategy, found.gathers, profile)
    reason = reason or (lacks[0] if lacks else None)
    reason = reason or _why_ops_missing(sig, strategy, found.ops, profile, dynamic=dynamic)
    if reason is not None:
        return reason
    shapes = DYNAMIC if dynamic else STATIC
    ran = ran_as or strategy
    if probed and not profile.ran(ran, dynamic=dynamic):
        return f"strategy {ran!r} did not run exactly there with {shapes} shapes"
    return None


def _why_ops_missing(
    sig: Signature, strategy: str, used: frozenset[str], profile: Profile, *, dynamic: bool
) -> str | None:
    """Why the target lacks op types or variants the form uses, or None."""
    if sig.allowed is None:
        return None
    missing = sorted(used - sig.allowed - _ALWAYS_ALLOWED)
    if not missing:
        return None
    blamed = sorted({b for op in missing for b in profile.lacking(op, dynamic=dynamic)})
    who = ", ".join(blamed) or "the target"
    return f"strategy {strategy!r} needs {', '.join(missing)}, which {who} lacks"


def _why_gathers_misfit(
    sig: Signature, strategy: str, moving: frozenset[str], profile: Profile
) -> str | None:
    """Why the gathers that move the data do not fit the target, or None."""
    dtype = dtype_name(sig.dtype)
    beyond = sorted(moving & _beyond_the_reference(sig)) if sig.allowed is not None else []
    if beyond:  # a target's output is checked there; ``any`` emits what is asked
        return (
            f"strategy {strategy!r} gathers {dtype} with {beyond[0]}, which onnx.reference "
            f"(where revseq checks that type) cannot run along more than "
            f"{_REFERENCE_CHOICES} steps"
        )
    for gather in sorted(moving):
        if not profile.moves(gather, dtype):
            who = ", ".join(profile.not_moving(gather, dtype)) or "the target"
            return (
                f"strategy {strategy!r} gathers with {gather}, which moves no {dtype} on {who}"
            )
    return None


def _as_the_target_sees(sig: Signature, profile: Profile) -> Signature:
    """``sig`` as the target sees it: what it accepts for this node, its thresholds."""
    tuning = profile.tuning or DEFAULT_TUNING
    return dataclasses.replace(sig, allowed=_capabilities(sig, profile), tuning=tuning)


def _capabilities(sig: Signature, profile: Profile) -> frozenset[str] | None:
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
    if in_place(profile, cost_class(sig)):  # the layout its probe timed cheaper there
        implied.add(INDEX_IN_PLACE)
    moving = {g for g in GATHER_KINDS if profile.moves(g, dtype)}
    moving -= _beyond_the_reference(sig)
    return allowed | implied | {data_variant(g) for g in moving}


def _first_fitting(
    strategy: str, sig: Signature, profile: Profile
) -> tuple[Plan | None, list[str]]:
    """The candidate form that fits the node and the target, and why others do not.

    The first in ``auto``'s order, or where the target timed a node
    (``ranking.weighs_nodes``), the cheapest of those that fit at the node's size,
    counting the nodes each writes for it (``ranking.weighed``).
    """
    fitted = _as_the_target_sees(sig, profile)
    candidates = auto_order(fitted, profile) if strategy == "auto" else (strategy,)
    weighing = strategy == "auto" and weighs_nodes(fitted, profile)
    fitting: dict[str, Plan] = {}
    reasons = []
    for name in candidates:
        # form@int32: the form as emitted for the profile without int64 index arithmetic;
        # form@lean with the lean index; a form's own name without it.
        form, emitted_for = profile.variant(name)
        if emitted_for is None:
            continue
        candidate = fitted if emitted_for is profile else _as_the_target_sees(sig, emitted_for)
        if form == GATHER_ROWS and strategy == "auto":
            candidate = _row_gather(candidate)
        reason = _why_not_fitting(candidate, form, profile, ran_as=name)
        if reason is None:
            fitting[name] = Plan(candidate, form, recorded(candidate, form))
            if not weighing:
                break
        elif form == name:  # a form@int32 that does not fit: its form says why
            reasons.append(reason)
    if not weighing or not fitting:
        return next(iter(fitting.values()), None), reasons
    counts = {name: _written(found) for name, found in fitting.items()}
    return fitting[weighed(fitted, profile, counts)[0]], reasons


def _written(found: Plan) -> int:
    """The nodes a plan's template writes (``Template.written``)."""
    assert found.template is not None
    return found.template.written


def _row_gather(sig: Signature) -> Signature:
    """``sig`` for the row form as ``auto`` ranks it on single-element rows: by Gather.

    Where GatherElements moves the type, the row form would gather such rows as it
    does (the same model); the ``matrix`` costs timed the row form's Gather of single
    elements instead (emitted with GatherElements withheld), which some backends run
    cheaper (their costs say which), so ``auto`` emits what was timed.
    """
    if not sig.index_covers_data() or sig.allowed is None:
        return sig
    withheld = {data_variant(g) for g in GATHER_ELEMENTS_KINDS}
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


def _in_carrier_type(strategy: str, sig: Signature, profile: Profile) -> Plan | None:
    """The plan that reverses the data in its carrier type, where the target runs that.

    Only where no form moves the type itself: the two Casts cost a pass over the data
    each (``_runs_round_trip`` says where a target has run it exactly).
    """
    dtype = dtype_name(sig.dtype)
    if dtype not in CARRIERS or not _runs_round_trip(profile, dtype, dynamic=is_dynamic(sig)):
        return None
    carried_sig = dataclasses.replace(sig, dtype=ir.DataType(ELEMENT_TYPES[CARRIERS[dtype]]))
    found, _ = _first_fitting(strategy, carried_sig, profile)
    if found is None:
        return None
    assert sig.dtype is not None
    template = recorded(found.sig, found.replacement, sig.dtype)
    own = dataclasses.replace(found.sig, dtype=sig.dtype)
    return Plan(own, found.replacement, template, found.sig)


def plan(strategy: str, sig: Signature, scoped: ScopedNode, profile: Profile) -> Plan:
    """The form for one node: ``strategy`` itself, or the best fit for "auto".

    Where no form moves the node's element type on the target, the data is reversed in
    its carrier type if the target runs that exactly (``ops/targets/carriers.py``).

    Raises:
        StrategyError: No form fits the node and the target; the message gives each
            form's reason.
    """
    found, reasons = _first_fitting(strategy, sig, profile)
    if found is not None:
        return found
    carried = _in_carrier_type(strategy, sig, profile)
    if carried is not None:
        return carried
    sliced, unsliced = _by_slices(strategy, sig, profile)
    if sliced is not None:
        return sliced
    reasons = [*reasons, *unsliced]
    finite, why = _on_finite_data(strategy, sig, profile)
    if finite is not None:
        return finite
    # No form fits every member: members that run what their device lacks on the CPU
    # (``Profile.falls_back``) yield to those that would fail, so the node still inlines.
    yielding = _without_fallbacks(profile)
    if yielding is not None:
        return plan(strategy, sig, scoped, yielding)
    raise refusal(_as_the_target_sees(sig, profile), scoped, profile, reasons, why)


def _by_slices(
    strategy: str, sig: Signature, profile: Profile
) -> tuple[Plan | None, list[str]]:
    """Constant lengths as slices of the data, where no gather form fits (``SLICES``).

    For "auto" alone; (None, why it does not fit) where it does not.
    """
    if strategy != "auto" or sig.lens is None:
        return None, []
    sliced, why = _unprobed(SLICES, sig, profile)
    return sliced, [] if why is None else [why]


def _on_finite_data(
    strategy: str, sig: Signature, profile: Profile
) -> tuple[Plan | None, list[str]]:
    """``ONE_HOT`` for a target asked for by its finite domain, where no exact form fits.

    For "auto" alone; (None, why it does not fit) where it does not.
    """
    if strategy != "auto" or profile.domain != FINITE:
        return None, []
    if ONE_HOT not in (profile.forms or {}).get(FINITE, ()):
        return None, [f"strategy {ONE_HOT!r} did not run exactly there on finite data"]
    fitted = _as_the_target_sees(sig, profile)
    try:
        template = recorded(fitted, ONE_HOT)
    except StrategyError as e:
        return None, [str(e)]
    return Plan(fitted, ONE_HOT, template), []


def _without_fallbacks(profile: Profile) -> Profile | None:
    """A combined profile without the members that fall back to the CPU (``falls_back``).

    None when it has none (or is not combined), or has nothing but them.
    """
    kept = [m for m in profile.members if not m.falls_back]
    if len(kept) in (0, len(profile.members)):
        return None
    return combine(kept, name=profile.name)
