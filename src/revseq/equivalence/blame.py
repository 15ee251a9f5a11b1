"""Where two whole models part: the first tensor that differs, and which node wrote it.

A whole-model difference names an output; a user needs the node. Every value both
models compute in their main graphs (the model's own nodes keep their names through
inlining; a decomposition writes its node's output name) is marked as an output, both
models run on the inputs the difference was found on, and the values are compared in
the candidate's order (ONNX's graphs are sorted), as polygraphy's ``--mark all`` does.
The first that differs was written either by a decomposition revseq wrote (the
reference computes it with a ReverseSequence) or by one of the model's own nodes.
"""

from __future__ import annotations

__all__ = [
    "AMBIGUOUS",
    "OWN",
    "REVSEQ",
    "Located",
    "fails_alike",
    "first_differing_tensor",
    "refused_op",
    "without_reversals",
]

import dataclasses
import re

import numpy as np
import onnx
import onnx_ir as ir
from onnx_ir.passes.common import IdentityEliminationPass, RemoveUnusedNodesPass

from revseq.equivalence._runners import Engine, Runner, fed_as_declared, runners
from revseq.equivalence.inputs import Inputs
from revseq.equivalence.reports import first_difference, first_difference_beyond
from revseq.errors import one_line

_SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan"})
AMBIGUOUS = "written by revseq, and the model's own too"
"""An op type both revseq's decompositions and the model's own nodes use."""


@dataclasses.dataclass(frozen=True)
class Located:
    """Where two whole models part, said whole, and who wrote the value there.

    Attributes:
        text: What was found, for a report.
        writer: ``REVSEQ`` (a decomposition revseq wrote, or restored), ``OWN`` (one of
            the model's own nodes), or None where nothing said whose; where no tensor
            inside differs, what the model without its reversals does says it.
        dtype: The element type of the tensor that differs, where one does.
    """

    text: str
    writer: str | None = None
    dtype: str | None = None

    def __str__(self) -> str:
        return self.text


REVSEQ = "revseq"
OWN = "own"


def first_differing_tensor(
    ref: onnx.ModelProto,
    cand: onnx.ModelProto,
    feeds: Inputs,
    engine: Engine,
    tolerance: tuple[float, float] | None,
) -> Located:
    """The first value of ``cand`` that differs from ``ref``'s on ``feeds``, said whole.

    ``ref`` runs in onnxruntime, ``cand`` on ``engine``; values are compared within
    ``tolerance`` (rtol, atol), or bit for bit where it is None. A value the runtime
    does not give back (an empty object, as some runtimes give) is no difference: it
    is skipped, and the report says how many were.
    """
    shared = _shared_values(ref, cand)
    try:
        try:
            got = _run_marked(cand, shared, feeds, engine)
        except Exception:  # a runtime that gives back no shape values (symbolic dims)
            shared = _float_values(cand, shared)
            got = _run_marked(cand, shared, feeds, engine)
        expected = _run_marked(ref, shared, feeds, None)
    except Exception as e:  # a runtime that cannot give back intermediate values
        alike = _differs_alike(ref, feeds, engine, tolerance)
        return Located(
            f"the tensors inside could not be compared on {engine.label} "
            f"({one_line(e, 100, typed=True)}); {alike}",
            alike.writer,
        )
    writers = {out: node for node in ref.graph.node for out in node.output}
    ours = _written_by_revseq(ref, cand)
    skipped: list[str] = []
    for node in cand.graph.node:
        for name in node.output:
            if name not in shared:
                continue
            if not _given_back(expected[name], got[name]):
                skipped.append(name)
                continue
            if _same_integers(expected[name], got[name]):
                continue
            difference = _difference(expected[name], got[name], tolerance)
            if difference is None:
                continue
            writer = writers[name]
            restored = node.op_type == "ReverseSequence" != writer.op_type
            ours_too = (
                writer.op_type == "ReverseSequence"
                or restored
                or node.op_type != writer.op_type
                or tuple(node.output) in ours
                or (writer.op_type in _SUBGRAPH_OPS and _holds_reversal(writer))
            )
            who = f"revseq's restored ReverseSequence {node.name!r}" if restored else None
            return Located(
                f"first differing tensor {name!r}, written by {who or _writer(writer)}, "
                f"{difference.where}: reference {difference.expected!r}, candidate "
                f"{difference.got!r}{_skipped(skipped, engine)}",
                REVSEQ if ours_too else OWN,
                np.asarray(expected[name]).dtype.name,
            )
    # Marked as outputs, the runtime may compute otherwise (fuse less, round alike).
    alike = _differs_alike(ref, feeds, engine, tolerance)
    return Located(
        f"no tensor inside differs where both models compute it, each marked as an "
        f"output{_skipped(skipped, engine)}; {alike}",
        alike.writer,
    )


def _float_values(model: onnx.ModelProto, names: list[str]) -> list[str]:
    """Those of ``names`` that hold floats: where a model's arithmetic rounds."""
    types = _value_types(model)
    floats = {
        onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
    }  # fmt: skip
    return [n for n in names if n in types and types[n].type.tensor_type.elem_type in floats]


def _given_back(expected: object, got: object) -> bool:
    """Whether the runtime gave the value back (an ``object []`` is no value).

    An empty array of numbers is a value, and a wrong one where the reference's is not.
    """
    return not (np.asarray(got).dtype == object and np.asarray(expected).dtype != object)


def _same_integers(expected: object, got: object) -> bool:
    """Whether the runtime gave back the same integers in another integer type.

    A runtime's Shape may give int32 where ONNX's gives int64, or it may hold int64 in
    32 bits: inside a model that is how the runtime holds the value, not where it begins
    to differ (an output in another type is still a difference, found by the outputs'
    comparison).
    """
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.dtype == got.dtype or not {expected.dtype.kind, got.dtype.kind} <= set("iu"):
        return False
    if expected.shape != got.shape:
        return False
    if "uint64" in (expected.dtype.name, got.dtype.name):  # no common type holds both
        return expected.astype(object).tolist() == got.astype(object).tolist()
    return bool(np.array_equal(expected, got))


def _skipped(names: list[str], engine: Engine) -> str:
    if not names:
        return ""
    return (
        f" ({len(names)} tensor(s) before it not given back by {engine.label}, "
        f"not compared: {names[0]!r} first)"
    )


def refused_op(text: str, ref: onnx.ModelProto, cand: onnx.ModelProto) -> str | None:
    """Which op of ``cand`` a runtime's message names, and whether revseq wrote it.

    A node named in quotes (as runtimes that name nodes do) is taken at its word;
    else the op types the message names (``AMBIGUOUS`` where both revseq and the model
    use one).
    """
    ours = _written_by_revseq(ref, cand)
    for node in cand.graph.node:
        if node.name and (f"'{node.name}'" in text or f'"{node.name}"' in text):
            whose = "written by revseq" if tuple(node.output) in ours else "the model's own"
            return f"the runtime names {node.op_type} {node.name!r} ({whose})"
    own = {node.op_type for node in ref.graph.node}
    written = {node.op_type for node in cand.graph.node if tuple(node.output) in ours}
    named = [
        op
        for op in sorted(own | written)
        if re.search(rf"(?<![A-Za-z]){re.escape(op)}(?![A-Za-z])", text)
    ]
    if not named:
        return None
    whose = {
        (True, False): "written by revseq",
        (False, True): "the model's own",
        (True, True): AMBIGUOUS,
    }
    said = [f"{op} ({whose[op in written, op in own]})" for op in named]
    return "the runtime names " + ", ".join(said)


def without_reversals(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every ReverseSequence (any scope) gone: its data read in its place.

    What a runtime makes of the model's own ops alone: where it fails on this too, the
    failure is not in what revseq writes. Each becomes an Identity, then onnx-ir's
    identity elimination and unused-node removal take the Identities and the lengths
    they no longer read away (a runtime may run no Identity).
    """
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    graphs = [plain.graph, *(f for f in plain.functions)]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            if node.op_type == "ReverseSequence":
                node.op_type, node.domain = "Identity", ""
                del node.input[1:]
                del node.attribute[:]
            for attribute in node.attribute:
                graphs.extend([attribute.g] if attribute.HasField("g") else attribute.graphs)
    simplified = ir.from_proto(plain)
    IdentityEliminationPass()(simplified)
    RemoveUnusedNodesPass()(simplified)
    return ir.to_proto(simplified)


def fails_alike(ref: onnx.ModelProto, engine: Engine, feeds: Inputs | None) -> str:
    """Whether ``engine`` fails on ``ref`` with its reversals made Identities, said whole.

    Asked where a runtime failed on the whole candidate without naming the op it
    refused; ``feeds`` None where it failed while loading.
    """
    plain = without_reversals(ref)
    try:
        runner = engine.prepare(plain)
        if feeds is not None:
            runner(feeds)
    except Exception as e:  # the runtime's own failure, whatever its type
        first = _first_failing_node(plain, engine, feeds)
        at = "" if first is None else f", first at {_label(first)}"
        return (
            "it fails on the model with every reversal made an Identity too "
            f"({one_line(e, 120, typed=True)}): the model's own ops{at}"
        )
    return "it runs the model with every reversal made an Identity: revseq's decompositions"


def _first_failing_node(
    model: onnx.ModelProto, engine: Engine, feeds: Inputs | None
) -> onnx.NodeProto | None:
    """The first main-graph node whose output alone the runtime fails to compute.

    A bisection over the graph's order, each cut made an output and the nodes it does
    not need removed: a handful of conversions where the runtime's message names no node
    (a failed assertion of the runtime's own). None where the last node's cut runs.
    """
    nodes = [n for n in model.graph.node if n.op_type != "Constant" and any(n.output)]
    inferred = _value_types(model)

    def fails(node: onnx.NodeProto) -> bool:
        cut = onnx.ModelProto()
        cut.CopyFrom(model)
        del cut.graph.output[:]
        cut.graph.output.extend(
            inferred.get(name, onnx.ValueInfoProto(name=name)) for name in node.output if name
        )
        pruned = ir.from_proto(cut)
        RemoveUnusedNodesPass()(pruned)
        try:
            runner = engine.prepare(ir.to_proto(pruned))
            if feeds is not None:
                runner(feeds)
        except Exception:  # the runtime's own failure, whatever its type
            return True
        return False

    if not nodes or not fails(nodes[-1]):
        return None
    low, high = 0, len(nodes) - 1  # nodes[high] fails
    while low < high:
        middle = (low + high) // 2
        if fails(nodes[middle]):
            high = middle
        else:
            low = middle + 1
    return nodes[high]


def _label(node: onnx.NodeProto) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else node.op_type


def _differs_alike(
    ref: onnx.ModelProto, feeds: Inputs, engine: Engine, tolerance: tuple[float, float] | None
) -> Located:
    """Whether the model's own ops alone (reversals made Identities) differ there too.

    Where they agree, whether the reference itself does: a runtime that has the op may
    convert a reversal and the ops around it together and get them wrong, with or
    without revseq, and then no decomposition is to blame.
    """
    try:
        alone = _where_it_differs(without_reversals(ref), feeds, engine, tolerance)
    except Exception as e:  # the runtime's own failure, whatever its type
        return Located(
            f"the model without its reversals fails there ({one_line(e, 100, typed=True)})"
        )
    if alone is not None:
        return Located(
            f"the model with every reversal made an Identity differs there too "
            f"({alone}): the model's own ops",
            OWN,
        )
    try:
        itself = _where_it_differs(ref, feeds, engine, tolerance)
    except Exception:  # the runtime lacks the op (most do), or fails on it
        itself = None
    if itself is not None:
        return Located(
            "the model with every reversal made an Identity agrees, but the reference "
            f"itself, its ReverseSequence kept, differs there too ({itself}): the "
            "runtime's own computation of the model",
            OWN,
        )
    return Located(
        "the model with every reversal made an Identity agrees: revseq's decompositions",
        REVSEQ,
    )


def _where_it_differs(
    model: onnx.ModelProto,
    feeds: Inputs,
    engine: Engine,
    tolerance: tuple[float, float] | None,
) -> str | None:
    """The first output of ``model`` that ``engine`` computes otherwise than onnxruntime.

    Said as "'NAME' at [...]"; None where every output agrees. Raises what either raises.
    """
    expected = runners(model, ("on",))[0]["on"](feeds)
    got = engine.prepare(model)(feeds)
    names = [o.name for o in model.graph.output]
    for name, a, b in zip(names, expected, got, strict=True):
        difference = _difference(a, b, tolerance)
        if difference is not None:
            return f"{name!r} {difference.where}"
    return None


def _written_by_revseq(ref: onnx.ModelProto, cand: onnx.ModelProto) -> set[tuple[str, ...]]:
    """The outputs of each of the candidate's nodes revseq wrote (a proto node's key).

    No node of the reference writes their outputs, or a ReverseSequence there does.
    """
    outputs = {out for node in ref.graph.node for out in node.output}
    reversals = {
        out
        for node in ref.graph.node
        if node.op_type == "ReverseSequence"
        for out in node.output
    }
    return {
        tuple(node.output)
        for node in cand.graph.node
        if any(out not in outputs or out in reversals for out in node.output)
    }


def _shared_values(ref: onnx.ModelProto, cand: onnx.ModelProto) -> list[str]:
    """The names of the values both main graphs compute, in the candidate's order."""
    ref_values = {out for node in ref.graph.node for out in node.output if out}
    return [out for node in cand.graph.node for out in node.output if out in ref_values]


def _run_marked(
    model: onnx.ModelProto, names: list[str], feeds: Inputs, engine: Engine | None
) -> dict:
    """The named values of a run of ``model`` with each of them marked as an output.

    On ``engine``, fed the types the model declares; in onnxruntime where it is None.
    """
    marked = onnx.ModelProto()
    marked.CopyFrom(model)
    inferred = _value_types(model)
    declared = {o.name for o in marked.graph.output}
    marked.graph.output.extend(
        inferred.get(name, onnx.ValueInfoProto(name=name))
        for name in names
        if name not in declared
    )
    if engine is None:
        runner: Runner = runners(marked, ("on",))[0]["on"]
    else:
        runner = fed_as_declared(marked, engine.prepare(marked))
    results = runner(feeds)
    return dict(zip((o.name for o in marked.graph.output), results, strict=True))


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """The inferred types of a model's values (a backend may want typed outputs)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model shape inference cannot read: its outputs go untyped
        return {}
    return {info.name: info for info in inferred.graph.value_info}


def _difference(expected, got, tolerance: tuple[float, float] | None):
    if tolerance is None:
        return first_difference(expected, got)
    rtol, atol = tolerance
    return first_difference_beyond(expected, got, rtol=rtol, atol=atol)


def _writer(node: onnx.NodeProto) -> str:
    """Who wrote the value the reference's ``node`` computes, said for a report."""
    label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
    if node.op_type == "ReverseSequence":
        return f"revseq's decomposition of ReverseSequence {node.name or '(unnamed)'!r}"
    if node.op_type in _SUBGRAPH_OPS and _holds_reversal(node):
        return f"the model's own {label}, whose body holds revseq's decomposition(s)"
    return f"the model's own {label}"


def _holds_reversal(node: onnx.NodeProto) -> bool:
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
        for graph in graphs:
            for inner in graph.node:
                if inner.op_type == "ReverseSequence" or _holds_reversal(inner):
                    return True
    return False
