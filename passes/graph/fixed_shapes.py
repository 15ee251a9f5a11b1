"""Input shapes fixed before a rewrite, for runtimes that build for fixed shapes.

Some runtimes build a model for the input sizes they are given, some converters convert
for them, and the documented NPU targets run static dims only: there, a model
with symbolic dims is one the user will fix anyway. :class:`FixInputShapesPass` fixes
them first (onnxsim's ``--overwrite-input-shape``): each given input takes its sizes,
and every symbol they bind takes its size wherever the main graph declares it, so the
planner sees the static dims and writes a static form.
"""

from __future__ import annotations

__all__ = ["FixInputShapesPass"]

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from revseq.errors import RevseqError
from revseq.passes.graph.scopes import run_time_inputs


class FixInputShapesPass(ir.passes.InPlacePass):
    """Give graph inputs fixed sizes, and each symbol they bind its size everywhere.

    Raises (when called):
        RevseqError: A name that is no graph input, another rank, a static dim given
            another size, or one symbol given two sizes: one line each.
    """

    def __init__(self, shapes: Mapping[str, Sequence[int]]) -> None:
        super().__init__()
        self.shapes = {name: tuple(int(d) for d in dims) for name, dims in shapes.items()}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Fix the given inputs' shapes and the symbols they bind."""
        graph = model.graph
        inputs = {v.name: v for v in run_time_inputs(graph)}
        symbols: dict[str, int] = {}
        for name, sizes in self.shapes.items():
            value = inputs.get(name)
            if value is None:
                known = ", ".join(sorted(n for n in inputs if n)) or "none"
                raise RevseqError(f"input shape for {name!r}: no such input (inputs: {known})")
            declared = value.shape
            if declared is not None and len(declared) != len(sizes):
                raise RevseqError(
                    f"input shape for {name!r}: {len(sizes)} dims given, the model "
                    f"declares {len(declared)}"
                )
            for axis, size in enumerate(sizes):
                dim = declared[axis] if declared is not None else None
                if isinstance(dim, int) and dim != size:
                    raise RevseqError(
                        f"input shape for {name!r}: dim {axis} is {dim} in the model, "
                        f"{size} given"
                    )
                symbol = getattr(dim, "value", None)
                if symbol is not None and symbols.setdefault(symbol, size) != size:
                    raise RevseqError(
                        f"input shape for {name!r}: symbol {symbol!r} is given "
                        f"{symbols[symbol]} and {size}"
                    )
            value.shape = ir.Shape(sizes)
        modified = bool(self.shapes)
        for value in _declared_values(graph):
            if value.shape is not None and value.name not in self.shapes:
                value.shape = ir.Shape(
                    [symbols.get(getattr(d, "value", None), d) for d in value.shape]
                )
        return ir.passes.PassResult(model, modified=modified)


def _declared_values(graph: ir.Graph):
    """Every value of the main graph with a declared shape: inputs, outputs, the rest."""
    yield from graph.inputs
    yield from graph.outputs
    for node in graph:
        yield from (o for o in node.outputs if o is not None)
