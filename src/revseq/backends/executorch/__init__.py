"""ExecuTorch: onnx2torch's module exported with ``torch.export``, lowered, run by its runtime.

The road a model takes to a phone or a microcontroller through PyTorch. The conversion
registers revseq's ReverseSequence converter (:mod:`revseq.backends.onnx2torch.converter`),
so a model that still holds the op gets there too. ``executorch`` lowers with the XNNPACK
delegate (the nodes it takes run in XNNPACK, the others on ExecuTorch's portable kernels);
``executorch-portable`` (``PORTABLE``) with the portable kernels alone. A runner's
``delegation`` names the ATen ops each took (filled in when the first inputs have
exported the model).

ExecuTorch plans its memory for the largest shapes a program takes: dims the model
declares symbolic are exported as symbols (one per name, so the lengths' own dim stays
its own), each bounded at four times its size in the first inputs (at least 16), and
the program is exported again for inputs beyond a bound. The example inputs of the
export take every symbolic dim at 2 or more (torch.export specialises a dim it sees at
0 or 1); the runs then take any size within the bounds.

The ``executorch`` extra pins torch 2.13 (executorch names no torch; onnx2torch alone
would pull the newest, with the CUDA libraries): executorch 1.5.1 exports, lowers and
runs with it.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, BackendError, input_names
from revseq.backends.onnx2torch import on_host, to_torch
from revseq.errors import one_line

_DELEGATE = "XnnpackBackend"
_PORTABLE = "portable"
_LEAST_BOUND = 16
_GROWTH = 4


def prepare(model: onnx.ModelProto, *, delegate: bool = True):
    """A runner that exports and lowers ``model`` for the first inputs it is given."""
    from revseq.backends.onnx2torch import converter

    return program_runner(converter.convert(model), model, delegate=delegate)


def program_runner(
    module, model: onnx.ModelProto, *, delegate: bool = True, growth: int = _GROWTH
):
    """A runner of torch ``module``, which takes ``model``'s inputs, run by ExecuTorch.

    Exported with ``model``'s symbolic dims and lowered (with XNNPACK where
    ``delegate``) for the first inputs it is given, each dim bounded at ``growth`` times
    its size there, and again for inputs beyond the bounds (memory is planned for the
    bounds: a runner timed at one size takes ``growth=1``); ``run.delegation`` names
    the ATen ops each took.
    """
    names = input_names(model)
    declared = {i.name: i for i in model.graph.input}
    symbols = {n: _symbols(declared[n]) for n in names}
    programs: list[tuple[dict[str, int], object]] = []

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        args = [to_torch(feeds[n]) for n in names]
        sizes = _symbol_sizes(symbols, names, args)
        method = next((m for bounds, m in programs if _within(sizes, bounds)), None)
        if method is None:
            bounds = {s: max(_LEAST_BOUND, growth * size) for s, size in sizes.items()}
            try:
                method, delegation = _lowered(
                    module, symbols, names, args, bounds, delegate=delegate
                )
            except Exception as e:  # torch.export and the lowering raise their own types
                name = "executorch" if delegate else "executorch-portable"
                raise BackendError(name, "convert", one_line(e, typed=True)) from e
            programs.append((bounds, method))
            run.delegation.clear()  # type: ignore[attr-defined]
            run.delegation.update(delegation)  # type: ignore[attr-defined]
        return on_host(method.execute(args))

    run.delegation = {}  # type: ignore[attr-defined]
    return run


def _symbols(info: onnx.ValueInfoProto) -> list[str | None]:
    """Each dim's symbol (an unnamed dynamic dim gets one of its own), None where fixed."""
    shape = info.type.tensor_type.shape
    return [
        None if d.HasField("dim_value") else d.dim_param or f"{info.name}_{i}"
        for i, d in enumerate(shape.dim)
    ]


def _symbol_sizes(symbols, names, args) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for name, arg in zip(names, args, strict=True):
        for symbol, size in zip(symbols[name], arg.shape, strict=False):
            if symbol is not None:
                sizes[symbol] = max(sizes.get(symbol, 0), int(size))
    return sizes


def _within(sizes: dict[str, int], bounds: dict[str, int]) -> bool:
    return all(size <= bounds[s] for s, size in sizes.items())


def _lowered(module, symbols, names, args, bounds, *, delegate: bool):
    """The loaded method of ``module`` exported for ``bounds``, and its delegation."""
    import torch
    from executorch.exir import to_edge, to_edge_transform_and_lower
    from executorch.runtime import Runtime

    dims = {s: torch.export.Dim(_identifier(s), min=0, max=b) for s, b in bounds.items()}
    examples = [_example(a, symbols[n]) for n, a in zip(names, args, strict=True)]
    dynamic = [
        {i: dims[s] for i, s in enumerate(symbols[n]) if s is not None} or None for n in names
    ]
    exported = torch.export.export(
        module, tuple(examples), dynamic_shapes=dynamic if dims else None, strict=False
    )
    if delegate:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )

        edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    else:
        edge = to_edge(exported)
    delegation = _delegation(edge.exported_program().graph_module)
    program = Runtime.get().load_program(edge.to_executorch().buffer)
    # A method reads its program's memory: the program must outlive it.
    return _Loaded(program, program.load_method("forward")), delegation


class _Loaded:
    """A loaded method, holding on to the program it was loaded from."""

    def __init__(self, program, method) -> None:
        self._program = program
        self._method = method

    def execute(self, args):
        """The method's outputs for ``args``."""
        return self._method.execute(args)


def _example(arg, symbols: list[str | None]):
    """``arg`` grown to 2 along every symbolic dim it has at 0 or 1 (zeros where grown)."""
    import torch

    shape = [
        max(2, size) if s is not None else size
        for size, s in zip(arg.shape, symbols, strict=False)
    ]
    if list(arg.shape) == shape:
        return arg
    return torch.zeros(shape, dtype=arg.dtype)


def _identifier(symbol: str) -> str:
    name = re.sub(r"\W", "_", symbol)
    return name if name[:1].isalpha() else f"d_{name}"


def _delegation(graph_module) -> dict[str, list[tuple[str, str]]]:
    """The ATen ops the delegate took and those left to the portable kernels."""
    delegation: dict[str, list[tuple[str, str]]] = {_DELEGATE: [], _PORTABLE: []}
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        if "executorch_call_delegate" in str(node.target):
            lowered = getattr(graph_module, node.args[0].target)
            inner = lowered.original_module.graph_module.graph.nodes
            delegation[_DELEGATE] += [
                (_op_name(n.target), n.name) for n in inner if n.op == "call_function"
            ]
        elif _op_name(node.target).startswith(("aten.", "dim_order_ops.")):
            delegation[_PORTABLE].append((_op_name(node.target), node.name))
    return {where: ops for where, ops in delegation.items() if ops}


def _op_name(target) -> str:
    """``aten.gather`` of the edge op ``aten.gather.default``."""
    name = str(getattr(target, "__name__", target))
    return name.removesuffix(".default")


ADAPTER = Adapter(
    prepare=prepare,
    distribution="executorch",
    extra="executorch",
    imports=("executorch", "onnx2torch", "torch"),
)

PORTABLE = dataclasses.replace(ADAPTER, prepare=functools.partial(prepare, delegate=False))
"""ExecuTorch with its portable kernels alone: no delegate (``executorch-portable``)."""
