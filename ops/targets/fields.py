"""What a profile file may hold: its keys, and the names each of its fields accepts.

A profile that names an op, variant, type or form revseq does not know fails to load
(``Profile.from_json``); these are the checks, and the orders its JSON is written in.
"""

from __future__ import annotations

__all__ = [
    "KEYS",
    "OLD_SOURCES",
    "capabilities",
    "check_keys",
    "element_types",
    "form_name",
    "form_names",
    "known",
    "ordered",
    "sorted_or_none",
]

from collections.abc import Iterable, Mapping

import onnx.defs

from revseq.errors import ProfileError
from revseq.ops.targets.carriers import CARRIER_VARIANTS
from revseq.ops.vocabulary import ELEMENT_TYPES, ONE_HOT, VARIANTS, split_form_name

OLD_SOURCES = {"probe": "probed", "documents": "documented"}
"""What profiles saved by earlier versions call their source."""


KEYS = frozenset(
    {
        "name",
        "source",
        "description",
        "node_cost",
        "backend_version",
        "native",
        "static_ops",
        "dynamic_ops",
        "dtypes",
        "forms",
        "costs",
        "layouts",
        "failures",
        "falls_back",
        "yields",
        "batch_leads",
        "rounding",
        "device",
        "tuning",
        "domain",
        "opset_limit",
    }
)


def ordered(types: Iterable[str]) -> list[str]:
    """Element types in ``ELEMENT_TYPES``' order (regenerated files diff cleanly)."""
    order = {t: i for i, t in enumerate(ELEMENT_TYPES)}
    return sorted(types, key=lambda t: order.get(t, len(order)))


def check_keys(data: Mapping) -> None:
    """Refuse a profile with a key revseq does not know."""
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ProfileError(f"unknown key {unknown[0]!r}")


def known(name: str, names: Iterable[str], what: str) -> str:
    """``name``, refused unless it is one of ``names`` (a ``what``)."""
    if name not in names:
        raise ProfileError(f"unknown {what} {name!r}")
    return name


def sorted_or_none(ops: frozenset[str] | None) -> list[str] | None:
    """Op types as JSON: None stays None (any op), not an empty list (none)."""
    return None if ops is None else sorted(ops)


def capabilities(names: Iterable[str] | None, field: str) -> frozenset[str] | None:
    """Op types and variants of ``field`` (None: any op), each one revseq knows."""
    if names is None:
        return None
    for name in names:
        if name not in VARIANTS and name not in CARRIER_VARIANTS and not onnx.defs.has(name):
            raise ProfileError(f"unknown op type or variant {name!r} in {field}")
    return frozenset(names)


def element_types(names: Iterable[str]) -> frozenset[str]:
    """Element types, each one ONNX's ReverseSequence takes."""
    return frozenset(known(name, ELEMENT_TYPES, "element type") for name in names)


def form_name(name: str) -> str:
    """A form's name, or one of its variants (``form@int32``), as revseq names them."""
    if split_form_name(name) is None and name != ONE_HOT:
        raise ProfileError(f"unknown form {name!r}")
    return name


def form_names(names: Iterable[str]) -> frozenset[str]:
    """Forms' names (``form_name``)."""
    return frozenset(form_name(name) for name in names)
