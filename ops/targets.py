"""Backend profiles: the op types a target accepts, for target-aware decompositions.

Each profile is what ``../shared/BACKENDS.md`` gathered from the backend's own operator
table (sources cited per profile), narrowed to the ops a decomposition can use. Ops that
a table did not confirm are left out: a profile errs towards refusing a form. The pseudo
op type ``GatherND:batch_dims`` marks GatherND with ``batch_dims > 0``.
"""

from __future__ import annotations

__all__ = ["TARGETS", "allowed_op_types"]

from collections.abc import Iterable

from revseq.ops.errors import StrategyError

_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Min", "Max", "Cast"})
_SHAPING = frozenset(
    {"Reshape", "Unsqueeze", "Squeeze", "Concat", "Expand", "Flatten", "Slice"}
)

TARGETS: dict[str, frozenset[str]] = {
    # onnxruntime js/web/docs/webgpu-operators.md; GatherND from the native WebGPU EP.
    "webgpu": _ARITHMETIC
    | _SHAPING
    | {
        "Shape",
        "Gather",
        "GatherElements",
        "GatherND",
        "GatherND:batch_dims",
        "Range",
        "Less",
        "Where",
        "Tile",
        "ConstantOfShape",
        "Size",
        "ReduceProd",
    },
    # WebNN spec and onnxruntime js/web/docs/webnn-operators.md: no Range, GatherND only
    # with batch_dims == 0, Expand/Reshape shapes must be constants (so no Shape here).
    "webnn": _ARITHMETIC
    | _SHAPING
    | {"Gather", "GatherElements", "GatherND", "Less", "Where", "CumSum", "Transpose"},
    # onnxruntime qnn/builder/op_builder_factory.cc: no Range; static shapes.
    "qnn": _ARITHMETIC
    | _SHAPING
    | {"Gather", "GatherElements", "GatherND", "Where", "Less", "Tile", "CumSum", "Transpose"},
    # onnxruntime CoreML EP, older operator list: no Where, Less or GatherElements.
    "coreml": frozenset(
        {"Gather", "Slice", "Reshape", "Transpose", "Concat", "Add", "Sub", "Mul"}
    ),
    # onnxruntime NNAPI EP: lengths must be constant (one Gather with a constant index).
    "nnapi": frozenset(
        {"Gather", "Slice", "Reshape", "Concat", "Transpose", "Add", "Sub", "Mul"}
    ),
}
"""Named backend profiles: the op types each accepts."""


def allowed_op_types(target: str | Iterable[str] | None) -> frozenset[str] | None:
    """The op types a ``target`` allows: a profile name, or op types and profile names mixed.

    Raises:
        StrategyError: A profile name is unknown (a bare string must name a profile).
    """
    if target is None:
        return None
    if isinstance(target, str):
        if target not in TARGETS:
            raise StrategyError(
                f"unknown target {target!r}; choose one of {', '.join(sorted(TARGETS))} "
                "or pass a collection of op types"
            )
        return TARGETS[target]
    allowed: set[str] = set()
    for item in target:
        allowed |= TARGETS.get(item, {item})
    return frozenset(allowed)
