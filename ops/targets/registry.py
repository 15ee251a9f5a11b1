"""Targets: what ``target=`` accepts, resolved to the profile the planner reads.

A target is a profile name (``revseq.TARGETS``: probed backends, documented ones,
``portable`` and ``any``), a collection of profile names (the output must run on every
one of them: their profiles combined as ``portable`` combines the probed ones), a
collection of op types (profile names may be mixed in: their op types are added), or
None for the ``portable`` default.
"""

from __future__ import annotations

__all__ = [
    "ANY",
    "PORTABLE",
    "TARGETS",
    "Target",
    "combine",
    "load_profiles",
    "resolve_target",
    "shipped_profile_files",
    "user_profiles",
]

import difflib
import functools
import importlib.resources
import os
import pathlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import onnx.defs

from revseq.errors import StrategyError
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import (
    DYNAMIC,
    ELEMENT_TYPES,
    GATHER_KINDS,
    INT64_INDEX,
    MUL_DIM,
    REVERSING_SLICE,
    REVERSING_SLICE_HIGH_RANK,
    STATIC,
)

if TYPE_CHECKING:  # importlib.resources.abc from Python 3.11
    from importlib.resources.abc import Traversable

PORTABLE = "portable"
"""The name of the computed default profile."""

ANY = Profile(
    name="any",
    source="onnx",
    description="any standard ONNX op: the fastest forms, for runtimes with full ONNX",
    backend_version=None,
    native=None,
    static_ops=None,
    dynamic_ops=None,
)
"""No restriction at all (``target="any"``)."""

Target = str | Iterable[str] | Profile | None


def user_profiles() -> pathlib.Path:
    """The folder of the user's own profiles (``revseq probe NAME --write`` saves there).

    ``$REVSEQ_PROFILES``, else ``$XDG_CONFIG_HOME/revseq/profiles``, else
    ``~/.config/revseq/profiles``: outside the installed package, so an upgrade keeps
    them and a read-only install takes them.
    """
    folder = os.environ.get("REVSEQ_PROFILES")
    if folder:
        return pathlib.Path(folder)
    config = os.environ.get("XDG_CONFIG_HOME") or pathlib.Path.home() / ".config"
    return pathlib.Path(config) / "revseq" / "profiles"


def _name(entry: Traversable) -> str:
    return entry.name


def shipped_profile_files() -> list[Traversable]:
    """The profile files shipped with revseq, by file name.

    Each runtime's room holds its probed profile (``src/revseq/backends/ROOM/NAME.json``,
    written there by ``revseq probe NAME --write``); ``profiles/`` here holds the
    documented ones (WebNN, QNN, CoreML, NNAPI: no runtime of theirs runs here). The
    rooms are data to the targets: read as files, never imported.
    """
    documented = importlib.resources.files("revseq.ops.targets") / "profiles"
    found = [e for e in documented.iterdir() if e.name.endswith(".json")]
    for room in (importlib.resources.files("revseq") / "backends").iterdir():
        if room.is_dir():
            found.extend(e for e in room.iterdir() if e.name.endswith(".json"))
    return sorted(found, key=_name)


@functools.cache
def load_profiles() -> dict[str, Profile]:
    """Every profile by name: revseq's own, the user's over them, and the portable one.

    The portable one is combined from the probed profiles of host backends: a device's
    kernels can lack what the same runtime's CPU kernels have and have what they lack
    (the profiles of one runtime on the CPU and on CUDA say so), so a default that held
    on both would refuse those types; a device has its own target. A deployment
    runtime with fewer ops than the rest (``Profile.yields``) is kept out too, so that
    it narrows no one else's output (lacking exact int32 index arithmetic, it would
    push every index to int64, which a GPU without int64 arithmetic copies back to its
    host); its own target serves it. A profile whose probe
    ran a form exact on finite data only gives a target of its own, ``NAME-finite``
    (``Profile.finite``).

    Raises:
        ProfileError: A profile file names something unknown.
    """
    own = user_profiles()
    entries = shipped_profile_files()
    if own.is_dir():
        entries += sorted((e for e in own.iterdir() if e.name.endswith(".json")), key=_name)
    profiles = {}
    for entry in entries:
        profile = Profile.read(entry)
        profiles[profile.name] = profile
    hosted = (p for p in profiles.values() if p.verified and p.device is None and not p.yields)
    profiles[PORTABLE] = combine(hosted)
    finite = (p.finite() for p in list(profiles.values()))
    profiles.update({p.name: p for p in finite if p is not None})
    return profiles


def combine(probed: Iterable[Profile], name: str = PORTABLE) -> Profile:
    """The profile (named ``name``) whose output runs on every one of ``probed``.

    Ops: those every profile runs (dynamic: every profile that runs dynamic shapes at
    all). Element types: a gather may move a type when every profile that moves that
    type with some gather moves it with this one (a type no probed backend has at all
    is left to every gather). Forms: those that ran everywhere.
    """
    probed = list(probed)
    if not probed:
        return Profile(
            name, "computed", "no probed profile", None, None, frozenset(), frozenset()
        )
    static_ops = frozenset.intersection(*(p.static_ops or frozenset() for p in probed))
    dynamic = [p for p in probed if p.dynamic_ops]
    dynamic_ops = (
        frozenset.intersection(*(p.dynamic_ops or frozenset() for p in dynamic))
        if dynamic
        else frozenset()
    )
    dtypes: dict[str, frozenset[str]] = {}
    for gather in GATHER_KINDS:
        keep = set()
        for dtype in ELEMENT_TYPES:
            if all(p.moves(gather, dtype) for p in probed if p.has(dtype)):
                keep.add(dtype)
        dtypes[gather] = frozenset(keep)
    forms = {
        kind: frozenset.intersection(
            *(p.forms[kind] for p in (probed if kind == STATIC else dynamic) if p.forms)
        )
        for kind in (STATIC, DYNAMIC)
        if any(p.forms for p in probed)
    }
    names = ", ".join(p.backend_version or p.name for p in probed)
    every = "every probed backend" if name == PORTABLE else "each of"
    return Profile(
        name=name,
        source="computed",
        description=f"runs on {every}: {names}",
        backend_version=None,
        native=None,
        static_ops=static_ops,
        dynamic_ops=dynamic_ops,
        dtypes=dtypes,
        forms=forms or None,
        members=tuple(probed),
    )


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


def _unknown_target(name: str) -> StrategyError:
    close = difflib.get_close_matches(name, list(TARGETS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return StrategyError(
        f"unknown target {name!r}{hint}: neither a profile ({', '.join(sorted(TARGETS))}) "
        "nor an ONNX op type"
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
        return combine(profiles, name="+".join(p.name for p in profiles))
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
            dynamic |= profile.dynamic_ops or frozenset()
    return Profile(
        name="+".join(names) if len(names) <= 3 else f"{len(names)} op types",
        source="ops",
        description="the op types given",
        backend_version=None,
        native=None,
        static_ops=frozenset(static),
        dynamic_ops=frozenset(dynamic),
    )
