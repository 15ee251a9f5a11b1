"""The op probes' models, cut from the forms' own traces.

Every form is emitted as the planner emits it (``templates.traced``) for each of
``SIGNATURES`` and for a series of capability sets: every op type and variant a form
may use; that set without the lean index, without int64 index arithmetic, or both;
and each of those without, one at a time, each capability the form asked about (so
that what a form writes where a target lacks something is traced too). A node of a
trace and every node it reads from, back to the data and the lengths, make a *cone*: a
model of the form's own nodes ending at that node.

An op type or variant is probed by cones ending at a node of that kind (of its most
specific kind: a GatherND with ``batch_dims`` certifies that variant, not GatherND); a
capability no node is (``Index:int32``, ``Mul:dim``, the lean index's steps, the int32
gathers) by whole forms that write something else without it. Each is decided per
``Slot``: shape kind, index type, and where it moves the data, the layout. A symbolic
trace's models also run with their dims fixed (for static shapes: a runtime may fix the
dims at load). A slot's candidates are tried smallest first, each only where what else
it holds ran exactly (:func:`revseq.probe._runs.run_op_probes`), so that a failure is
the slot's own.
"""

from __future__ import annotations

__all__ = ["OUTPUT_CAST", "SIGNATURES", "OpProbe", "Slot", "op_candidates", "probe_feeds"]

import dataclasses
import functools
from collections.abc import Iterator

import numpy as np
import onnx
import onnx.shape_inference
import onnx_ir as ir

from revseq.errors import StrategyError
from revseq.ops import forms
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
    capabilities: frozenset[str]
    asked: frozenset[str]

    @property
    def index(self) -> str:
        """The index arithmetic's type: int32 where int64 is not there to be had."""
        caps = self.capabilities
        return "int32" if INT32_INDEX in caps and INT64_INDEX not in caps else "int64"


def _trace(traced_as: Traced, form: str, capabilities: frozenset[str] | None) -> _Trace | None:
    """``form`` as the planner emits it for ``capabilities``, or None where it lacks.

    ``capabilities`` None: any op type (but no option a target must list).
    """
    asked = None if capabilities is None else _asking(capabilities)
    sig = dataclasses.replace(traced_as.signature, allowed=asked)
    try:  # not the planner's cache: it would answer without asking
        if form == _WHOLE:
            template = Template.record(
                lambda op, x, lens: forms.reverse_whole(op, x, lens, sig)
            )
            lacks = template.lacks
        else:
            template, lacks = traced.__wrapped__(sig, form)  # type: ignore[attr-defined]
    except StrategyError:
        return None
    if lacks:
        return None
    plain = dataclasses.replace(sig, allowed=capabilities)
    found = frozenset() if asked is None else frozenset(asked.asked)
    return _Trace(traced_as, form, plain, template, capabilities or frozenset(), found)


_WHOLE = "Slice"
"""A node whose lengths all reach T, as inline writes it (``forms.reverse_whole``)."""

_TRACED_FORMS = (*forms.FORMS, REVERSE_ALL, SLICES, _WHOLE)
"""What the op probes come from: every form the planner may take but the one-hot form,
which is for the finite domain alone and probed end to end there, and the whole
reversal inline writes by itself."""

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


@dataclasses.dataclass(frozen=True)
class _Reliance:
    """The capabilities a trace relies on that no node of it is, and the cones they shape.

    A capability shapes a cone that the form without it does not write (``without``:
    the cone keys of the form without it, None where it lacks).
    """

    relied: frozenset[str]
    without: dict[str, frozenset[object] | None]

    def of(self, cone: object) -> frozenset[str]:
        """What the cone with this key relies on (the index type aside: its slot's)."""
        return frozenset(
            name
            for name in self.relied - _INDEX_TYPES
            if (keys := self.without.get(name)) is None or cone not in keys
        )


_INDEX_TYPES = frozenset({INT32_INDEX, INT64_INDEX})


def _traces(lacking: frozenset[str]) -> Iterator[tuple[_Trace, _Reliance, bool]]:
    """Each trace, what it relies on, and whether it is a root.

    A root's every capability was taken away in turn.

    A capability a form asked about is relied on where the form writes something else
    without it, or cannot be written at all. A trace without one relies on what the
    trace it came from did, but that one, where it still asked about them. Every
    capability set is without ``lacking``.
    """
    for traced_as in SIGNATURES:
        for form in _TRACED_FORMS:
            roots = _roots(_everything() - lacking)
            seen = set(roots)
            for root in roots:
                whole = _trace(traced_as, form, root)
                if whole is None:
                    continue
                used, fewer, keys = set(), [], {}
                for name in sorted(whole.asked & root):
                    without = _trace(traced_as, form, root - {name})
                    keys[name] = (
                        None
                        if without is None
                        else frozenset(_cone_keys(without.template).values())
                    )
                    if without is None or _shape_of(without.template) != _shape_of(
                        whole.template
                    ):
                        used.add(name)
                    if without is not None and root - {name} not in seen:
                        seen.add(root - {name})
                        fewer.append((name, without))
                relied = frozenset(used - _kinds_of(whole) - _NEVER_EMITTED - _DATA_VARIANTS)
                reliance = _Reliance(relied, {n: keys[n] for n in relied})
                yield whole, reliance, True
                for name, without in fewer:
                    kept = (relied - {name}) & without.asked
                    yield without, _Reliance(kept, reliance.without), False


def _cone(template: Template, node: ir.Node) -> list[ir.Node]:
    """``node`` and every node it reads from in ``template``, in the template's order."""
    needed = {id(node)}
    for candidate in reversed(template.nodes):
        if id(candidate) in needed:
            needed.update(
                id(p) for v in candidate.inputs if v is not None and (p := v.producer())
            )
    return [n for n in template.nodes if id(n) in needed]


@functools.lru_cache(maxsize=4096)
def _cone_keys(template: Template) -> dict[int, object]:
    """For each node's value, what makes its cone a model of its own.

    The node's op and attributes, and the same of what it reads, back to the data and
    the lengths.
    """
    keys: dict[int, object] = {id(template.data): "x", id(template.lengths): "lens"}
    for node in template.nodes:
        attributes = tuple(
            sorted((a.name, _attribute_key(a.value)) for a in node.attributes.values())
        )
        inputs = tuple(None if v is None else keys[id(v)] for v in node.inputs)
        keys[id(node.outputs[0])] = (node.op_type, attributes, inputs)
    return keys


def _shape_of(template: Template) -> object:
    """What makes two whole templates the same model (``_cone_keys``)."""
    return _cone_keys(template)[id(template.nodes[-1].outputs[0])]


def _attribute_key(value: object) -> object:
    if isinstance(value, ir.Tensor):
        array = value.numpy()
        return (array.dtype.str, array.shape, array.tobytes())
    return tuple(value) if isinstance(value, list) else value


@dataclasses.dataclass(frozen=True)
class OpProbe:
    """One probe model, cut from a trace, and what it certifies.

    Attributes:
        name: What it probes, as its results name it.
        certifies: The op types and variants it certifies.
        kind: ``static`` or ``dynamic``: the shapes its verdict stands for.
        index: The index arithmetic's type in the trace it comes from.
        others: The op types and variants of its other nodes that probes decide: it is
            run only where each of these ran exactly, so that its failure is its own.
        model: The model, its output cast to float32 where ``float_output`` asks.
        traced: The signature it was traced for.
        form: The form it is cut from.
        relies: The capabilities (no node's kind) its trace relies on for it: the
            lean index's steps, the index in place. A model that relies on fewer is
            tried first: a backend that runs a gather and the lean index each exactly
            may run them together wrong, and the planner takes options by timing.
        fixed: Whether a symbolic trace's dims are declared at the fixed size.
        layout: Where it moves the data (its end node is on the data's way to the
            output), the form layout it does so in (an index of ``FORM_LAYOUTS``): a
            runtime may move data of one shape right and of another wrong (one
            reversed rank 4 wrong only with a dim of 1), so each layout is probed.
    """

    name: str
    certifies: tuple[str, ...]
    kind: str
    index: str
    others: frozenset[str]
    nodes: tuple[ir.Node, ...]
    template: Template
    traced: Traced
    form: str = ""
    relies: frozenset[str] = frozenset()
    fixed: bool = False
    layout: int | None = None

    @property
    def where(self) -> str:
        """Its name, the form it comes from and the dims it is declared with."""
        data, lens = self.traced.declared(fixed=self.fixed)
        shape = ", ".join(str(d) for d in data)
        return f"{self.name} in {self.form} at [{shape}], lengths [{lens[0]}]"

    @property
    def whole(self) -> bool:
        """Whether it probes a capability: a whole form, not a cone ending at a node."""
        return self.certifies[0] not in _node_kinds_of(self)

    @property
    def slot(self) -> Slot:
        """What it decides (``Slot``)."""
        return (self.certifies[0], self.kind, self.index, self.fixed, self.layout)

    @property
    def size(self) -> int:
        """The nodes it runs, Constants aside."""
        return sum(n.op_type != "Constant" for n in self.nodes)

    def model(self, *, float_output: bool = True) -> onnx.ModelProto:
        """The cone as a model reading ``x`` and ``lens``, its end node's value as ``y``.

        With ``float_output``, an integer or boolean result leaves as float32 (exact for
        these small values): a runtime may keep shape arithmetic as symbolic dims, which
        its Python API cannot hand back. Not on a backend that reports placement: there
        the Cast itself would be the CPU fallback the probe saw.
        """
        return _model(self, float_output=float_output)

    def sizes(self) -> tuple[tuple[int, int], ...]:
        """(T, B) sizes it runs at: the fixed one, or several with symbolic dims.

        Empty sequences and batches too where it probes a step that runtimes have
        mishandled on them (a Flatten, the lean index).
        """
        if not self.traced.dynamic or self.fixed:
            return (_STATIC_SIZE,)
        sizes = self.traced.sizes()
        if set(self.certifies) & _EMPTY_PROBED and self.traced.symbolic >= {_TIME, _BATCH}:
            return sizes + EMPTY_SIZES
        return sizes


OUTPUT_CAST = "y"
"""The name of the Cast that makes an integer or boolean result float32."""

_EMPTY_PROBED = frozenset({"Flatten", *LEAN_VARIANTS})
"""Steps runtimes have mishandled on empty data: one flattened [0, 3, 3] to [0, 9] and
divided by zero; the lean index reads dims straight from shapes."""


def _model(probe: OpProbe, *, float_output: bool) -> onnx.ModelProto:
    data_dims, lens_dims = probe.traced.declared(fixed=probe.fixed)
    template = probe.template
    names = {id(template.data): "x", id(template.lengths): "lens"}
    nodes = []
    for node in probe.nodes:
        output = f"v{len(names)}"
        names[id(node.outputs[0])] = output
        nodes.append(
            onnx.helper.make_node(
                node.op_type,
                [names[id(v)] if v is not None else "" for v in node.inputs],
                [output],
                name=output,
                **{a.name: _attribute_value(a.value) for a in node.attributes.values()},
            )
        )
    # Both inputs, read or not, as a backend is handed them.
    inputs = [
        onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, data_dims),
        onnx.helper.make_tensor_value_info("lens", int(probe.traced.lens_type), lens_dims),
    ]
    last = nodes[-1].output[0]
    graph = onnx.helper.make_graph(
        nodes, "probe", inputs, [onnx.helper.make_tensor_value_info(last, 0, None)]
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)], ir_version=9
    )
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in (*inferred.graph.value_info, *inferred.graph.output)}
    result = types.get(last)
    if result is None or not result.tensor_type.elem_type:
        raise ValueError(f"probe {probe.name}: no output type")
    output = model.graph.output[0]
    output.type.CopyFrom(result)
    if float_output and result.tensor_type.elem_type != onnx.TensorProto.FLOAT:
        cast = onnx.helper.make_node(
            "Cast", [last], [OUTPUT_CAST], name=OUTPUT_CAST, to=onnx.TensorProto.FLOAT
        )
        model.graph.node.append(cast)
        output.name = OUTPUT_CAST
        output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    return model


def _attribute_value(value: object) -> object:
    if isinstance(value, ir.Tensor):
        return onnx.numpy_helper.from_array(np.asarray(value.numpy()))
    return value


def probe_feeds(probe: OpProbe, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """The inputs a probe runs on: float32 data on float16's grid, lengths T, 0, 1, 2."""
    rng = np.random.default_rng(seed)
    layout = probe.traced.layout
    lens_type = np.int32 if probe.traced.lens_type == ir.DataType.INT32 else np.int64
    found = []
    for time_len, batch in probe.sizes():
        pattern = [time_len, 0, 1, min(2, time_len)]
        found.append(
            {
                "x": probe_floats(rng, layout.shape(time_len, batch)),
                "lens": np.array((pattern * batch)[:batch], lens_type),
            }
        )
    return found


_INDEX_OF = {INT32_INDEX: "int32", INT64_INDEX: "int64"}
"""The index arithmetic's variants, each probed in its own type whatever the trace's."""


def _probes(
    name: str,
    trace: _Trace,
    nodes: list[ir.Node],
    others: frozenset[str],
    relies: frozenset[str],
    *,
    moves_data: bool = False,
) -> tuple[OpProbe, ...]:
    """The probes of ``name`` by ``nodes`` of ``trace``.

    As traced, and a symbolic trace also with its dims fixed (for static shapes); per
    layout where ``moves_data``.
    """
    index = _INDEX_OF.get(name, trace.index)  # the index arithmetic's own type
    label = name if index == "int64" or name in _INDEX_OF else f"{name} [{index} index]"
    common = dict(
        name=label,
        certifies=(name,),
        index=index,
        others=others - {name},
        relies=relies,
        nodes=tuple(nodes),
        template=trace.template,
        traced=trace.traced,
        form=trace.form,
        layout=FORM_LAYOUTS.index(trace.traced.layout) if moves_data else None,
    )
    if not trace.traced.dynamic:
        return (OpProbe(kind=STATIC, **common),)
    twin = {**common, "layout": None}  # the static trace's probe covers each layout
    return (OpProbe(kind=DYNAMIC, **common), OpProbe(kind=STATIC, fixed=True, **twin))


def _most_specific(kinds: frozenset[str]) -> frozenset[str]:
    """The kinds a node's model certifies: each variant, not what it is a variant of.

    A GatherND with ``batch_dims`` is probed as ``GatherND:batch_dims`` (a runtime may
    get it wrong and plain GatherND right), a step -1 Slice of rank 5 as
    ``Slice:reverse:high_rank``, not ``Slice:reverse``.
    """
    return frozenset(k for k in kinds if not any(o.startswith(f"{k}:") for o in kinds))


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


def _node_kinds_of(probe: OpProbe) -> frozenset[str]:
    """What the node a probe ends at counts as."""
    last = probe.nodes[-1]
    kinds = dict((id(n), k) for n, k in node_kinds(probe.template, probe.traced.signature))
    return kinds.get(id(last), frozenset())


def _kinds_of(trace: _Trace) -> frozenset[str]:
    return frozenset(k for _, kinds in node_kinds(trace.template, trace.sig) for k in kinds)


Slot = tuple[str, str, str, bool, "int | None"]
"""What one probe decides: (op type or variant, shape kind, index type, whether a
symbolic trace's fixed twin, the layout where it moves the data)."""


def _preference(probe: OpProbe) -> tuple[int, int, int, int]:
    """The order a slot's candidates are tried in.

    The one that relies on fewer capabilities first (``OpProbe.relies``), then a
    capability's from a trace with time and batch symbolic first, where one is (a form
    computes its index at run time there: with a static time it reads a table,
    whatever the capability), then the smaller.
    """
    whole = len(probe.nodes) == len(probe.template.nodes)  # a capability's, or a gather's
    general = probe.traced.symbolic >= {_TIME, _BATCH}
    return (len(probe.relies), 0 if general or not whole else 1, probe.size, len(probe.others))


@functools.cache
def op_candidates(lacking: frozenset[str] = frozenset()) -> dict[Slot, tuple[OpProbe, ...]]:
    """Every op probe there is to run, per slot, in the order they are tried.

    ``lacking``: the forms traced as for a target without these (what failed on the
    backend: its forms write their fallbacks, whose probes are then free of them).

    An op type or variant that some node is: each distinct cone ending at such a node.
    A capability no node is: each whole form that writes something else without it. A
    symbolic trace's probe also runs with its dims fixed (for static shapes); a static
    trace's only there. The probe run for a slot is the first whose other op types and
    variants all ran exactly (:func:`revseq.probe._runs.run_op_probes`), so that a
    failure is the slot's own.
    """
    found: dict[Slot, list[OpProbe]] = {}
    seen: set[tuple[object, ...]] = set()  # cones
    wholes: set[tuple[object, ...]] = set()  # whole forms
    for trace, reliance, root in _traces(lacking):
        kinds = node_kinds(trace.template, trace.sig)
        cones = _cone_keys(trace.template)
        on_path = _on_the_data_path(trace.template)
        for node, node_kinds_ in kinds:
            if node.op_type == "Constant":
                continue
            cone = cones[id(node.outputs[0])]
            key = (cone, trace.traced, trace.index)
            if key in seen:
                continue
            seen.add(key)
            nodes = _cone(trace.template, node)
            inside = {id(n) for n in nodes if n is not node}
            below = frozenset(k for n, ks in kinds if id(n) in inside for k in ks)
            moves = id(node) in on_path
            relies = reliance.of(cone)
            for name in sorted(_most_specific(node_kinds_ - _DERIVED)):
                for probe in _probes(
                    name, trace, nodes, below | relies, relies, moves_data=moves
                ):
                    found.setdefault(probe.slot, []).append(probe)
        every = frozenset(k for _, ks in kinds for k in ks)
        key = (_shape_of(trace.template), trace.traced, trace.index)
        if root and reliance.relied and key not in wholes:
            wholes.add(key)
            relies = reliance.relied - _INDEX_TYPES
            for name in sorted(reliance.relied - _DERIVED):
                whole = list(trace.template.nodes)
                for probe in _probes(name, trace, whole, every | relies, relies - {name}):
                    found.setdefault(probe.slot, []).append(probe)
    probed = {slot[0] for slot in found}
    order = sorted(found, key=lambda slot: (*slot[:4], -1 if slot[4] is None else slot[4]))
    return {slot: _undominated(found[slot], probed) for slot in order}


def _undominated(probes: list[OpProbe], probed: set[str]) -> tuple[OpProbe, ...]:
    """``probes`` in the order tried, without those that could never be run.

    One that holds all another tried before it holds is dropped: whatever blocks that
    one blocks it. Where some were traced as the form probes run the forms
    (``Traced.canonical``), only those: a verdict stands for every use of an op, and
    the other signatures are traced for the ops and fallbacks they alone write.
    """
    canonical = [p for p in probes if p.traced.canonical]
    # A capability with symbolic dims, where a form computes its index at run time:
    # with a static time it reads a table, whatever the capability.
    general = [p for p in canonical if p.traced.symbolic >= {_TIME, _BATCH}]
    if not (probes and probes[0].whole and probes[0].kind == DYNAMIC and general):
        general = canonical
    kept: list[OpProbe] = []
    for probe in sorted(general or probes, key=_preference):
        others = probe.others & probed
        if not any(k.others <= others for k in kept):
            kept.append(dataclasses.replace(probe, others=others))
    return tuple(kept)
