"""Targets: what ``target=`` accepts, resolved to the profile the planner reads.

A target is a profile name (``revseq.TARGETS``: probed backends, documented ones,
``portable`` and ``any``), a collection of profile names (the output must run on every
one of them: their profiles combined as ``portable`` combines the probed ones), a
collection of op types (profile names may be mixed in: their op types are added), or
None for the ``portable`` default.
"""

from __future__ import annotations

__all__ = ["ANY", "TARGETS", "Target", "dtype_name", "resolve_target"]

import difflib
from collections.abc import Iterable, Mapping

import onnx.defs
import onnx_ir as ir

from revseq.ops._index import INT64_INDEX, MUL_DIM
from revseq.ops.errors import StrategyError
from revseq.ops.forms import REVERSING_SLICE, REVERSING_SLICE_HIGH_RANK
from revseq.ops.profiles import ELEMENT_TYPES, PORTABLE, Profile, load_profiles, portable

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

# What profiles name besides op types: variants ("Gather:int32", "Index:int32", ...).
_CAPABILITIES = frozenset(
    op
    for profile in TARGETS.values()
    for ops in (profile.static_ops, profile.dynamic_ops)
    if ops is not None
    for op in ops
)

# The variants an op type named in a collection brings: ONNX's own op does them.
_IMPLIED = {"Mul": (MUL_DIM,), "Slice": (REVERSING_SLICE, REVERSING_SLICE_HIGH_RANK)}

_DTYPE_NAMES = {ir.DataType(elem): name for name, elem in ELEMENT_TYPES.items()}


def dtype_name(dtype: ir.DataType | None) -> str | None:
    """The profile's name of an element type (numpy's, "string" for strings)."""
    if dtype is None:
        return None
    return _DTYPE_NAMES.get(dtype, dtype.name.lower())


def _unknown_target(name: str) -> StrategyError:
    close = difflib.get_close_matches(name, list(TARGETS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return StrategyError(
        f"unknown target {name!r}{hint}; choose one of {', '.join(sorted(TARGETS))} "
        "or pass a collection of ONNX op types"
    )


def resolve_target(target: Target) -> Profile:
    """The profile for ``target``.

    Raises:
        StrategyError: A profile name is unknown (a bare string must name a profile),
            or an item of a collection is neither a profile nor an ONNX op type.
    """
    if target is None:
        return TARGETS[PORTABLE]
    if isinstance(target, Profile):
        return target
    if isinstance(target, str):
        if target not in TARGETS:
            raise _unknown_target(target)
        return TARGETS[target]
    names = sorted(set(target))
    if names and all(name in TARGETS for name in names):
        profiles = [TARGETS[name] for name in names]
        if any(p.static_ops is None for p in profiles):  # "any" adds no constraint
            profiles = [p for p in profiles if p.static_ops is not None] or [ANY]
        if len(profiles) == 1:
            return profiles[0]
        return portable(profiles, name="+".join(p.name for p in profiles))
    static: set[str] = set()
    dynamic: set[str] = set()
    for item in names:
        profile = TARGETS.get(item)
        if profile is None:
            if not (onnx.defs.has(item) or item in _CAPABILITIES):
                raise _unknown_target(item)
            # Op types name ONNX, whose index arithmetic is int64, whose Mul takes a
            # dim read from a shape and whose Slice steps back (variants aside).
            named = {item, INT64_INDEX, *_IMPLIED.get(item, ())}
            static |= named
            dynamic |= named
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
