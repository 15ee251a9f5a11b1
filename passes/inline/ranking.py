"""Which form ``auto`` takes for a node: the target's measured costs, ranked.

A probed profile holds what each form cost on its backend (x the copy floor) per cost
class, and what one node costs there (``Profile.node_cost``). For a named backend its
own costs rank the forms; for a combined target (the default) a form's cost is its
**worst** over the members, so the output is as fast as its slowest backend lets it be.
Each ratio is read at the node's data size where its dims are static (a backend's fixed
costs weigh on small data: forms trade places between sizes). ``auto_order`` ranks the
candidates by their ratios; ``weighed`` then ranks those that fit a node by what they
cost at its size, each node of the form counting beside the gather. Forms within
``COST_TIE`` of the cheapest go by fewer nodes. Where a profile has no costs
(documented ones, op-type collections) a fixed order stands. docs/forms.md says how
each class is timed and what the orders rest on.
"""

from __future__ import annotations

__all__ = [
    "AUTO_PREFERENCE",
    "STATIC_PREFERENCE",
    "auto_order",
    "cost_class",
    "data_bytes",
    "in_place",
    "is_dynamic",
    "shape_class",
    "weighed",
    "weighs_nodes",
]

import math
from collections.abc import Mapping, Sequence

import onnx_ir as ir

from revseq.ops.signature import Signature
from revseq.ops.targets.cost import COST_TIE, NODE_COST_BYTES, Cost
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import (
    ALL_DIMS,
    GATHER_ELEMENTS,
    GATHER_ND,
    GATHER_ROWS,
    INT32_INDEX_SUFFIX,
    INT64_INDEX,
    LEAN_INDEX_SUFFIX,
    MATRIX,
    MATRIX_STATIC,
    STATIC,
    TIME_BATCH,
)

AUTO_PREFERENCE: tuple[str, ...] = (GATHER_ND, GATHER_ELEMENTS, GATHER_ROWS)
"""The order for symbolic dims without costs: GatherND gathers the rows of the data
itself, GatherElements needs an index as large as the data."""

STATIC_PREFERENCE: tuple[str, ...] = (GATHER_ROWS, GATHER_ND, GATHER_ELEMENTS)
"""The order for static shapes without costs: the row form's Gather reads a view with
the data's own trailing dims, so its output needs no Reshape."""

_SINGLE_ELEMENT_ROWS: tuple[str, ...] = (GATHER_ELEMENTS, GATHER_ND, GATHER_ROWS)
"""Single-element rows: GatherElements on the data as a matrix, GatherND's tuple per
element, the row form's Gather of single elements."""


def is_dynamic(sig: Signature) -> bool:
    """Whether some data dim is not static (the form then computes shapes at run time)."""
    return sig.static_dims() is None


def shape_class(sig: Signature) -> str:
    """The shape class a form's cost was measured for (``SHAPE_CLASSES``)."""
    if not is_dynamic(sig):
        return STATIC
    if sig.row_size() is None:  # some dim after the leading axes is symbolic
        return ALL_DIMS
    return TIME_BATCH


def cost_class(sig: Signature) -> str:
    """The class a form for ``sig`` was timed in (its costs' and layout's).

    ``shape_class``'s, but single-element rows' own (``MATRIX``, ``MATRIX_STATIC``).
    """
    if sig.index_covers_data():
        return MATRIX if is_dynamic(sig) else MATRIX_STATIC
    return shape_class(sig)


def auto_order(sig: Signature, profile: Profile) -> tuple[str, ...]:
    """The names ``auto`` tries for ``sig``, best first (``form``, ``form@int32``, ...).

    Without int64 index arithmetic the index is int32 whatever the form, so members'
    int32 timings stand for it; with it, a form timed faster in int32 is a candidate of
    its own. Single-element rows rank by their own classes' costs where a profile has
    them, else take GatherElements first, the index type by the shape class's costs.
    """
    narrow = not sig.target_has(INT64_INDEX)
    if sig.index_covers_data():
        timed = cost_class(sig)
        if _has_costs(profile, timed):
            return _cheapest(
                profile, timed, _SINGLE_ELEMENT_ROWS, narrow=narrow, nbytes=data_bytes(sig)
            )
        if is_dynamic(sig) and not narrow:
            return _int32_where_cheaper(profile, shape_class(sig), _SINGLE_ELEMENT_ROWS)
        return _SINGLE_ELEMENT_ROWS
    if not is_dynamic(sig):
        return _cheapest(profile, STATIC, STATIC_PREFERENCE, nbytes=data_bytes(sig))
    return _cheapest(profile, shape_class(sig), AUTO_PREFERENCE, narrow=narrow)


def in_place(profile: Profile, cost_class: str) -> bool:
    """Whether to compute a time-major index of ``cost_class`` in place (``Index:in_place``).

    Where every member (or the profile itself) whose probe timed the layouts for the
    class chose in place, and one did: a layout measured on one backend is not applied
    to another, and the default keeps the swapped one unless all agree.
    """
    profiles = profile.members or (profile,)
    timed = [p.layouts[cost_class] for p in profiles if cost_class in (p.layouts or {})]
    return bool(timed) and all(layout.in_place for layout in timed)


def _timed(profile: Profile, cost_class: str) -> list[Profile]:
    """Each member (or the profile itself) that has costs for ``cost_class``."""
    profiles = profile.members or (profile,)
    return [p for p in profiles if p.costs is not None and p.costs.get(cost_class)]


def _costed(
    profile: Profile, cost_class: str, *, narrow: bool = False
) -> list[Mapping[str, Cost]]:
    """The costs for ``cost_class`` of each member (or the profile) that has any.

    ``narrow``: as ``_member_costs`` takes it.
    """
    return [costs for _, costs in _member_costs(profile, cost_class, narrow=narrow)]


def _has_costs(profile: Profile, cost_class: str) -> bool:
    return bool(_costed(profile, cost_class))


def _cheapest(
    profile: Profile,
    cost_class: str,
    order: Sequence[str],
    *,
    narrow: bool = False,
    nbytes: int | None = None,
) -> tuple[str, ...]:
    """``order``'s forms by measured cost for ``cost_class``, cheapest first.

    A form's cost is its worst ratio over the members that have costs for the class,
    each read at ``nbytes`` of data (``Cost.at``; None: the mean over the sizes timed).
    Forms within ``COST_TIE`` of the cheapest go by fewer nodes (their worst count).
    Forms a costed member did not time (they did not run there) go last; where no
    profile has costs, ``order`` stands.

    A form timed with the lean index (``LEAN_INDEX_SUFFIX``) or its index in int32
    (``INT32_INDEX_SUFFIX``), or both, is a candidate of its own where every costed
    member timed it; with ``narrow`` (the output computes its index in int32 anyway) a
    member's int32 timing stands for the form. ``form@lean`` only where every costed
    member leans as this profile does: a member timed its own variants, and a combined
    profile takes those they all list, which none of them timed where they differ.
    """
    timed = _timed(profile, cost_class)
    if not timed:
        return tuple(order)
    steps = profile.lean_steps()
    if all(p.lean_steps() == steps for p in timed):
        order = [*order, *(f + LEAN_INDEX_SUFFIX for f in order)]
    costed = _costed(profile, cost_class, narrow=narrow)
    if not narrow:
        order = [*order, *(f + INT32_INDEX_SUFFIX for f in order)]
    known = {
        form: (max(c[form].at(nbytes) for c in costed), max(c[form].nodes for c in costed))
        for form in order
        if all(form in c for c in costed)
    }
    order = [f for f in order if "@" not in f or f in known]
    if not known:
        return tuple(order)
    best = min(ratio for ratio, _ in known.values())
    tied = sorted(
        (f for f in known if known[f][0] <= best * COST_TIE),
        key=lambda f: (known[f][1], known[f][0]),  # fewer nodes, then cheaper
    )
    rest = sorted((f for f in known if f not in tied), key=lambda f: known[f])
    return (*tied, *rest, *(f for f in order if f not in known))


def _int32_where_cheaper(
    profile: Profile, cost_class: str, order: Sequence[str]
) -> tuple[str, ...]:
    """``order`` with each form as ``form@int32`` where that was timed cheaper.

    For a fixed order of forms (single-element rows): the index type still goes by
    cost, int32 where every costed member timed it cheaper beyond the tie.
    """
    costed = _costed(profile, cost_class)

    def cheaper(form: str) -> bool:
        narrow = form + INT32_INDEX_SUFFIX
        return bool(costed) and all(
            form in c and narrow in c and c[narrow].ratio * COST_TIE < c[form].ratio
            for c in costed
        )

    return tuple(form + INT32_INDEX_SUFFIX if cheaper(form) else form for form in order)


def weighs_nodes(sig: Signature, profile: Profile) -> bool:
    """Whether a member that has costs for ``sig``'s class (or the profile) timed a node."""
    return any(p.node_cost is not None for p in _timed(profile, cost_class(sig)))


def weighed(sig: Signature, profile: Profile, nodes: Mapping[str, int]) -> tuple[str, ...]:
    """The names in ``nodes``, cheapest first at the size of ``sig``'s data.

    ``nodes``: the candidates that fit ``sig``, each with the nodes it writes for it.
    A costed member's cost of a form is its ratio at the data's size (``Cost.at``; at
    symbolic dims the mean over the sizes timed) plus its ``node_cost`` per node of
    the form, weighed by how much smaller the node's data is than ``NODE_COST_BYTES``
    (at symbolic dims, as large: the smallest data the ratios were timed on); the
    form's cost is its worst over the members. A form ties the cheapest where no
    member's cost of it exceeds that member's cost of the cheapest by more than
    ``COST_TIE`` (the ratios' noise): then fewer nodes go first. Not the worst costs
    alone: a member's node cost may lift both forms' worst to within the band while
    another member pays twice as much for the form of fewer nodes. Names without a
    cost for the class keep their order (``nodes``'), after the rest.
    """
    weight, nbytes = _node_weight(sig), data_bytes(sig)
    members = _member_costs(profile, cost_class(sig), narrow=not sig.target_has(INT64_INDEX))
    each = {
        name: [
            costs[name].at(nbytes) + (p.node_cost or 0.0) * weight * n for p, costs in members
        ]
        for name, n in nodes.items()
        if members and all(name in costs for _, costs in members)
    }
    if not each:
        return tuple(nodes)
    known = {name: max(costs) for name, costs in each.items()}
    best = each[min(known, key=known.__getitem__)]

    def ties(form: str) -> bool:
        return all(c <= b * COST_TIE for c, b in zip(each[form], best, strict=True))

    tied = sorted(filter(ties, known), key=lambda f: (nodes[f], known[f]))
    rest = sorted((f for f in known if f not in tied), key=lambda f: known[f])
    return (*tied, *rest, *(f for f in nodes if f not in known))


def data_bytes(sig: Signature) -> int | None:
    """The bytes of the node's data, which its forms' costs are read at.

    None at symbolic dims, and for strings (their size is not their elements').
    """
    dims = sig.static_dims()
    if dims is None or sig.dtype is None or sig.dtype == ir.DataType.STRING:
        return None
    return math.prod(dims) * sig.dtype.itemsize


def _node_weight(sig: Signature) -> float:
    """How many times ``NODE_COST_BYTES`` exceeds the node's data (1 where not known)."""
    nbytes = data_bytes(sig)
    return 1.0 if nbytes is None else NODE_COST_BYTES / max(nbytes, 1)


def _member_costs(
    profile: Profile, cost_class: str, *, narrow: bool
) -> list[tuple[Profile, Mapping[str, Cost]]]:
    """Each costed member (or the profile) with its forms' costs for ``cost_class``.

    With ``narrow`` (the index is int32 whatever the form) a form's int32 timing
    stands for it.
    """
    timed = []
    for p in _timed(profile, cost_class):
        assert p.costs is not None
        costs = p.costs[cost_class]
        if narrow:
            costs = {f: costs.get(f + INT32_INDEX_SUFFIX, c) for f, c in costs.items()}
        timed.append((p, costs))
    return timed
