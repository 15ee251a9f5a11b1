"""What a model holds that matters to revseq: opsets, ReverseSequence nodes, op types."""

from __future__ import annotations

__all__ = ["ModelInfo", "NodeInfo", "count_nodes", "describe"]

import collections
import dataclasses
import logging

import onnx_ir as ir

from revseq.errors import InvalidNodeError, UnsupportedOpsetError
from revseq.ops.vocabulary import REVSEQ_DOMAIN
from revseq.passes import (
    DECOMPOSITION_MIN_OPSET,
    Dim,
    ShapeTable,
    is_reverse_sequence,
    signature_of,
    walk,
)
from revseq.passes.graph.reverse_sequence import FLAVOUR_LENGTH_TYPES

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """One ReverseSequence node.

    Attributes:
        name: The node's name ("" when unnamed).
        domain: "onnx" or "revseq".
        scope: Where it sits: "main", a subgraph path, or "function <domain>::<name>".
        batch_axis: The batch_axis attribute (1 when left at its default).
        time_axis: The time_axis attribute (0 when left at its default).
        constant_lengths: Whether ``sequence_lens`` is a constant or initializer.
        rank: The data input's rank, None when unknown.
        dims: The data input's dims as declared or as onnx's shape inference finds them:
            a size (static), a symbol name (symbolic) or None (unknown); None when the
            rank is unknown.
        invalid: Why the node breaks the operator's specification, None when it is valid.
        note: What else a user should know of it (int32 lengths on the ONNX domain).
    """

    name: str
    domain: str
    scope: str
    batch_axis: int
    time_axis: int
    constant_lengths: bool
    rank: int | None
    dims: tuple[int | str | None, ...] | None = None
    invalid: str | None = None
    note: str | None = None

    def dim_kinds(self) -> str:
        """``static 1, symbolic 2, unknown 0``: how much of the shape is known."""
        if self.dims is None:
            return "rank unknown"
        static = sum(isinstance(d, int) for d in self.dims)
        symbolic = sum(isinstance(d, str) for d in self.dims)
        unknown = len(self.dims) - static - symbolic
        return f"static {static}, symbolic {symbolic}, unknown {unknown}"


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """A summary of a model for ``revseq info``.

    Attributes:
        opset_imports: Domain to version, as the main graph imports them.
        nodes: Every ReverseSequence node, in every scope.
        op_types: How many nodes of each ``domain::op_type`` the model uses, all scopes.
        node_count: Nodes in all scopes together.
        functions: Names of the model-local functions.
    """

    opset_imports: dict[str, int]
    nodes: tuple[NodeInfo, ...]
    op_types: dict[str, int]
    node_count: int
    functions: tuple[str, ...]

    @property
    def invalid_nodes(self) -> tuple[NodeInfo, ...]:
        """The nodes that break the operator's specification."""
        return tuple(n for n in self.nodes if n.invalid is not None)

    def counts_by_domain_and_scope(self) -> dict[str, dict[str, int]]:
        """ReverseSequence node counts: domain -> scope -> count."""
        counts: dict[str, dict[str, int]] = {}
        for node in self.nodes:
            by_scope = counts.setdefault(node.domain, {})
            by_scope[node.scope] = by_scope.get(node.scope, 0) + 1
        return counts

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict (``revseq info --json``)."""
        return {
            "opset_imports": self.opset_imports,
            "reverse_sequence": {
                "count": len(self.nodes),
                "by_domain_and_scope": self.counts_by_domain_and_scope(),
                "nodes": [dataclasses.asdict(n) for n in self.nodes],
            },
            "op_types": self.op_types,
            "node_count": self.node_count,
            "functions": list(self.functions),
        }

    def __str__(self) -> str:
        imports = ", ".join(f"{d or 'ai.onnx'}: {v}" for d, v in self.opset_imports.items())
        lines = [f"opset imports: {imports}", f"nodes: {self.node_count}"]
        if self.functions:
            lines.append(f"model-local functions: {', '.join(self.functions)}")
        lines.append(f"ReverseSequence nodes: {len(self.nodes)}")
        for domain, by_scope in self.counts_by_domain_and_scope().items():
            for scope, count in by_scope.items():
                lines.append(f"  {domain} domain, {scope}: {count}")
        for node in self.nodes:
            lengths = "constant" if node.constant_lengths else "run-time"
            rank = node.rank if node.rank is not None else "?"
            lines.append(
                f"  - {node.name or '(unnamed)'} [{node.domain}, {node.scope}]: "
                f"batch_axis={node.batch_axis} time_axis={node.time_axis} rank={rank} "
                f"dims={describe_dims(node.dims)} ({node.dim_kinds()}) "
                f"lengths={lengths}"
                + (f" INVALID: {node.invalid}" if node.invalid else "")
                + (f" ({node.note})" if node.note else "")
            )
        lines.append("op types: " + ", ".join(f"{k} x{v}" for k, v in self.op_types.items()))
        return "\n".join(lines)


def describe_dims(dims: tuple[Dim, ...] | None) -> str:
    """``[T, B=4, ?]``-style text: static sizes, symbols, ``?`` for unknown dims."""
    if dims is None:
        return "unknown rank"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _reason(message: str) -> str:
    """The problem alone: the message names the node, which the summary already does."""
    return message.split("): ", 1)[1] if "): " in message else message


def _flavour(node: ir.Node) -> str | None:
    """What an ONNX-domain node with int32 lengths is, and what revseq does with it."""
    lens = node.inputs[1] if len(node.inputs) > 1 else None
    if node.domain == REVSEQ_DOMAIN or lens is None or lens.dtype not in FLAVOUR_LENGTH_TYPES:
        return None
    return (
        "int32 lengths: TensorFlow's flavour, not valid ONNX; revseq inline writes valid ONNX"
    )


def _is_constant(value: ir.Value | None) -> bool:
    if value is None or value.is_graph_input():
        return False
    return ir.convenience.get_const_tensor(value) is not None


def count_nodes(model: ir.Model) -> tuple[int, int]:
    """The ReverseSequence nodes and all nodes of every scope: no shape inference."""
    nodes = reversals = 0
    for scoped in walk(model):
        nodes += 1
        reversals += is_reverse_sequence(scoped.node)
    return reversals, nodes


def describe(model: ir.Model) -> ModelInfo:
    """Summarise ``model`` (every scope: main graph, subgraphs, functions).

    Dims are what the passes plan with: declared, completed where needed by onnx's shape
    inference (on a copy; the model is not changed).
    """
    scoped_nodes = list(walk(model))
    shapes = ShapeTable.where_needed(
        model, (s.node for s in scoped_nodes if is_reverse_sequence(s.node))
    )
    declared = ShapeTable()  # validation goes by the declared shapes alone
    nodes = []
    op_types: collections.Counter[str] = collections.Counter()
    count = 0
    for scoped in scoped_nodes:
        node = scoped.node
        count += 1
        op_types[f"{node.domain}::{node.op_type}" if node.domain else node.op_type] += 1
        if not is_reverse_sequence(node):
            continue
        data = node.inputs[0] if node.inputs else None
        lens = node.inputs[1] if len(node.inputs) > 1 else None
        dims = shapes.dims(data) if data is not None else None
        try:
            signature_of(scoped, opset=DECOMPOSITION_MIN_OPSET, shapes=declared)
            invalid = None
        except InvalidNodeError as e:
            invalid = _reason(str(e))
        except UnsupportedOpsetError as e:  # no such op in its opset: invalid there
            invalid = _reason(str(e)) if scoped.node.domain != REVSEQ_DOMAIN else None
        nodes.append(
            NodeInfo(
                name=node.name or "",
                domain="revseq" if node.domain == REVSEQ_DOMAIN else "onnx",
                scope=scoped.scope,
                batch_axis=node.attributes.get_int("batch_axis", 1),
                time_axis=node.attributes.get_int("time_axis", 0),
                constant_lengths=_is_constant(lens),
                rank=len(dims) if dims is not None else None,
                dims=dims,
                invalid=invalid,
                note=_flavour(node),
            )
        )
    return ModelInfo(
        opset_imports=dict(model.opset_imports),
        nodes=tuple(nodes),
        op_types=dict(sorted(op_types.items())),
        node_count=count,
        functions=tuple(f"{f.domain}::{f.name}" for f in model.functions.values()),
    )
