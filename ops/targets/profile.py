"""Backend profiles: what a backend runs exactly, as data the planner reads.

A profile is the only place a backend's needs live (no form has a backend branch). It
records the op types and variants (``revseq.ops.vocabulary``) a backend runs exactly
with static shapes and with symbolic dims, the element types each gather moves exactly,
which forms ran exactly end to end, what each of those costs there per cost class, and
the index layout its own output ran cheaper in.

*Probed* profiles (``source == "probed"``) are written by ``revseq probe BACKEND
--write``, which runs small models on the installed backend and compares every output
bit for bit (``revseq.probe``); *documented* ones (``source == "documented"``) were
copied from the backends' operator tables and never ran. This module reads them: a file
naming an op, variant, type, form or class revseq does not know fails to load.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_TUNING",
    "Layout",
    "Profile",
    "Tuning",
]

import dataclasses
import json
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from typing import NamedTuple

from revseq.errors import ProfileError
from revseq.ops.targets.cost import Cost
from revseq.ops.targets.fields import (
    OLD_SOURCES,
    capabilities,
    check_keys,
    element_types,
    form_name,
    form_names,
    known,
    ordered,
    sorted_or_none,
)
from revseq.ops.vocabulary import (
    COST_CLASSES,
    DYNAMIC,
    ELEMENT_TYPES,
    FINITE,
    FINITE_DOMAIN,
    GATHER_KINDS,
    INT32_INDEX,
    INT32_INDEX_SUFFIX,
    INT64_INDEX,
    LEAN_INDEX_SUFFIX,
    LEAN_VARIANTS,
    SCALAR_BY_SUM,
    SHAPE_KINDS,
    STATIC,
)


@dataclasses.dataclass(frozen=True)
class Tuning:
    """Where the forms switch layout or index type.

    Attributes:
        time_inner_max_batch: Time-major nodes with rows of several elements and at most
            this many batch entries compute their index as ``[B, T]`` and transpose it
            (onnxruntime broadcasts slowly over a short innermost dim).
        transpose_data_max_batch: Time-major single-element rows with at most this many
            batch entries are gathered on the data's ``[B, T]`` transpose.
        transpose_data_min_elements: ...but not static data of fewer elements: there
            the two Transposes of the data cost as much as they save (a tie on
            onnxruntime), and each node costs a runtime something, so the index is
            transposed instead, once for every reversal that shares it.
        int32_min_elements: Static indexes of at least this many elements are computed
            in int32 where every value provably fits; below it int32 saves nothing on
            onnxruntime (a tie, or the same model: docs/choices.md).
    """

    time_inner_max_batch: int = 16
    transpose_data_max_batch: int = 32
    transpose_data_min_elements: int = 1 << 10
    int32_min_elements: int = 1 << 8


DEFAULT_TUNING = Tuning()
"""The thresholds every target uses unless its profile carries others."""


class Layout(NamedTuple):
    """How a backend computes a time-major node's index, for one cost class.

    Swapped (``in_place`` False): as ``[B, T]`` and transposed, and single-element rows
    gathered on the data's ``[B, T]`` transpose; in place (``Index:in_place``): as
    ``[T, B]``, no Transpose. The ratios are the probe's timings of each (x the copy
    floor, geomean over batches of 1 to 256).
    """

    in_place: bool
    swapped_ratio: float
    in_place_ratio: float


@dataclasses.dataclass(frozen=True)
class Profile:
    """What one backend runs exactly.

    Attributes:
        name: The name ``target=`` takes.
        source: "probed" (verified by execution), "documented" (never run), "computed"
            (combined from others: ``revseq.ops.targets.combine``), "ops" (a collection
            of op types) or "onnx" (``any``).
        description: One line on what the backend is.
        backend_version: The version probed (None for documented profiles).
        native: Whether the backend has ReverseSequence itself (None if unknown).
        static_ops: Op types and variants that run exactly with static shapes (None:
            any standard op).
        dynamic_ops: The same with symbolic dims; empty when the backend cannot run
            the forms' shape arithmetic at all (then only static shapes inline).
        dtypes: For each gather kind (``GATHER_KINDS``), the element types it moves
            exactly; None when unknown (documented profiles), which allows every type.
        forms: For "static" and "dynamic", the forms that ran exactly end to end (None
            when not probed); ``form@int32`` ran with its index in int32, ``form@lean``
            with the lean index. "finite": the forms that ran exactly on finite data
            where they differ on inf, NaN or -0.0 (``one_hot``).
        failures: What the probes saw fail, one line each (for ``revseq targets``).
        costs: Per cost class (``COST_CLASSES``), each timed form's :class:`Cost`; None
            where not measured.
        node_cost: What one more node of index arithmetic costs a run, x the copy
            floor of ``NODE_COST_BYTES`` of data: the cost of a node on its own, which
            the planner weighs beside each form's ratio, the more the smaller the data
            (``revseq.passes.inline.ranking``). None where not measured.
        falls_back: Whether the backend runs what its device lacks on the CPU (an
            execution provider: exact, but slow); such members of a combined profile
            yield where no form fits every member.
        yields: Whether the backend is kept out of the portable default: a deployment
            runtime with fewer ops than the rest, whose own target serves it.
        batch_leads: The op types that its converter has read a full reversal's output
            with a leading batch axis of size 1 dropped (Transposes, recurrent
            layers); empty where it drops none. A full reversal whose batch axis of
            size 1 does not lead, read by these alone, is written over a view where it
            does (a Transpose each side, which the converter cancels against the model's
            own), so that the next layer gets the blob of the rank it reads.
        rounding: Element types it moves inexactly from some rank on, as (type, the
            rank it starts at, what it does; a runtime may move int64 of rank 4 through
            float64). The check says it beside a difference of that type there.
        members: For a combined profile, the profiles it was computed from.
        lean: Whether forms emitted for it take the lean index (``leaned``).
        device: The accelerator the backend's data lives on (``cuda``), None for the
            host. The default is computed from host backends only.
        layouts: Per cost class, the index layout the probe timed cheaper there; None
            where not measured (the swapped layout).
        tuning: The thresholds its forms switch layout or index type at; None for
            ``DEFAULT_TUNING`` (``bench.choices`` forces each side so).
        domain: None where the output is exact on every value; ``FINITE`` for a target
            asked for by name (``finite``) that may emit a form exact on finite data
            only, where no exact form fits.
        opset_limit: The latest opset of ONNX's domain its converter reads (None: any):
            inline for it converts a later model down with onnx's version converter.
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
    node_cost: float | None = None
    falls_back: bool = False
    yields: bool = False
    batch_leads: frozenset[str] = frozenset()
    rounding: tuple[tuple[str, int, str], ...] = ()
    members: tuple[Profile, ...] = ()
    lean: bool = False
    device: str | None = None
    layouts: Mapping[str, Layout] | None = None
    tuning: Tuning | None = None
    domain: str | None = None
    opset_limit: int | None = None

    @property
    def verified(self) -> bool:
        """Whether the profile comes from running probes on the backend."""
        return self.source == "probed"

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
        return form in self.forms.get(DYNAMIC if dynamic else STATIC, frozenset())

    def ran_any(self, *, dynamic: bool) -> bool:
        """Whether some form ran exactly end to end (or none was probed)."""
        return self.forms is None or bool(self.forms.get(DYNAMIC if dynamic else STATIC))

    def finite(self) -> Profile | None:
        """This profile as a target exact on finite data only (``NAME-finite``).

        Where its probe ran a form exact there (``forms["finite"]``); None elsewhere.
        """
        if self.forms is None or not self.forms.get(FINITE) or self.domain is not None:
            return None
        return dataclasses.replace(
            self,
            name=f"{self.name}-{FINITE}",
            description=f"{self.description}; exact on {FINITE_DOMAIN} only",
            yields=True,
            domain=FINITE,
        )

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
        """This profile emitting the lean index (``LEAN_INDEX_SUFFIX``).

        None where that would be the form itself: the profile lists none of the lean
        index's variants with symbolic dims (``ReduceSum:scalar`` counts with ReduceSum).
        """
        return dataclasses.replace(self, lean=True) if self.lean_steps() else None

    def lean_steps(self) -> frozenset[str]:
        """The lean index's variants this profile lists with symbolic dims."""
        ops = self.dynamic_ops or frozenset()
        steps = LEAN_VARIANTS & ops
        return steps if "ReduceSum" in ops else steps - {SCALAR_BY_SUM}

    def variant(self, name: str) -> tuple[str, Profile | None]:
        """The form a timed name stands for, and the profile it is emitted for.

        ``form@lean`` is the form emitted for this profile ``leaned`` (None where it
        lists no variant of the lean index), any other name for this one; ``...@int32``
        for that ``narrowed`` (None where it has one kind of index arithmetic only).
        """
        form = name.partition("@")[0]
        profile: Profile | None = self.leaned() if LEAN_INDEX_SUFFIX in name else self
        if profile is not None and name.endswith(INT32_INDEX_SUFFIX):
            profile = profile.narrowed()
        return form, profile

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
            "static_ops": sorted_or_none(self.static_ops),
            "dynamic_ops": sorted_or_none(self.dynamic_ops),
        }
        if self.dtypes is not None:
            data["dtypes"] = {k: ordered(v) for k, v in sorted(self.dtypes.items())}
        if self.forms is not None:
            data["forms"] = {k: sorted(v) for k, v in sorted(self.forms.items())}
        if self.costs is not None:
            data["costs"] = {
                kind: {form: cost.to_json() for form, cost in sorted(forms.items())}
                for kind, forms in self.costs.items()
            }
        if self.layouts is not None:
            data["layouts"] = {cls: layout._asdict() for cls, layout in self.layouts.items()}
        data["failures"] = list(self.failures)
        if self.falls_back:
            data["falls_back"] = True
        if self.yields:
            data["yields"] = True
        if self.batch_leads:
            data["batch_leads"] = sorted(self.batch_leads)
        if self.rounding:
            data["rounding"] = {t: {"from_rank": r, "how": how} for t, r, how in self.rounding}
        if self.tuning is not None:
            data["tuning"] = dataclasses.asdict(self.tuning)
        for key in ("node_cost", "device", "domain", "opset_limit"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> Profile:
        """The inverse of :meth:`to_json`.

        Raises:
            ProfileError: A key, op type, variant, element type, form or class is unknown.
        """
        check_keys(data)
        dtypes = data.get("dtypes")
        forms = data.get("forms")
        costs = data.get("costs")
        layouts = data.get("layouts")
        return cls(
            name=data["name"],
            source=OLD_SOURCES.get(data["source"], data["source"]),
            description=data.get("description", ""),
            backend_version=data.get("backend_version"),
            native=data.get("native"),
            static_ops=capabilities(data["static_ops"], "static_ops"),
            dynamic_ops=capabilities(data["dynamic_ops"], "dynamic_ops"),
            dtypes=None
            if dtypes is None
            else {
                known(k, GATHER_KINDS, "gather in dtypes"): element_types(v)
                for k, v in dtypes.items()
            },
            forms=None
            if forms is None
            else {
                known(k, (*SHAPE_KINDS, FINITE), "shape kind in forms"): form_names(v)
                for k, v in forms.items()
            },
            failures=tuple(data.get("failures", ())),
            costs=None
            if costs is None
            else {
                known(kind, COST_CLASSES, "cost class"): {
                    form_name(form): Cost.from_json(cost) for form, cost in forms.items()
                }
                for kind, forms in costs.items()
            },
            node_cost=None if data.get("node_cost") is None else float(data["node_cost"]),
            falls_back=bool(data.get("falls_back", False)),
            yields=bool(data.get("yields", False)),
            batch_leads=capabilities(data.get("batch_leads", ()), "batch_leads"),
            rounding=tuple(
                (
                    known(t, ELEMENT_TYPES, "element type in rounding"),
                    int(r["from_rank"]),
                    r["how"],
                )
                for t, r in data.get("rounding", {}).items()
            ),
            device=data.get("device"),
            domain=None
            if data.get("domain") is None
            else known(data["domain"], (FINITE,), "domain"),
            layouts=None
            if layouts is None
            else {
                known(kind, COST_CLASSES, "layout class"): Layout(**layout)
                for kind, layout in layouts.items()
            },
            tuning=None if data.get("tuning") is None else Tuning(**data["tuning"]),
            opset_limit=None if data.get("opset_limit") is None else int(data["opset_limit"]),
        )

    @classmethod
    def read(cls, path: Traversable) -> Profile:
        """The profile a JSON file holds.

        Raises:
            ProfileError: The file is not a profile revseq can read; the message names it.
        """
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (ProfileError, ValueError, KeyError, TypeError) as e:
            raise ProfileError(f"profile {path.name}: {e}") from e
