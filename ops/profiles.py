"""Backend profiles: what a backend runs exactly, as data the planner reads.

A profile is the only place a backend's needs live (no form has a backend branch). It
records the op types (and op variants such as ``GatherND:batch_dims``) a backend runs
exactly with static shapes and with symbolic dims, the element types each gather moves
exactly, which forms ran exactly end to end, and what each of those costs there (x the
backend's copy floor, with its node count) per shape class.

Two kinds exist. *Probed* profiles (``source == "probe"``) were written by ``revseq
probe BACKEND --write``, which runs small probe models on the installed backend and
compares every output bit for bit with onnx's reference; they are stamped with the
backend's version. *Documented* profiles (``source == "documents"``) were copied from
the backends' operator tables (BACKENDS.md) and have never run anywhere.

The default profile, ``portable``, is computed: the op types every probed profile runs,
and for each element type the gathers that move it exactly on every probed backend that
has that type at all. What inline emits with no target therefore runs on all of them.
"""

from __future__ import annotations

__all__ = [
    "LEAN",
    "LEAN_VARIANTS",
    "NARROW",
    "PORTABLE",
    "MATRIX",
    "MATRIX_STATIC",
    "SHAPE_CLASSES",
    "Cost",
    "Layout",
    "gather_kind",
    "variant_names",
    "Profile",
    "load_profiles",
    "portable",
    "profile_path",
]

import dataclasses
import functools
import importlib.resources
import json
import pathlib
import statistics
from collections.abc import Iterable, Mapping, Sequence
from importlib.resources.abc import Traversable
from typing import NamedTuple

import onnx
import onnx_ir as ir

from revseq.ops._emit import SCALAR_BY_SUM, SHAPE_ARITHMETIC
from revseq.ops._index import BATCH_FROM_DATA, INT32_INDEX, INT64_INDEX

GATHERS = ("Gather", "GatherElements", "GatherND")
"""The ops that move data."""

FLAT_GATHER_ELEMENTS = "GatherElements:flat"
"""GatherElements on a 1-D view of the data (single-element rows, static dims): a kernel
of its own on some backends. torch's ``gather`` keeps a signalling float16/bfloat16 NaN
on 1-D data and sets its quiet bit on data of two dims or more (``[N, 1]`` counts as
1-D), so onnx2torch moves those types with this variant only."""

GATHER_KINDS = (*GATHERS, FLAT_GATHER_ELEMENTS)
"""What a profile records element types for: each gather, and the flat GatherElements."""

GATHER_ELEMENTS_KINDS = ("GatherElements", FLAT_GATHER_ELEMENTS)
"""GatherElements' kinds, on the data and on its 1-D view: what withholding it withholds."""


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


ELEMENT_TYPES: dict[str, int] = {
    "float32": onnx.TensorProto.FLOAT,
    "uint8": onnx.TensorProto.UINT8,
    "int8": onnx.TensorProto.INT8,
    "uint16": onnx.TensorProto.UINT16,
    "int16": onnx.TensorProto.INT16,
    "int32": onnx.TensorProto.INT32,
    "int64": onnx.TensorProto.INT64,
    "string": onnx.TensorProto.STRING,
    "bool": onnx.TensorProto.BOOL,
    "float16": onnx.TensorProto.FLOAT16,
    "float64": onnx.TensorProto.DOUBLE,
    "uint32": onnx.TensorProto.UINT32,
    "uint64": onnx.TensorProto.UINT64,
    "complex64": onnx.TensorProto.COMPLEX64,
    "complex128": onnx.TensorProto.COMPLEX128,
    "bfloat16": onnx.TensorProto.BFLOAT16,
}
"""Every element type ReverseSequence allows (opset 10's fifteen, and bfloat16 from 28):
the name profiles use (numpy's; "string") and the ONNX element type."""

PORTABLE = "portable"
"""The name of the computed default profile."""

SHAPE_CLASSES = ("static", "time+batch", "all")
"""What a cost is measured for: every dim static; time and batch symbolic (the rows'
dims static); every dim symbolic."""

MATRIX = "matrix"
"""The cost class of single-element rows with time and batch symbolic: GatherElements
on the data as a [T, B] matrix (the row form's output there too) against GatherND's
tuple per element, each with either index type."""

MATRIX_STATIC = "matrix:static"
"""The same rows with every dim static (one index type: static indexes are typed by
size, ``ops/_index.py``)."""

NARROW = "@int32"
"""The suffix of a form name timed (and run exactly) with its index in int32 where the
backend computes it in int64 otherwise (symbolic dims): ``gather_rows@int32``."""

LEAN = "@lean"
"""The suffix of a form name timed (and run exactly) with the lean index of symbolic
dims (``LEAN_VARIANTS``) where the backend has those variants: ``gather_rows@lean``, and
with its index in int32 as well ``gather_rows@lean@int32``. A name without it is the
form emitted without them: the lean index is cheaper on some backends and dearer on
others, so only a backend's own timings choose it."""

LEAN_VARIANTS = frozenset({SHAPE_ARITHMETIC, BATCH_FROM_DATA, SCALAR_BY_SUM})
"""The variants of the lean index (``ops/_emit.py``): no Cast of a dim read from a
shape, the batch count read from the data's shape, Range's scalars by ReduceSum."""


def variant_names(forms: Iterable[str]) -> tuple[str, ...]:
    """Each form's name, then each with ``@int32``, ``@lean`` and ``@lean@int32``."""
    forms = tuple(forms)
    return (
        *forms,
        *(f + NARROW for f in forms),
        *(f + LEAN for f in forms),
        *(f + LEAN + NARROW for f in forms),
    )


# Forms whose worst cost is within this factor of the cheapest are a tie, broken by
# fewer nodes: paired medians of one probe move about that much between runs.
_TIE = 1.1


class Cost(NamedTuple):
    """A form's cost on one backend: x its copy floor, and the nodes it emitted.

    The ratio is the geometric mean over the probe's cases of paired medians.
    """

    ratio: float
    nodes: int


class Layout(NamedTuple):
    """How a backend computes a time-major node's index, for one cost class.

    Swapped (``in_place`` False): as ``[B, T]`` and transposed, and single-element rows
    gathered on the data's ``[B, T]`` transpose, as onnxruntime runs short batches
    fastest; in place (``INDEX_IN_PLACE``): as ``[T, B]``, no Transpose. ``revseq
    probe`` times the backend's own output both ways on batches of 1 to 256 (x the copy
    floor; the ratios are geomeans over those cases).
    """

    in_place: bool
    swapped_ratio: float
    in_place_ratio: float

    @classmethod
    def measured(
        cls, swapped: Sequence[float], in_place: Sequence[float], *, exact: bool
    ) -> Layout:
        """The layout timed so, case by case, and the geomean of each.

        In place where it ran exactly and no case took it beyond the tie of swapped (it
        has fewer nodes, as tied forms go; a layout loses on some batch sizes by up to
        3x: onnxruntime's batch of 1).
        """
        chosen = exact and all(i <= s * _TIE for s, i in zip(swapped, in_place, strict=True))
        return cls(
            chosen,
            round(statistics.geometric_mean(swapped), 2),
            round(statistics.geometric_mean(in_place), 2),
        )


@dataclasses.dataclass(frozen=True)
class Profile:
    """What one backend runs exactly.

    Attributes:
        name: The name ``target=`` takes.
        source: "probe" (verified by execution) or "documents" (never run).
        description: One line on what the backend is.
        backend_version: The version probed (None for documented profiles).
        native: Whether the backend has ReverseSequence itself (None if unknown).
        static_ops: Op types and variants that run exactly with static shapes (None:
            any standard op).
        dynamic_ops: The same with symbolic dims; empty when the backend cannot run
            the forms' shape arithmetic at all (then only static shapes inline).
        dtypes: For each gather op type (and ``GatherElements:flat``,
            ``GATHER_KINDS``), the element types it moves exactly; None when unknown
            (documented profiles), which allows every type. A profile probed before the
            flat variant existed records none for it.
        forms: For "static" and "dynamic", the forms that ran exactly end to end (None
            when not probed); ``form@int32`` (dynamic) ran with its index in int32,
            ``form@lean`` with the lean index (``LEAN``).
        failures: What the probes saw fail, one line each (for ``revseq targets``).
        costs: Per shape class (``SHAPE_CLASSES``, ``MATRIX``, ``MATRIX_STATIC``), each timed
            form's :class:`Cost` there (and ``form@int32``'s, ``form@lean``'s, symbolic
            dims); None where not measured (documents; a backend whose runs say nothing
            of its speed).
        falls_back: Whether the backend runs what its device lacks on the CPU (an
            execution provider: exact, but slow): where no form fits every member of a
            combined profile, such members yield (see ``without_fallbacks``).
        members: For ``portable``, the probed profiles it was computed from.
        lean: Whether forms emitted for it take the lean index (``leaned``; the probed
            variants say only that they run).
        device: The accelerator the backend's data lives on (``cuda``), None for the
            host. The default is computed from host backends only (``load_profiles``).
        layouts: Per cost class, the index layout the probe timed cheaper there
            (:class:`Layout`); None where not measured (the swapped layout).
    """

    name: str
    source: str
    description: str
    backend_version: str | None
    native: bool | None
    static_ops: frozenset[str] | None
    dynamic_ops: frozenset[str] | None
    dtypes: Mapping[str, frozenset[str]] | None = None
    forms: Mapping[str, frozenset[str]] | None = None
    failures: tuple[str, ...] = ()
    costs: Mapping[str, Mapping[str, Cost]] | None = None
    falls_back: bool = False
    members: tuple[Profile, ...] = ()
    lean: bool = False
    device: str | None = None
    layouts: Mapping[str, Layout] | None = None

    @property
    def verified(self) -> bool:
        """Whether the profile comes from running probes on the backend."""
        return self.source == "probe"

    def allowed(self, *, dynamic: bool) -> frozenset[str] | None:
        """The op types and variants a form may use for static or dynamic shapes.

        The lean index's variants only where the profile is ``leaned``: they are options
        a backend's timings choose (``form@lean``), not needs.
        """
        ops = self.dynamic_ops if dynamic else self.static_ops
        return ops if ops is None or self.lean else ops - LEAN_VARIANTS

    def moves(self, gather: str, dtype: str | None) -> bool:
        """Whether ``gather`` moves elements of ``dtype`` exactly (unknown: yes)."""
        if self.dtypes is None or dtype is None:
            return True
        return dtype in self.dtypes.get(gather, frozenset())

    def has(self, dtype: str | None) -> bool:
        """Whether some gather moves ``dtype`` exactly: the backend has the type at all."""
        return any(self.moves(g, dtype) for g in GATHER_KINDS)

    def having(self, dtype: str | None) -> list[Profile]:
        """The members (or this profile) that have ``dtype`` (``has``)."""
        return [p for p in self.members or (self,) if p.has(dtype)]

    def ran(self, form: str, *, dynamic: bool) -> bool:
        """Whether ``form`` ran exactly end to end (or was not probed)."""
        if self.forms is None:
            return True
        return form in self.forms.get("dynamic" if dynamic else "static", frozenset())

    def narrowed(self) -> Profile | None:
        """This profile without int64 index arithmetic, where it has both kinds.

        The forms then compute a symbolic-dim index in int32 (exact while every index
        value is below 2^31, as the default always does). None where the profile lacks
        either ``Index:int32`` or ``Index:int64`` with symbolic dims (one kind only).
        """
        dynamic = self.dynamic_ops
        if dynamic is None or not {INT32_INDEX, INT64_INDEX} <= dynamic:
            return None
        return dataclasses.replace(self, dynamic_ops=dynamic - {INT64_INDEX})

    def leaned(self) -> Profile | None:
        """This profile emitting the lean index (``LEAN``).

        None where that would be the form itself: the profile lists none of the lean
        index's variants with symbolic dims (``ReduceSum:scalar`` counts with ReduceSum).
        """
        return dataclasses.replace(self, lean=True) if self.lean_steps() else None

    def lean_steps(self) -> frozenset[str]:
        """The lean index's variants this profile lists with symbolic dims.

        What a form emitted for it ``leaned`` takes (``ReduceSum:scalar`` counts with
        ReduceSum).
        """
        ops = self.dynamic_ops or frozenset()
        steps = LEAN_VARIANTS & ops
        return steps if "ReduceSum" in ops else steps - {SCALAR_BY_SUM}

    def variant(self, name: str) -> tuple[str, Profile | None]:
        """The form a probed name stands for, and the profile it is emitted for.

        ``form@lean`` is the form emitted for this profile ``leaned`` (None where it
        lists no variant of the lean index), any other name for this one; ``...@int32``
        for that ``narrowed`` (None where it has one kind of index arithmetic only).
        """
        form = name.partition("@")[0]
        profile: Profile | None = self.leaned() if LEAN in name else self
        if profile is not None and name.endswith(NARROW):
            profile = profile.narrowed()
        return form, profile

    def _timed(self, shape_class: str) -> list[Profile]:
        """Each member (or this profile) that has costs for ``shape_class``."""
        profiles = self.members or (self,)
        return [p for p in profiles if p.costs is not None and p.costs.get(shape_class)]

    def _costed(self, shape_class: str) -> list[Mapping[str, Cost]]:
        """The costs for ``shape_class`` of each member (or this profile) that has any."""
        return [p.costs[shape_class] for p in self._timed(shape_class)]

    def in_place(self, shape_class: str) -> bool:
        """Whether to compute a time-major index of ``shape_class`` in place.

        Where every member (or this profile) whose probe timed the layouts for the class
        chose in place, and one did: a layout measured on one backend is not applied to
        another, and the default keeps the swapped one unless all agree.
        """
        profiles = self.members or (self,)
        timed = [p.layouts[shape_class] for p in profiles if shape_class in (p.layouts or {})]
        return bool(timed) and all(layout.in_place for layout in timed)

    def laid_out(self, shape_class: str, *, in_place: bool) -> Profile:
        """This backend's profile computing ``shape_class``'s index as told, untimed.

        What the probe emits to time a layout: each way forced, whatever layouts the
        profile already holds (a kept probe's). Not for a profile with members, whose
        own layouts ``in_place`` does not read.
        """
        assert not self.members, "a layout is forced on one backend's profile"
        forced = Layout(in_place=in_place, swapped_ratio=0.0, in_place_ratio=0.0)
        return dataclasses.replace(self, layouts={**(self.layouts or {}), shape_class: forced})

    def has_costs(self, shape_class: str) -> bool:
        """Whether any member (or this profile) was timed for ``shape_class``."""
        return bool(self._costed(shape_class))

    def cheapest(
        self, shape_class: str, order: Sequence[str], *, narrow: bool = False
    ) -> tuple[str, ...]:
        """``order``'s forms by measured cost for ``shape_class``, cheapest first.

        A form's cost is its worst ratio over the members (or this profile) that have
        costs for the class: the default is as fast as its slowest backend lets it be.
        Forms within ``_TIE`` of the cheapest go by fewer nodes (their worst count).
        Forms a costed member did not time (they did not run there) go last; where no
        profile has costs, ``order`` stands.

        A form timed with the lean index (``LEAN``) or its index in int32 (``NARROW``),
        or both (symbolic dims), is a candidate of its own, ``form@lean``,
        ``form@int32``, ``form@lean@int32``, where every costed member timed it; with
        ``narrow`` (the output computes its index in int32 anyway: the default) a
        member's int32 timing stands for the form. ``form@lean`` only where every costed
        member leans as this profile does (``lean_steps``): a member timed its own
        variants, and the default takes those they all list, which none of them timed
        where they differ (TVM lists one, tract two, onnxruntime three).
        """
        timed = self._timed(shape_class)
        costed = self._costed(shape_class)
        if not costed:
            return tuple(order)
        steps = self.lean_steps()
        if all(p.lean_steps() == steps for p in timed):
            order = [*order, *(f + LEAN for f in order)]
        if narrow:
            costed = [{f: c.get(f + NARROW, cost) for f, cost in c.items()} for c in costed]
        else:
            order = [*order, *(f + NARROW for f in order)]
        known = {
            form: (max(c[form].ratio for c in costed), max(c[form].nodes for c in costed))
            for form in order
            if all(form in c for c in costed)
        }
        order = [f for f in order if "@" not in f or f in known]
        if not known:
            return tuple(order)
        best = min(ratio for ratio, _ in known.values())
        tied = sorted(
            (f for f in known if known[f][0] <= best * _TIE),
            key=lambda f: (known[f][1], known[f][0]),  # fewer nodes, then cheaper
        )
        rest = sorted((f for f in known if f not in tied), key=lambda f: known[f])
        return (*tied, *rest, *(f for f in order if f not in known))

    def int32_where_cheaper(self, shape_class: str, order: Sequence[str]) -> tuple[str, ...]:
        """``order`` with each form as ``form@int32`` where that was timed cheaper.

        For a fixed order of forms (single-element rows): the index type still goes by
        cost, int32 where every costed member timed it cheaper beyond the tie.
        """
        costed = self._costed(shape_class)

        def cheaper(form: str) -> bool:
            narrow = form + NARROW
            return bool(costed) and all(
                form in c and narrow in c and c[narrow].ratio * _TIE < c[form].ratio
                for c in costed
            )

        return tuple(form + NARROW if cheaper(form) else form for form in order)

    def device_lacks(self, model: onnx.ModelProto, dtype: str | None) -> list[str]:
        """The gathers of ``model``'s main graph that move no ``dtype`` on this device.

        None on a host backend: the default is computed from those (``load_profiles``),
        while on a device the default's gather for a type may move none of it, and the
        device's own target is what runs there.
        """
        if self.device is None:
            return []
        graph = ir.from_proto(model).graph
        held = {gather_kind(n) for n in graph if n.op_type in GATHERS}
        return sorted(g for g in held if not self.moves(g, dtype))

    def lacking(self, op_type: str, *, dynamic: bool) -> list[str]:
        """The members (or this profile) that lack ``op_type``, as "name version"."""
        profiles = self.members or (self,)
        return [
            p.backend_version or p.name
            for p in profiles
            if (allowed := p.allowed(dynamic=dynamic)) is not None and op_type not in allowed
        ]

    def not_moving(self, gather: str, dtype: str | None) -> list[str]:
        """The members (or this profile) whose ``gather`` does not move ``dtype``."""
        having = self.having(dtype)
        return [p.backend_version or p.name for p in having if not p.moves(gather, dtype)]

    def to_json(self) -> dict:
        """The profile as JSON data (sorted, so regenerated files diff cleanly)."""
        data: dict = {
            "name": self.name,
            "source": self.source,
            "description": self.description,
            "backend_version": self.backend_version,
            "native": self.native,
            "static_ops": sorted(self.static_ops or ()),
            "dynamic_ops": sorted(self.dynamic_ops or ()),
        }
        if self.dtypes is not None:
            data["dtypes"] = {k: _ordered(v) for k, v in sorted(self.dtypes.items())}
        if self.forms is not None:
            data["forms"] = {k: sorted(v) for k, v in sorted(self.forms.items())}
        if self.costs is not None:
            data["costs"] = {
                kind: {form: cost._asdict() for form, cost in sorted(forms.items())}
                for kind, forms in self.costs.items()
            }
        if self.layouts is not None:
            data["layouts"] = {cls: layout._asdict() for cls, layout in self.layouts.items()}
        data["failures"] = list(self.failures)
        if self.falls_back:
            data["falls_back"] = True
        if self.device is not None:
            data["device"] = self.device
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> Profile:
        """The inverse of :meth:`to_json`."""
        dtypes = data.get("dtypes")
        forms = data.get("forms")
        costs = data.get("costs")
        layouts = data.get("layouts")
        return cls(
            name=data["name"],
            source=data["source"],
            description=data.get("description", ""),
            backend_version=data.get("backend_version"),
            native=data.get("native"),
            static_ops=frozenset(data["static_ops"]),
            dynamic_ops=frozenset(data["dynamic_ops"]),
            dtypes=None if dtypes is None else {k: frozenset(v) for k, v in dtypes.items()},
            forms=None if forms is None else {k: frozenset(v) for k, v in forms.items()},
            failures=tuple(data.get("failures", ())),
            costs=None
            if costs is None
            else {
                kind: {form: Cost(**cost) for form, cost in forms.items()}
                for kind, forms in costs.items()
            },
            falls_back=bool(data.get("falls_back", False)),
            device=data.get("device"),
            layouts=None
            if layouts is None
            else {kind: Layout(**layout) for kind, layout in layouts.items()},
        )

    @classmethod
    def read(cls, path: Traversable) -> Profile:
        """The profile a JSON file holds (``to_json``'s form)."""
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

    def without_fallbacks(self) -> Profile | None:
        """This combined profile without the members that fall back to the CPU.

        None when it has none (or is not combined), or has nothing but them.
        """
        kept = [m for m in self.members if not m.falls_back]
        if len(kept) in (0, len(self.members)):
            return None
        return portable(kept, name=self.name)


def _ordered(types: Iterable[str]) -> list[str]:
    order = {t: i for i, t in enumerate(ELEMENT_TYPES)}
    return sorted(types, key=lambda t: order.get(t, len(order)))


def profile_path(name: str) -> pathlib.Path:
    """Where the profile file of ``name`` lives in the source tree (for ``--write``)."""
    return pathlib.Path(__file__).parent / "profiles" / f"{name}.json"


@functools.cache
def load_profiles() -> dict[str, Profile]:
    """Every profile file shipped with revseq, by name, and the computed portable one.

    The portable one is computed from the probed profiles of host backends: a device's
    kernels can lack what the same runtime's CPU kernels have and have what they lack
    (torch's CUDA indexing moves no uint16, uint32 or uint64, its ``gather`` does, the
    reverse of its CPU kernels), so a default that held on both would refuse those
    types; a device has its own target.
    """
    folder = importlib.resources.files("revseq.ops") / "profiles"
    profiles = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            profile = Profile.read(entry)
            profiles[profile.name] = profile
    hosted = (p for p in profiles.values() if p.verified and p.device is None)
    profiles[PORTABLE] = portable(hosted)
    return profiles


def portable(probed: Iterable[Profile], name: str = PORTABLE) -> Profile:
    """The profile (named ``name``) whose output runs on every one of ``probed``.

    Ops: those every profile runs (dynamic: every profile that runs dynamic shapes at
    all). Element types: a gather may move a type when every profile that moves that
    type with some gather moves it with this one (a type no probed backend has at all
    is left to every gather). Forms: those that ran everywhere.
    """
    probed = list(probed)
    if not probed:
        return Profile(
            name, "computed", "no probed profile", None, None, frozenset(), frozenset()
        )
    static_ops = frozenset.intersection(*(p.static_ops or frozenset() for p in probed))
    dynamic = [p for p in probed if p.dynamic_ops]
    dynamic_ops = (
        frozenset.intersection(*(p.dynamic_ops or frozenset() for p in dynamic))
        if dynamic
        else frozenset()
    )
    dtypes: dict[str, frozenset[str]] = {}
    for gather in GATHER_KINDS:
        keep = set()
        for dtype in ELEMENT_TYPES:
            if all(p.moves(gather, dtype) for p in probed if p.has(dtype)):
                keep.add(dtype)
        dtypes[gather] = frozenset(keep)
    forms = {
        kind: frozenset.intersection(
            *(p.forms[kind] for p in (probed if kind == "static" else dynamic) if p.forms)
        )
        for kind in ("static", "dynamic")
        if any(p.forms for p in probed)
    }
    names = ", ".join(p.backend_version or p.name for p in probed)
    every = "every probed backend" if name == PORTABLE else "each of"
    return Profile(
        name=name,
        source="computed",
        description=f"runs on {every}: {names}",
        backend_version=None,
        native=None,
        static_ops=static_ops,
        dynamic_ops=dynamic_ops,
        dtypes=dtypes,
        forms=forms or None,
        members=tuple(probed),
    )
