"""The names a model already uses, and unique ones for what a pass emits into it."""

from __future__ import annotations

__all__ = ["EMITTED_NAME", "NameSource", "Survey", "emitted_name", "model_names", "node_names"]

import re
from collections.abc import Iterator

import onnx_ir as ir

from revseq.passes.graph.reverse_sequence import REVSEQ_DOMAIN, is_reverse_sequence
from revseq.passes.graph.scopes import ScopedNode, walk

EMITTED_NAME = re.compile(r"^(?P<prefix>.+)/(?P<op>[A-Za-z]+)_\d+$")
"""``<prefix>/<Op>_<i>``: the name of each node (and constant) a form emits, its prefix
the replaced node's name (restore names the fused node after it)."""


def emitted_name(prefix: str, op_type: str, index: int) -> str:
    """The name of the ``index``-th node (or constant) emitted in place of ``prefix``."""
    return f"{prefix}/{op_type}_{index}"


def model_names(model: ir.Model) -> set[str]:
    """The names held outside the nodes: functions, graph inputs and initializers."""
    used: set[str] = {f.name for f in model.functions.values()}
    for graph in (model.graph, *(f.graph for f in model.functions.values())):
        used.update(v.name for v in graph.inputs if v.name)
        used.update(graph.initializers)
    return used


def node_names(node: ir.Node, *, with_name: bool = True) -> Iterator[str]:
    """The names ``node`` holds: its outputs', its subgraphs' inputs', its own."""
    yield from (v.name for v in node.outputs if v.name)
    for attr in node.attributes.values():
        if isinstance(attr, ir.Attr) and attr.type == ir.AttributeType.GRAPH:
            yield from (v.name for v in attr.value.inputs if v.name)
    if with_name and node.name:
        yield node.name


class NameSource:
    """Unique prefixes for emitted nodes and values, and names for emitted functions."""

    def __init__(self, used: set[str]) -> None:
        self._used = used
        self._next: dict[str, int] = {}
        # Emitted names are "<prefix>/<op>_<i>": a prefix must not be a namespace in use.
        self._namespaces = {name.rsplit("/", 1)[0] for name in used if "/" in name}

    def _unique(self, base: str) -> str:
        candidate, i = base, self._next.get(base, 1)
        while candidate in self._used or candidate in self._namespaces:
            i += 1
            candidate = f"{base}_{i}"
        self._next[base] = i
        self._used.add(candidate)
        self._namespaces.add(candidate)
        return candidate

    def prefix_for(self, node: ir.Node) -> str:
        """A prefix for what replaces ``node``: its name, or ReverseSequence, made unique."""
        return self._unique(node.name or "ReverseSequence")

    def function_name(self, strategy: str) -> str:
        """A unique name for the model-local function of ``strategy``."""
        return self._unique(f"ReverseSequence_{strategy}")


class Survey:
    """One walk over the model: the ReverseSequence nodes to replace, every name in use.

    The replaced nodes' own names are left free: their replacements take them.
    """

    def __init__(self, model: ir.Model) -> None:
        self.targets: list[ScopedNode] = []
        self.other_revseq_nodes = False
        used = model_names(model)
        for scoped in walk(model):
            node = scoped.node
            target = is_reverse_sequence(node)
            used.update(node_names(node, with_name=not target))
            if target:
                self.targets.append(scoped)
                continue
            self.other_revseq_nodes |= node.domain == REVSEQ_DOMAIN
        self.names = NameSource(used)
