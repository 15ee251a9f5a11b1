"""Strategy names, and the choice of a form for one node (``strategy="auto"``)."""

from __future__ import annotations

__all__ = ["STRATEGIES", "AUTO_PREFERENCE", "check_name", "resolve", "emitted_op_types"]

import functools

import onnx_ir as ir

from revseq.ops import forms
from revseq.ops.errors import StrategyError
from revseq.passes._builder import NodeBuilder
from revseq.passes._node import node_label
from revseq.passes._scopes import ScopedNode

STRATEGIES: tuple[str, ...] = ("auto", *forms.FORMS)
"""The names ``strategy=`` accepts."""

AUTO_PREFERENCE: tuple[str, ...] = ("gather_nd", "gather_elements", "gather_rows")
"""The order "auto" tries forms in: fastest first, as measured by ``revseq.bench``.

Where the rows are single elements (``Signature.index_covers_data``), GatherElements
needs no data-sized index and is faster than GatherND; it goes first there.
"""


def _auto_order(sig: forms.Signature) -> tuple[str, ...]:
    if sig.index_covers_data():
        return ("gather_elements", *(s for s in AUTO_PREFERENCE if s != "gather_elements"))
    return AUTO_PREFERENCE


# Constants are weights to every backend: a target never has to list them.
_ALWAYS_ALLOWED = frozenset({"Constant"})


def check_name(strategy: str) -> None:
    """Raise StrategyError unless ``strategy`` is one of STRATEGIES."""
    if strategy not in STRATEGIES:
        raise StrategyError(
            f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )


@functools.lru_cache(maxsize=1024)
def emitted_op_types(sig: forms.Signature, strategy: str) -> frozenset[str]:
    """The op types the form emits for ``sig`` (it is emitted on scratch values)."""
    op = NodeBuilder("probe")
    output = forms.emit(
        op, ir.Value(name="input"), ir.Value(name="sequence_lens"), sig, strategy
    )
    return frozenset(node.op_type for node in op.finish(output))


def _misfit(sig: forms.Signature, strategy: str) -> str | None:
    """None if the form fits the node and the target, else why not."""
    try:
        used = emitted_op_types(sig, strategy)
    except StrategyError as e:
        return str(e)
    if sig.allowed is None:
        return None
    missing = sorted(used - sig.allowed - _ALWAYS_ALLOWED)
    if missing:
        return f"strategy {strategy!r} needs {', '.join(missing)}, which the target lacks"
    return None


def resolve(strategy: str, sig: forms.Signature, scoped: ScopedNode) -> str:
    """The concrete form for one node: ``strategy`` itself, or the best fit for "auto"."""
    candidates = _auto_order(sig) if strategy == "auto" else (strategy,)
    reasons = []
    for name in candidates:
        reason = _misfit(sig, name)
        if reason is None:
            return name
        reasons.append(reason)
    raise StrategyError(f"{node_label(scoped)}: no decomposition fits: {'; '.join(reasons)}")
