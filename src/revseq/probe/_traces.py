"""The op probes: the forms themselves, as the planner writes them, traced for many targets.

Every form (and the whole reversal inline writes by itself) is emitted as the planner
emits it (``templates.traced``) for each of ``SIGNATURES`` and for a series of
capability sets: every op type and variant a form may use; that set without the lean
index, without int64 index arithmetic, or both; and each of those without, one at a
time, each capability the form asked about (so that what a form writes where a target
lacks something is traced too). Each distinct result is a probe model: a whole form,
from the data and the lengths to the reversed data, as a backend is handed it.

A probe model holds *slots* (``Slot``): what each of its nodes counts as
(``templates.node_kinds``) and each capability the form relies on (one it writes
something else without), for its shape kind; where a node moves the data, per form
layout (a runtime may move data of one shape right and of another wrong). A symbolic
trace also runs with its dims fixed, for static shapes (a runtime may fix the dims at
load). How the runs decide each op type and variant:
:func:`revseq.probe._op_runs.run_op_probes`.
"""

from __future__ import annotations

__all__ = [
    "INDEX_TYPES",
    "SIGNATURES",
    "OpProbe",
    "Slot",
    "as_the_form_probes_run",
    "in_the_first_layout",
    "op_probes",
    "probe_feeds",
]

import dataclasses
import functools
from collections.abc import Iterable, Iterator

import numpy as np
import onnx
import onnx.shape_inference
import onnx_ir as ir

from revseq.errors import StrategyError
from revseq.ops import forms
from revseq.ops.reference import reverse_sequence
from revseq.ops.signature import Signature
from revseq.ops.vocabulary import (
    DYNAMIC,
    GATHER_KINDS,
    INDEX_IN_PLACE,
    INT32_INDEX,
    INT64_INDEX,
    LEAN_VARIANTS,
    REVERSE_ALL,
    SLICES,
    STATIC,
    VARIANTS,
    WHERE_BROADCAST_ELSE,
    data_variant,
)
from revseq.passes.graph.builder import Template
from revseq.passes.inline.templates import node_kinds, traced
from revseq.probe._models import (
    EMPTY_SIZES,
    FORM_LAYOUTS,
    OPSET,
    SIZES,
    FormLayout,
    probe_floats,
)

_STATIC_SIZE = (5, 4)
"""(T, B) of the static signatures, and the fixed size each symbolic trace also runs at."""

_CONSTANT_LENGTHS = ((5, 0, 1, 3), (1, 1, 1, 1))
"""The constant lengths of the static signatures that have some (T = 5, B = 4): runs of
each kind, and nothing to reverse."""


_TIME, _BATCH, _REST = "T", "B", "rest"
"""What may be symbolic in a traced signature: the time dim, the batch dim, the rest."""


@dataclasses.dataclass(frozen=True)
class Traced:
    """A signature the forms are traced for: a form layout, some of its dims symbolic.

    ``symbolic``: which dims (``_TIME``, ``_BATCH``, ``_REST``: the trailing ones); the
    others are at ``_STATIC_SIZE``, trailing ones as the layout has them. ``own_dim``:
    the lengths declared with a dim of their own. ``constant``: constant lengths.
    """

    layout: FormLayout
    symbolic: frozenset[str]
    lens_type: ir.DataType = ir.DataType.INT64
    own_dim: bool = False
    constant: tuple[int, ...] | None = None

    @property
    def dynamic(self) -> bool:
        """Whether some dim is symbolic: the probe then stands for symbolic dims."""
        return bool(self.symbolic)

    @property
    def canonical(self) -> bool:
        """Whether the form probes run the forms so too.

        Static, or time and batch symbolic, with lengths given at run time.
        """
        return self.constant is None and self.symbolic in (frozenset(), {_TIME, _BATCH})

    @property
    def signature(self) -> Signature:
        """The node's signature, with no target (``allowed`` is set per trace)."""
        dims, _ = self.declared(fixed=False)
        layout = self.layout
        return Signature(
            batch_axis=layout.batch_axis,
            time_axis=layout.time_axis,
            rank=len(layout.dims),
            dims=tuple(d if isinstance(d, int) else None for d in dims),
            dtype=ir.DataType.FLOAT,
            lens_dtype=self.lens_type,
            lens=self.constant,
            opset=OPSET,
            lens_own_dim=self.own_dim,
        )

    def declared(self, *, fixed: bool) -> tuple[list[int | str], list[int | str]]:
        """(the data's dims, the lengths' dims) as a probe model declares them.

        Symbolic where traced so, unless ``fixed``: then at ``_STATIC_SIZE``.
        """
        sizes = dict(zip((_TIME, _BATCH), _STATIC_SIZE, strict=True))
        symbolic = frozenset() if fixed else self.symbolic
        data: list[int | str] = []
        for axis, dim in enumerate(self.layout.dims):
            named = dim if isinstance(dim, str) else _REST
            if named in symbolic:
                data.append(dim if isinstance(dim, str) else f"D{axis}")
            else:
                data.append(sizes[dim] if isinstance(dim, str) else dim)
        lens = data[self.layout.batch_axis]
        if self.own_dim and isinstance(lens, str):
            lens = "N"
        return data, [lens]

    def sizes(self) -> tuple[tuple[int, int], ...]:
        """(T, B) sizes its symbolic dims run at: ``SIZES``' where symbolic, else fixed."""
        found: list[tuple[int, int]] = []
        longest = max(self.constant or (0,))
        for time_len, batch in (s for s in SIZES if s[0] >= longest):  # lengths within T
            size = (
                time_len if _TIME in self.symbolic else _STATIC_SIZE[0],
                batch if _BATCH in self.symbolic else _STATIC_SIZE[1],
            )
            if size not in found:
                found.append(size)
        return tuple(found)


def _signatures() -> tuple[Traced, ...]:
    wide, narrow = ir.DataType.INT64, ir.DataType.INT32
    both = frozenset({_TIME, _BATCH})
    found = []
    for layout in FORM_LAYOUTS:
        rest = frozenset({_REST}) if any(isinstance(d, int) for d in layout.dims) else None
        for lens_type in (wide, narrow):
            found += [
                Traced(layout, frozenset(), lens_type),
                Traced(layout, both, lens_type),
                Traced(layout, both, lens_type, own_dim=True),
                # A fixed sequence length (as Keras exports), the lengths' dim their own.
                Traced(layout, frozenset({_BATCH}), lens_type, own_dim=True),
            ]
        if rest is not None:
            found.append(Traced(layout, both | rest))
        for lengths in _CONSTANT_LENGTHS:
            found += [
                Traced(layout, frozenset(), constant=lengths),
                Traced(layout, frozenset({_TIME}), constant=lengths),
            ]
            if rest is not None:
                found.append(Traced(layout, rest, constant=lengths))
    return tuple(found)


SIGNATURES = _signatures()
"""The signatures every form is traced for, each form layout: static; time and batch
symbolic, the lengths' dim the data's batch or one of their own; the batch alone;
every dim; int64 and int32 lengths; constant lengths, static, with a symbolic time or
symbolic trailing dims."""


class _Asked(frozenset):
    """A capability set that remembers which members a form asked about."""

    asked: set[str]

    def __contains__(self, name: object) -> bool:
        self.asked.add(str(name))
        return super().__contains__(name)


def _asking(capabilities: frozenset[str]) -> _Asked:
    watched = _Asked(capabilities)
    watched.asked = set()
    return watched


@dataclasses.dataclass(frozen=True)
class _Trace:
    """A form emitted for a signature and a capability set, without lacks."""

    traced: Traced
    form: str
    sig: Signature
    template: Template
    asked: frozenset[str]


def _trace(traced_as: Traced, form: str, capabilities: frozenset[str]) -> _Trace | None:
    """``form`` as the planner emits it for ``capabilities``, or None where it lacks."""
    asked = _asking(capabilities)
    sig = dataclasses.replace(traced_as.signature, allowed=asked)
    try:  # not the planner's cache: it would answer without asking
        if form in _WHOLE_REVERSALS:
            reverse = _WHOLE_REVERSALS[form]
            template = Template.record(lambda op, x, lens: reverse(op, x, lens, sig))
            lacks = template.lacks
        else:
            template, lacks = traced.__wrapped__(sig, form)  # type: ignore[attr-defined]
    except StrategyError:
        return None
    if lacks:
        return None
    plain = dataclasses.replace(sig, allowed=capabilities)
    return _Trace(traced_as, form, plain, template, frozenset(asked.asked))


_WHOLE = "Slice"
"""A node whose lengths all reach T, as inline writes it (``forms.reverse_whole``)."""

_WHOLE_BATCH_FIRST = "Slice (batch first)"
"""The same over the data's view with the batch first, as inline writes it for a target
whose converter takes a leading batch (``forms.reverse_whole_batch_first``)."""

_WHOLE_REVERSALS = {
    _WHOLE: forms.reverse_whole,
    _WHOLE_BATCH_FIRST: forms.reverse_whole_batch_first,
}

_TRACED_FORMS = (*forms.FORMS, REVERSE_ALL, SLICES, *_WHOLE_REVERSALS)
"""What the op probes come from: every form the planner may take but the one-hot form,
which is for the finite domain alone and probed end to end there, and the whole
reversal inline writes by itself (over a batch-first view too, where the batch does not
lead)."""

_NEVER_EMITTED = frozenset({WHERE_BROADCAST_ELSE})
"""Variants a profile may list that no form emits any more (they stay known, so that a
profile probed when one did still loads): nothing probes them."""


_DATA_VARIANTS = frozenset(data_variant(g) for g in GATHER_KINDS)
_DERIVED = _DATA_VARIANTS | {INDEX_IN_PLACE}
"""What the planner derives for a node (from a profile's timings and element types),
which no profile lists: forms may use it, nothing probes it. The index in place is an
option the timings take: a model that relies on it is tried after one that does not."""


@functools.cache
def _everything() -> frozenset[str]:
    """Every op type of ONNX's default domain and every variant: what a form may use."""
    op_types = {schema.name for schema in onnx.defs.get_all_schemas() if not schema.domain}
    variants = (VARIANTS - _NEVER_EMITTED) | {data_variant(g) for g in GATHER_KINDS}
    return frozenset(op_types | variants)


def _roots(everything: frozenset[str]) -> tuple[frozenset[str], ...]:
    """The capability sets each one-less series starts from."""
    plain = everything - LEAN_VARIANTS
    return (everything, plain, everything - {INT64_INDEX}, plain - {INT64_INDEX})


def _traces(lacking: frozenset[str]) -> Iterator[tuple[_Trace, frozenset[str]]]:
    """Each trace and the capabilities it relies on, every capability set without ``lacking``.

    With some lacking, only the forms that asked about them: the others write what
    they wrote with everything.
    """
    for traced_as in SIGNATURES:
        for form in _TRACED_FORMS:
            if form == _WHOLE_BATCH_FIRST and traced_as.layout.batch_axis == 0:
                continue  # the batch leads already
            if lacking and not lacking & _asked_in(traced_as, form):
                continue
            yield from _series(traced_as, form, lacking)


def _asked_in(traced_as: Traced, form: str) -> frozenset[str]:
    """Every capability ``form`` asked about for ``traced_as``, with everything there."""
    series = _series(traced_as, form, frozenset())
    return frozenset(name for trace, _ in series for name in trace.asked)


@functools.cache
def _series(
    traced_as: Traced, form: str, lacking: frozenset[str]
) -> tuple[tuple[_Trace, frozenset[str]], ...]:
    """``form``'s traces for ``traced_as``, each with what it relies on that no node is.

    A capability a form asked about is relied on where the form writes something else
    without it, or cannot be written at all. A trace without one relies on what the
    trace it came from did, where it still asked about them.
    """
    found = []
    roots = _roots(_everything() - lacking)
    seen = set(roots)
    for root in roots:
        whole = _trace(traced_as, form, root)
        if whole is None:
            continue
        used, fewer = set(), []
        for name in sorted(whole.asked & root):
            without = _trace(traced_as, form, root - {name})
            if without is None or _model_key(without.template) != _model_key(whole.template):
                used.add(name)
            if without is not None and root - {name} not in seen:
                seen.add(root - {name})
                fewer.append((name, without))
        relied = frozenset(used - _kinds_of(whole) - _NEVER_EMITTED - _DATA_VARIANTS)
        found.append((whole, relied))
        found += [(without, (relied - {name}) & without.asked) for name, without in fewer]
    return tuple(found)


def _kinds_of(trace: _Trace) -> frozenset[str]:
    return frozenset(k for _, kinds in node_kinds(trace.template, trace.sig) for k in kinds)


@functools.cache
def _model_key(template: Template) -> object:
    """What makes two templates the same model: each node's op, attributes and inputs."""
    keys: dict[int, object] = {id(template.data): "x", id(template.lengths): "lens"}
    for node in template.nodes:
        attributes = tuple(
            sorted((a.name, _attribute_key(a.value)) for a in node.attributes.values())
        )
        inputs = tuple(None if v is None else keys[id(v)] for v in node.inputs)
        keys[id(node.outputs[0])] = (node.op_type, attributes, inputs)
    return keys[id(template.nodes[-1].outputs[0])]


def _attribute_key(value: object) -> object:
    if isinstance(value, ir.Tensor):
        array = value.numpy()
        return (array.dtype.str, array.shape, array.tobytes())
    return tuple(value) if isinstance(value, list) else value


Slot = tuple[str, str, "int | tuple[str, int] | None"]
"""What runs exactly or not: (op type or variant, shape kind, where): where it moves the
data, the form layout it does so in (an index of ``FORM_LAYOUTS``); for an index type,
the form and layout; else None."""


def in_the_first_layout(slot: Slot) -> bool:
    """Whether a slot stands where the form probes require every form to run.

    That is the first form layout; a slot of no layout stands everywhere.
    """
    where = slot[2]
    layout = where[1] if isinstance(where, tuple) else where
    return layout in (None, 0)


INDEX_TYPES = frozenset({INT32_INDEX, INT64_INDEX})
"""The index arithmetic's types: what every step of it computes in, decided per form
and layout (a GPU may run int64 steps over a vector on the host, over a grid not)."""

_UNPROBED = _DERIVED | _NEVER_EMITTED | {"Constant"}
"""What a slot never names: what the planner derives, what no form emits, the weights."""


@dataclasses.dataclass(frozen=True)
class OpProbe:
    """One form as traced for a signature and a capability set: a model, and its slots.

    Attributes:
        traced: The signature it was traced for.
        form: The form.
        template: The form's nodes.
        kind: ``static`` or ``dynamic``: the shapes its verdict stands for.
        slots: What it holds (``Slot``).
        relies: How many capabilities it relies on that no node is (the lean index's
            steps, the index in place, an index type): a model relying on fewer is
            tried first, as a backend may run two options each exactly and together
            wrong, and the planner takes options by timing.
        fixed: Whether a symbolic trace's dims are declared at the fixed size.
    """

    traced: Traced
    form: str
    template: Template
    kind: str
    slots: frozenset[Slot]
    relies: int = 0
    fixed: bool = False

    @property
    def where(self) -> str:
        """The form and the dims it is declared with."""
        data, lens = self.traced.declared(fixed=self.fixed)
        shape = ", ".join(str(d) for d in data)
        return f"{self.form} at [{shape}], lengths [{lens[0]}]"

    @functools.cached_property
    def identity(self) -> tuple[object, ...]:
        """What makes two probes one: the model, the signature, the kind, the dims."""
        return (_model_key(self.template), self.traced, self.kind, self.fixed)

    @functools.cached_property
    def size(self) -> int:
        """The nodes it runs, Constants aside."""
        return self.template.written

    @functools.cached_property
    def ops(self) -> frozenset[str]:
        """The op types and variants of its slots."""
        return frozenset(name for name, _, _ in self.slots)

    def kinds_named(self, names: Iterable[str]) -> frozenset[str]:
        """What the model's nodes of these names count as (a placement names nodes)."""
        named = set(names)
        nodes = _model(self).graph.node
        found = zip(nodes, node_kinds(self.template, self.traced.signature), strict=True)
        return frozenset(k for node, (_, kinds) in found if node.name in named for k in kinds)

    def model(self) -> onnx.ModelProto:
        """The form as a model reading ``x`` and ``lens``, its output ``y``."""
        return _model(self)

    def truth(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """What its model must return: the reversal itself (revseq's numpy reference).

        A form that reads no lengths (the whole reversal, ``reverse_all``) is written
        where every length reaches T: it reverses all of T.
        """
        layout, data, lens = self.traced.layout, feeds["x"], feeds["lens"]
        if self.form in (*_WHOLE_REVERSALS, REVERSE_ALL):
            lens = np.full_like(lens, data.shape[layout.time_axis])
        axes = {"batch_axis": layout.batch_axis, "time_axis": layout.time_axis}
        return [reverse_sequence(data, lens, **axes)]

    def sizes(self) -> tuple[tuple[int, int], ...]:
        """(T, B) sizes it runs at: the fixed one, or several with symbolic dims.

        Empty sequences and batches too where it holds a step that runtimes have
        mishandled on them (a Flatten, the lean index).
        """
        if not self.traced.dynamic or self.fixed:
            return (_STATIC_SIZE,)
        sizes = self.traced.sizes()
        if self.ops & _EMPTY_PROBED and self.traced.symbolic >= {_TIME, _BATCH}:
            return sizes + EMPTY_SIZES
        return sizes


_EMPTY_PROBED = frozenset({"Flatten", *LEAN_VARIANTS})
"""Steps runtimes have mishandled on empty data: one flattened [0, 3, 3] to [0, 9] and
divided by zero; the lean index reads dims straight from shapes."""


@functools.cache
def op_probes(lacking: frozenset[str] = frozenset()) -> tuple[OpProbe, ...]:
    """Every distinct form traced (``_traces``), as probe models.

    ``lacking``: the forms traced as for a target without these (what failed on a
    backend: its forms write their fallbacks there), those that asked about them.
    """
    found: list[OpProbe] = []
    seen: set[tuple[object, Traced]] = set()
    for trace, relied in _traces(lacking):
        key = (_model_key(trace.template), trace.traced)
        if key in seen:
            continue
        seen.add(key)
        on_path = _on_the_data_path(trace.template)
        moving: set[str] = set()
        still = set(relied)
        for node, kinds in node_kinds(trace.template, trace.sig):
            (moving if id(node) in on_path else still).update(_most_specific(kinds))
        layout = FORM_LAYOUTS.index(trace.traced.layout)
        twins = ((DYNAMIC, False), (STATIC, True)) if trace.traced.dynamic else ()
        twins = twins or ((STATIC, False),)
        context = (trace.form, layout)
        for kind, fixed in twins:
            slots: set[Slot] = {(name, kind, layout) for name in moving - _UNPROBED}
            slots |= {(name, kind, None) for name in still - moving - _UNPROBED - INDEX_TYPES}
            slots |= {(name, kind, context) for name in still & INDEX_TYPES}
            probe = OpProbe(
                trace.traced, trace.form, trace.template, kind, frozenset(slots),
                len(relied), fixed,
            )  # fmt: skip
            found.append(probe)
    return tuple(found)


def _most_specific(kinds: frozenset[str]) -> frozenset[str]:
    """What a node is a slot as: each variant, not what it is a variant of.

    A GatherND with ``batch_dims`` is ``GatherND:batch_dims`` (a runtime may get it
    wrong and plain GatherND right), a step -1 Slice of rank 5
    ``Slice:reverse:high_rank``, not ``Slice:reverse``.
    """
    return frozenset(k for k in kinds if not any(o.startswith(f"{k}:") for o in kinds))


def as_the_form_probes_run(probes: Iterable[OpProbe]) -> list[OpProbe]:
    """``probes``, each slot decided by the models traced as the form probes run forms.

    Where a model so traced (``Traced.canonical``) holds a slot, the others do not: a
    verdict stands for every use of an op, and the other signatures are traced for
    what they alone write (constant lengths, symbolic trailing dims, a fixed time).
    """
    probes = list(probes)
    held = {slot for p in probes if p.traced.canonical for slot in p.slots}
    kept = []
    for probe in probes:
        slots = probe.slots if probe.traced.canonical else probe.slots - held
        if slots:
            kept.append(dataclasses.replace(probe, slots=slots))
    return kept


def _on_the_data_path(template: Template) -> set[int]:
    """The nodes that move the data.

    Their first input is the data or made of it (a Shape's dims are not).
    """
    path, found = {id(template.data)}, set()
    for node in template.nodes:
        first = node.inputs[0] if node.inputs else None
        if first is not None and id(first) in path and node.op_type != "Shape":
            found.add(id(node))
            path.update(id(o) for o in node.outputs)
    return found


def _model(probe: OpProbe) -> onnx.ModelProto:
    data_dims, lens_dims = probe.traced.declared(fixed=probe.fixed)
    template = probe.template
    names = {id(template.data): "x", id(template.lengths): "lens"}
    nodes = []
    for node in template.nodes:
        output = f"v{len(names)}"
        names[id(node.outputs[0])] = output
        nodes.append(
            onnx.helper.make_node(
                node.op_type,
                [names[id(v)] if v is not None else "" for v in node.inputs],
                [output],
                name=output,  # placement logs name nodes: each needs its own
                **{a.name: _attribute_value(a.value) for a in node.attributes.values()},
            )
        )
    nodes[-1].output[0] = nodes[-1].name = "y"
    inputs = [
        onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, data_dims),
        onnx.helper.make_tensor_value_info("lens", int(probe.traced.lens_type), lens_dims),
    ]
    output = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, data_dims)
    graph = onnx.helper.make_graph(nodes, "probe", inputs, [output])
    return onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)], ir_version=9
    )


def _attribute_value(value: object) -> object:
    if isinstance(value, ir.Tensor):
        return onnx.numpy_helper.from_array(np.asarray(value.numpy()))
    return value


def probe_feeds(probe: OpProbe, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """The inputs a probe runs on: float32 data on float16's grid, lengths T, 0, 1, 2.

    Where the form was traced for constant lengths, those (what it reverses by).
    """
    rng = np.random.default_rng(seed)
    layout = probe.traced.layout
    lens_type = np.int32 if probe.traced.lens_type == ir.DataType.INT32 else np.int64
    found = []
    for time_len, batch in probe.sizes():
        pattern = probe.traced.constant or [time_len, 0, 1, min(2, time_len)]
        found.append(
            {
                "x": probe_floats(rng, layout.shape(time_len, batch)),
                "lens": np.array((list(pattern) * batch)[:batch], lens_type),
            }
        )
    return found
