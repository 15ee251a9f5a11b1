"""IREE: ``iree-import-onnx`` to MLIR, compiled for ``llvm-cpu``, run on ``local-task``.

Models below opset 17 are upgraded by the importer (``--opset-version``) first.

f64 is demoted to f32 by IREE's default input pipeline; that is turned off, since a
bit-exact reversal must keep every byte. The Python runtime hands unsigned outputs back
as the signed type of the same width (same bytes): the adapter wrapper reinterprets them.
"""

from __future__ import annotations

import os
import re
import tempfile

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, BackendError, input_names, write_model
from revseq.errors import one_line
from revseq.ops.vocabulary import default_opset

COMPILE_FLAGS = (
    "--iree-input-demote-f64-to-f32=false",
    "--iree-llvmcpu-target-cpu=host",
)


# iree-import-onnx lowers each op from the versions torch-mlir's patterns are written for
# (Less from opset 13: an opset-10 or -11 model fails to legalize `onnx.Less`); its
# `--opset-version` upgrades an older model first, as IREE's documentation advises.
IMPORT_OPSET = 17


def _upgrade(model: onnx.ModelProto) -> list[str]:
    """The importer's arguments that upgrade a model below ``IMPORT_OPSET``."""
    opset = default_opset(model)
    if not opset or opset >= IMPORT_OPSET:
        return []
    return ["--opset-version", str(IMPORT_OPSET)]


def _diagnosis(error: Exception, folder: str) -> str:
    """The compiler's first ``error:`` line, else the whole message, in one line.

    Its messages start with the command line and end with advice; the why sits between,
    where a cut message loses it. The scratch folder's path is taken out.
    """
    text = str(error).replace(folder + os.sep, "")
    found = re.search(r"error: ([^\n]+)", text)
    why = one_line(RuntimeError(found.group(1) if found else text))
    return f"{type(error).__name__}: {why}"


def prepare(model: onnx.ModelProto):
    """Convert or compile ``model``; return a function of the inputs by name."""
    import iree.compiler
    import iree.runtime
    from iree.compiler.tools.import_onnx.__main__ import main as import_onnx
    from iree.compiler.tools.import_onnx.__main__ import parse_arguments

    with tempfile.TemporaryDirectory() as folder:
        source = write_model(model, folder)
        mlir = os.path.join(folder, "model.mlir")
        try:
            import_onnx(parse_arguments([source, "-o", mlir, *_upgrade(model)]))
            flatbuffer = iree.compiler.compile_file(
                mlir, target_backends=["llvm-cpu"], extra_args=list(COMPILE_FLAGS)
            )
        except Exception as e:
            raise BackendError("iree", "convert", _diagnosis(e, folder)) from e
    context = iree.runtime.SystemContext(config=iree.runtime.Config("local-task"))
    vm_module = iree.runtime.VmModule.copy_buffer(context.instance, flatbuffer)
    context.add_vm_module(vm_module)
    function = context.modules[vm_module.name][model.graph.name]
    names = input_names(model)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        result = function(*[np.ascontiguousarray(feeds[n]) for n in names])
        results = result if isinstance(result, (tuple, list)) else [result]
        return [np.asarray(r.to_host()) for r in results]

    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="iree-base-runtime",
    extra="iree",
    imports=("iree.compiler", "iree.runtime"),
)
