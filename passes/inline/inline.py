"""Inline pass: replace every ReverseSequence node with a decomposition into standard ops."""

from __future__ import annotations

__all__ = ["InlineReverseSequencePass"]

import dataclasses
import logging

import onnx
import onnx.version_converter
import onnx_ir as ir

from revseq.errors import UnsupportedOpsetError, one_line
from revseq.ops import forms
from revseq.ops.targets import Target, resolve_target
from revseq.ops.vocabulary import (
    DOMAIN_KEY,
    FINITE,
    FINITE_DOMAIN,
    FUNCTION_DOMAIN,
    INT64_INDEX,
    ONE_HOT,
)
from revseq.passes.graph.builder import gc_paused
from revseq.passes.graph.index_sharing import IndexSharing
from revseq.passes.graph.names import NameSource, Survey
from revseq.passes.graph.reverse_sequence import (
    DECOMPOSITION_MIN_OPSET,
    REVSEQ_DOMAIN,
    int32_source,
    remove_if_dead,
    signature_of,
    validate_all,
)
from revseq.passes.graph.scopes import ScopedNode, constants_graph, opset_version, walk
from revseq.passes.graph.shapes import ShapeTable
from revseq.passes.inline import planner as _planner
from revseq.passes.inline.planner import Plan
from revseq.passes.inline.simplify import batch_leading, replace_trivial, trivial_form
from revseq.passes.inline.templates import recorded

logger = logging.getLogger(__name__)

"""Domain of the model-local functions emitted with ``as_function=True``."""


class InlineReverseSequencePass(ir.passes.InPlacePass):
    """Replace every ReverseSequence (ONNX and ``revseq`` domain) with standard ops.

    Nodes are replaced in the main graph, in If/Loop/Scan bodies at any depth and in
    model-local functions. Everything else is left as it was. A model at opset 10 is
    converted to opset 11 first, since the decomposition needs Range and GatherElements.

    Attributes:
        strategy: A name in ``revseq.STRATEGIES``; "auto" picks the fastest form that fits
            each node.
        as_function: Emit each distinct decomposition once as a model-local function
            (domain ``revseq.inline``) and replace nodes with calls to it.
        simplify: First replace trivial nodes (lengths all <= 1, or all the full
            length) by Identity or a step -1 Slice; see ``SimplifyReverseSequencePass``.
        target: The profile of the backend the output is for (``revseq.ops.targets``):
            a profile name, op types, or None: ``portable`` (runs on every probed
            backend) for strategy "auto", ``any`` for a strategy named explicitly.
        share: Compute the index once for the nodes of a graph that reverse with the
            same lengths over provably equal dims (``revseq.passes.graph.index_sharing``).
    """

    def __init__(
        self,
        *,
        strategy: str = "auto",
        as_function: bool = False,
        target: Target = None,
        simplify: bool = True,
        share: bool = True,
    ) -> None:
        super().__init__()
        forms.check_strategy(strategy)
        self.strategy = strategy
        self.as_function = as_function
        # No target: "auto" emits the portable output; a form the caller names is
        # emitted for any standard runtime unless a target constrains it too.
        self.target = resolve_target(
            target if target is not None or strategy == "auto" else "any"
        )
        self.simplify = simplify
        self.share = share

    def requires(self, model: ir.Model) -> None:
        """Validate every ReverseSequence node before anything is rewritten."""
        validate_all(walk(model))

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Replace the nodes; ``modified`` is False when the model has none."""
        with gc_paused():
            return self._inline_all(model)

    def _plan(self, scoped: ScopedNode, shapes: ShapeTable) -> Plan:
        """What a node becomes: a form, or "Identity" or "Slice"."""
        opset = opset_version(scoped.owner, "") or DECOMPOSITION_MIN_OPSET
        sig = signature_of(scoped, opset=opset, shapes=shapes)
        if self.simplify:
            trivial = trivial_form(scoped, sig, shapes)
            if trivial is not None and _planner.runs_trivial(
                trivial, sig, self.target, scoped.node
            ):
                return Plan(sig, trivial)
            if trivial is not None:  # a full reversal the target's Slice cannot run
                reversal = _planner.reversal_plan(sig, self.target)
                if reversal is not None:
                    return reversal
        if opset < DECOMPOSITION_MIN_OPSET:
            raise UnsupportedOpsetError(
                f"{scoped.scope} imports opset {opset}; the decomposition needs opset "
                f">= {DECOMPOSITION_MIN_OPSET} and only the main graph is converted"
            )
        plan = _planner.plan(self.strategy, sig, scoped, self.target)
        # A target that computes its index in int32 reads int32 lengths cast to int64
        # as they were (see int32_source).
        source = int32_source(scoped.node.inputs[1])
        if source is None or plan.sig.target_has(INT64_INDEX) or sig.lens is not None:
            return plan
        narrowed = dataclasses.replace(sig, lens_dtype=ir.DataType.INT32)
        plan = _planner.plan(self.strategy, narrowed, scoped, self.target)
        return dataclasses.replace(plan, lengths=source)

    def _inline_all(self, model: ir.Model) -> ir.passes.PassResult:
        survey = Survey(model)
        if not survey.targets:
            return ir.passes.PassResult(model, modified=False)
        if _needs_upgrade(model):
            _convert_opset(model, DECOMPOSITION_MIN_OPSET, "which the decomposition needs")
            survey = Survey(model)
        limit = self.target.opset_limit
        if limit is not None and (opset_version(model.graph, "") or 0) > limit:
            _convert_opset(model, limit, f"the latest {self.target.name} reads")
            survey = Survey(model)

        targets, names = survey.targets, survey.names
        shapes = ShapeTable.where_needed(model, [s.node for s in targets])
        # Decide every node before changing any, so that a node no form fits leaves the
        # model as it was.
        plans = [self._plan(scoped, shapes) for scoped in targets]
        plans = _lengths_as_floats(model, targets, plans)
        functions: dict[tuple, ir.Function] = {}
        sharing: dict[int, IndexSharing] = {}  # by graph
        for scoped, plan in zip(targets, plans, strict=True):
            if plan.template is None:  # a trivial node: Identity or Slice
                replace_trivial(
                    scoped,
                    plan.replacement,
                    plan.sig.time_axis,
                    names.prefix_for(scoped.node),
                    weights=constants_graph(model, scoped),
                    leading=batch_leading(plan.sig, self.target, scoped.node)
                    if plan.replacement == "Slice"
                    else None,
                )
                continue
            if self.as_function:
                _replace_with_call(model, scoped, plan.for_function(), functions, names)
                continue
            graph_sharing = (
                sharing.setdefault(id(scoped.node.graph), IndexSharing(shapes))
                if self.share
                else None
            )
            _replace_with_template(
                scoped,
                plan,
                names.prefix_for(scoped.node),
                graph_sharing,
                weights=constants_graph(model, scoped),
            )
        shared = sum(s.shared for s in sharing.values())
        if shared:
            logger.info("shared %d index node(s) between decompositions", shared)
        if not survey.other_revseq_nodes:
            _drop_revseq_import(model)
        if any(plan.replacement == ONE_HOT for plan in plans):
            model.metadata_props[DOMAIN_KEY] = FINITE
        logger.info("inlined %d ReverseSequence node(s)", len(targets))
        return ir.passes.PassResult(model, modified=True)


def _lengths_as_floats(
    model: ir.Model, targets: list[ScopedNode], plans: list[Plan]
) -> list[Plan]:
    """``plans``, with the integer lengths inputs that only ``ONE_HOT`` reads made float32.

    A runtime that computes in float32 alone reads an integer input's bits as a
    float: it is fed the lengths as float32 values instead. Such an input of the main
    graph, read by those nodes alone (directly, or through a Cast of int32 to int64, as
    exporters cast TensorFlow's lengths), changes type (the model's interface:
    ``revseq check`` feeds each model its inputs' declared types), and the nodes read it
    without a Cast.
    """
    one_hot = {
        id(s.node) for s, p in zip(targets, plans, strict=True) if p.replacement == ONE_HOT
    }
    if not one_hot:  # every other target: nothing to look at
        return plans

    def source(node: ir.Node) -> ir.Value:
        lens = node.inputs[1]
        assert lens is not None
        return int32_source(lens) or lens

    def only_one_hot(value: ir.Value) -> bool:
        uses = [node for node, _ in value.uses()]
        return bool(uses) and all(
            id(node) in one_hot
            or (int32_source(node.outputs[0]) is value and only_one_hot(node.outputs[0]))
            for node in uses
        )

    reads = [source(s.node) for s in targets]  # before any input changes type
    retyped = set()
    for value in model.graph.inputs:
        integer = value.dtype is not None and value.dtype.is_integer()
        if integer and only_one_hot(value):
            value.type = ir.TensorType(ir.DataType.FLOAT)
            retyped.add(id(value))
            logger.warning(
                "input %r is now float32: the target reads lengths as floats (its "
                "output is exact on %s only)",
                value.name,
                FINITE_DOMAIN,
            )
    replanned = []
    for read, plan in zip(reads, plans, strict=True):
        if plan.replacement != ONE_HOT or id(read) not in retyped:
            replanned.append(plan)
            continue
        sig = dataclasses.replace(plan.sig, lens_dtype=ir.DataType.FLOAT)
        template = recorded(sig, ONE_HOT)
        replanned.append(dataclasses.replace(plan, sig=sig, template=template, lengths=read))
    return replanned


def _needs_upgrade(model: ir.Model) -> bool:
    version = opset_version(model.graph, "")
    return version is not None and version < DECOMPOSITION_MIN_OPSET


def _convert_opset(model: ir.Model, target: int, why: str) -> None:
    """Convert the model to opset ``target`` with onnx's version converter, in place.

    Up to the opset the decomposition needs, or down to the latest a target's converter
    reads (``Profile.opset_limit``); ``why`` says which, in the refusal.
    """
    version = opset_version(model.graph, "")
    try:
        proto = onnx.version_converter.convert_version(ir.to_proto(model), target)
    except Exception as e:
        raise UnsupportedOpsetError(
            f"the model is at opset {version} and onnx's version converter could not "
            f"convert it to opset {target}, {why}: {one_line(e)}"
        ) from e
    converted = ir.from_proto(proto)
    model.graph = converted.graph
    model.ir_version = max(model.ir_version, converted.ir_version)
    logger.info("converted the model from opset %s to %d (%s)", version, target, why)


def _replace_with_template(
    scoped: ScopedNode,
    plan: Plan,
    prefix: str,
    sharing: IndexSharing | None,
    *,
    weights: ir.Graph | None,
) -> None:
    node = scoped.node
    data, lens = node.inputs
    assert data is not None and lens is not None and plan.template is not None
    read = plan.lengths or lens
    nodes, output = plan.template.instantiate(prefix, data, read, sharing, weights=weights)
    container = node.graph
    assert container is not None
    ir.convenience.replace_nodes_and_values(
        container, node, [node], nodes, list(node.outputs), [output]
    )
    remove_if_dead(lens)  # constant lengths are folded into the index


def _replace_with_call(
    model: ir.Model,
    scoped: ScopedNode,
    plan: Plan,
    functions: dict[tuple, ir.Function],
    names: NameSource,
) -> None:
    """Replace the node by a call to a model-local function holding the decomposition."""
    key = (plan.replacement, plan.sig)
    function = functions.get(key)
    if function is None:
        function = _build_function(plan, name=names.function_name(plan.replacement))
        functions[key] = function
        model.functions[function.identifier()] = function
        model.opset_imports.setdefault(FUNCTION_DOMAIN, 1)
    # A call inside a model-local function needs the import in that function too.
    scoped.owner.opset_imports.setdefault(FUNCTION_DOMAIN, 1)
    node = scoped.node
    data, lens = node.inputs
    assert lens is not None
    call = ir.Node(
        FUNCTION_DOMAIN,
        function.name,
        [data, plan.lengths or lens],
        num_outputs=1,
        name=node.name,
        doc_string=node.doc_string,
    )
    container = node.graph
    assert container is not None
    ir.convenience.replace_nodes_and_values(
        container, node, [node], [call], list(node.outputs), list(call.outputs)
    )
    remove_if_dead(lens)


def _build_function(plan: Plan, *, name: str) -> ir.Function:
    """A function ``name(input, sequence_lens) -> Y`` whose body replays the plan's form."""
    assert plan.template is not None
    sig = plan.sig
    data = ir.Value(name="input", type=ir.TensorType(sig.dtype) if sig.dtype else None)
    lens = ir.Value(
        name="sequence_lens", type=ir.TensorType(sig.lens_dtype) if sig.lens_dtype else None
    )
    nodes, output = plan.template.instantiate(name, data, lens)
    output.name = "Y"
    graph = ir.Graph(
        [data, lens], [output], nodes=nodes, opset_imports={"": sig.opset}, name=name
    )
    return ir.Function(FUNCTION_DOMAIN, name, graph=graph, attributes=[])


def _drop_revseq_import(model: ir.Model) -> None:
    """Remove the ``revseq`` opset import: no node of that domain is left."""
    model.graph.opset_imports.pop(REVSEQ_DOMAIN, None)
    for function in model.functions.values():
        function.opset_imports.pop(REVSEQ_DOMAIN, None)
