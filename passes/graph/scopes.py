"""One walk over every scope of a model: main graph, subgraphs at any depth, functions."""

from __future__ import annotations

__all__ = [
    "ScopedNode",
    "constants_graph",
    "opset_version",
    "run_time_input_infos",
    "run_time_inputs",
    "walk",
]

import dataclasses
from collections.abc import Iterator

import onnx
import onnx_ir as ir

from revseq.ops.vocabulary import ONNX_DOMAINS


@dataclasses.dataclass(frozen=True)
class ScopedNode:
    """A node with a readable name of the scope that holds it.

    Attributes:
        node: The node.
        scope: "main", "function <domain>::<name>", and for subgraphs the path through the
            owning nodes, e.g. "main/Loop 'loop0'.body/If 'if1'.then_branch".
        owner: The graph or function whose opset imports govern the node.
    """

    node: ir.Node
    scope: str
    owner: ir.Graph | ir.Function


def _walk_one(root: ir.Graph | ir.Function, scope: str) -> Iterator[ScopedNode]:
    owner_graph: ir.Graph = root.graph if isinstance(root, ir.Function) else root
    scopes: dict[int, str] = {id(owner_graph): scope}
    for node in ir.traversal.RecursiveGraphIterator(owner_graph):
        here = scopes.get(id(node.graph), scope)
        for attr in node.attributes.values():
            if not isinstance(attr, ir.Attr):
                continue
            if attr.type == ir.AttributeType.GRAPH:
                scopes[id(attr.value)] = f"{here}/{node.op_type} {node.name!r}.{attr.name}"
            elif attr.type == ir.AttributeType.GRAPHS:
                for i, graph in enumerate(attr.value):
                    scopes[id(graph)] = f"{here}/{node.op_type} {node.name!r}.{attr.name}[{i}]"
        yield ScopedNode(node, here, root)


def walk(model: ir.Model) -> Iterator[ScopedNode]:
    """Every node of ``model``: main graph first, then each model-local function."""
    yield from _walk_one(model.graph, "main")
    for function in model.functions.values():
        yield from _walk_one(function, f"function {function.domain}::{function.name}")


def opset_version(owner: ir.Graph | ir.Function, domain: str) -> int | None:
    """The version of ``domain`` that ``owner`` imports ("" and "ai.onnx" are one domain)."""
    imports = owner.opset_imports
    if domain in ONNX_DOMAINS:
        return imports.get("", imports.get("ai.onnx"))
    return imports.get(domain)


# Initializers that are not graph inputs are constants from IR version 4 on.
_CONSTANT_INITIALIZERS_IR = 4


def constants_graph(model: ir.Model, scoped: ScopedNode) -> ir.Graph | None:
    """The graph whose initializers hold the constants of what replaces a node, or None.

    The main graph (IR version 4 and later): If/Loop/Scan bodies and functions keep
    Constant nodes, which every backend reads there.
    """
    graph = scoped.node.graph
    if graph is model.graph and model.ir_version >= _CONSTANT_INITIALIZERS_IR:
        return graph
    return None


def run_time_inputs(graph: ir.Graph) -> list[ir.Value]:
    """The graph's inputs fed when it runs: those no initializer gives a value."""
    return [v for v in graph.inputs if v.name not in graph.initializers]


def run_time_input_infos(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The main graph's inputs fed when it runs, as the serialised model declares them.

    An input an initializer of the same name gives its value (models of IR version < 4
    list their weights as inputs) is not one of them.
    """
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]
