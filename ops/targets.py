"""Targets: what ``target=`` accepts, resolved to the profile the planner reads.

A target is a profile name (``revseq.TARGETS``: probed backends, documented ones,
``portable`` and ``any``), a collection of op types (profile names may be mixed in: their
op types are added), or None for the ``portable`` default.
"""

from __future__ import annotations

__all__ = ["ANY", "TARGETS", "Target", "dtype_name", "resolve_target"]

from collections.abc import Iterable, Mapping

import onnx_ir as ir

from revseq.ops.errors import StrategyError
from revseq.ops.profiles import PORTABLE, Profile, load_profiles

ANY = Profile(
    name="any",
    source="onnx",
    description="any standard ONNX op: the fastest forms, for runtimes with full ONNX",
    backend_version=None,
    native=None,
    static_ops=None,  # type: ignore[arg-type]
    dynamic_ops=None,  # type: ignore[arg-type]
)
"""No restriction at all (``target="any"``)."""

Target = str | Iterable[str] | Profile | None

TARGETS: Mapping[str, Profile] = {**load_profiles(), ANY.name: ANY}
"""Every named profile: probed backends, documented ones, ``portable`` and ``any``."""

_DTYPE_NAMES = {
    ir.DataType.FLOAT: "float32",
    ir.DataType.UINT8: "uint8",
    ir.DataType.INT8: "int8",
    ir.DataType.UINT16: "uint16",
    ir.DataType.INT16: "int16",
    ir.DataType.INT32: "int32",
    ir.DataType.INT64: "int64",
    ir.DataType.STRING: "string",
    ir.DataType.BOOL: "bool",
    ir.DataType.FLOAT16: "float16",
    ir.DataType.DOUBLE: "float64",
    ir.DataType.UINT32: "uint32",
    ir.DataType.UINT64: "uint64",
    ir.DataType.COMPLEX64: "complex64",
    ir.DataType.COMPLEX128: "complex128",
    ir.DataType.BFLOAT16: "bfloat16",
}


def dtype_name(dtype: ir.DataType | None) -> str | None:
    """The profile's name of an element type (numpy's, "string" for strings)."""
    if dtype is None:
        return None
    return _DTYPE_NAMES.get(dtype, dtype.name.lower())


def resolve_target(target: Target) -> Profile:
    """The profile for ``target``.

    Raises:
        StrategyError: A profile name is unknown (a bare string must name a profile).
    """
    if target is None:
        return TARGETS[PORTABLE]
    if isinstance(target, Profile):
        return target
    if isinstance(target, str):
        if target not in TARGETS:
            raise StrategyError(
                f"unknown target {target!r}; choose one of {', '.join(sorted(TARGETS))} "
                "or pass a collection of op types"
            )
        return TARGETS[target]
    names = sorted(target)
    static: set[str] = set()
    dynamic: set[str] = set()
    for item in names:
        profile = TARGETS.get(item)
        if profile is None:
            static.add(item)
            dynamic.add(item)
        elif profile.static_ops is None:
            return ANY
        else:
            static |= profile.static_ops
            dynamic |= profile.dynamic_ops
    return Profile(
        name="+".join(names) if len(names) <= 3 else f"{len(names)} op types",
        source="ops",
        description="the op types given",
        backend_version=None,
        native=None,
        static_ops=frozenset(static),
        dynamic_ops=frozenset(dynamic),
    )
