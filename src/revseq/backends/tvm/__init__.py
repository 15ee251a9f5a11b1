"""Apache TVM: the Relax ONNX frontend, compiled for ``llvm``, run by the Relax VM.

Symbolic input dims stay symbolic (the frontend makes them Relax shape variables), so a
dynamic-shape model is compiled once and run at any size.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, input_names


def prepare(model: onnx.ModelProto):
    """Convert or compile ``model``; return a function of the inputs by name."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    logging.getLogger("tvm").setLevel(logging.ERROR)
    module = from_onnx(model, keep_params_in_input=False)
    executable = tvm.compile(module, target="llvm")
    machine = relax.VirtualMachine(executable, tvm.cpu())
    names = input_names(model)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        result = machine["main"](*[tvm.runtime.tensor(feeds[n]) for n in names])
        if isinstance(result, tvm.runtime.Tensor):
            return [result.numpy()]
        return [r.numpy() for r in result]

    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="apache-tvm",
    extra="tvm",
    imports=("tvm",),
)
