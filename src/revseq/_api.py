"""The Python API: accept a ModelProto, an onnx_ir.Model or a path; return the same kind."""

from __future__ import annotations

__all__ = ["inline", "restore", "ModelLike"]

import os
from collections.abc import Mapping, Sequence

import onnx
import onnx_ir as ir

from revseq.ops.targets import Target
from revseq.passes import InlineReverseSequencePass, RestoreReverseSequencePass, gc_paused
from revseq.passes.graph import FixInputShapesPass

ModelLike = onnx.ModelProto | ir.Model | str | os.PathLike


def _to_ir(model: ModelLike) -> ir.Model:
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, onnx.ModelProto):
        return ir.from_proto(model)
    if isinstance(model, (str, os.PathLike)):
        from revseq import files

        return files.load_model(model)
    raise TypeError(
        f"expected an onnx.ModelProto, an onnx_ir.Model or a path, got {type(model).__name__}"
    )


def _apply(model: ModelLike, *passes: ir.passes.PassBase) -> onnx.ModelProto | ir.Model:
    # Conversion creates as many objects as the pass: the cyclic collector would rescan
    # them again and again (a third of the time on a 2000-node chain).
    with gc_paused():
        ir_model = _to_ir(model)
        for pass_ in passes:  # one after another: each raises its own errors
            pass_(ir_model)
        if isinstance(model, ir.Model):
            return ir_model
        return ir.to_proto(ir_model)


def inline(
    model: ModelLike,
    *,
    strategy: str = "auto",
    as_function: bool = False,
    target: Target = None,
    simplify: bool = True,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> onnx.ModelProto | ir.Model:
    """Replace every ReverseSequence node with a decomposition into standard ops.

    Args:
        model: An ``onnx.ModelProto`` (left unmodified), an ``onnx_ir.Model`` (rewritten
            in place and returned) or a path (loaded; an ``onnx.ModelProto`` is returned).
        strategy: A name in ``revseq.STRATEGIES``; "auto" picks the fastest valid form
            for each node.
        as_function: Emit the decomposition as model-local functions plus call nodes.
        target: A profile name from ``revseq.TARGETS`` (a probed backend, by its name in
            ``revseq.backends.ADAPTERS``; a documented one; or "any"), or a collection
            of op types (profile names may be mixed in) the output may use.
            None means "portable" (output that runs exactly on every probed backend)
            with strategy "auto", and "any" with a strategy named explicitly.
        simplify: First replace trivial nodes (lengths all <= 1: Identity; all the full
            time length, as tf.reverse exports: a step -1 Slice).
        input_shapes: Fixed sizes for inputs (``{"x": [64, 2, 8]}``), set first, with
            each symbol they bind fixed wherever the graph declares it (onnxsim's
            ``--overwrite-input-shape``): for runtimes that build for fixed shapes
            (their targets refuse symbolic dims), which then get a static form.

    Returns:
        The rewritten model, of the kind given (a path gives an ``onnx.ModelProto``).
    """
    pass_ = InlineReverseSequencePass(
        strategy=strategy, as_function=as_function, target=target, simplify=simplify
    )
    if input_shapes:
        return _apply(model, FixInputShapesPass(input_shapes), pass_)
    return _apply(model, pass_)


def restore(model: ModelLike) -> onnx.ModelProto | ir.Model:
    """Fuse ReverseSequence decompositions (revseq's and other tools') back into the op.

    Only what is proven equal is fused: see ``revseq.passes.RestoreReverseSequencePass``.

    Args:
        model: An ``onnx.ModelProto`` (left unmodified), an ``onnx_ir.Model`` (rewritten
            in place and returned) or a path (loaded; an ``onnx.ModelProto`` is returned).

    Returns:
        The rewritten model, of the kind given.
    """
    return _apply(model, RestoreReverseSequencePass())
