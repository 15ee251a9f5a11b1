"""Carrier types: moving an element type a target's gathers lack through one they have.

Where no form's gather moves a node's element type on the target, the data can be cast
to an integer type that holds every value of it (``CARRIERS``), reversed in that type and
cast back: a gather only moves elements, so the same bytes come out. A target takes a
carrier only where its probe ran the round trip exactly (``carrier_variant``): uint64
rides in int64 by a wrapping Cast, which ONNX leaves to the backend, and onnxruntime-web
runs some of these Casts on the CPU only. Floating-point types have none: a widening
Cast may quiet a signalling NaN, and the bytes must survive.
"""

from __future__ import annotations

__all__ = ["CARRIERS", "CARRIER_VARIANTS", "carrier_pair", "carrier_variant"]

import onnx_ir as ir

from revseq.ops.vocabulary import ELEMENT_TYPES

CARRIERS: dict[str, str] = {
    "bool": "int32",
    "int8": "int32",
    "uint8": "int32",
    "int16": "int32",
    "uint16": "int32",
    "uint32": "int64",
    "uint64": "int64",
}
"""Each element type that has a carrier, and that carrier: every value of the type, cast
to it and back, is itself again (bool as 0 and 1; uint64 bit for bit, wrapping)."""


def carrier_variant(dtype: str) -> str:
    """The profile variant saying a backend runs ``dtype``'s round trip exactly."""
    return f"Cast:{dtype}>{CARRIERS[dtype]}"


CARRIER_VARIANTS = frozenset(carrier_variant(dtype) for dtype in CARRIERS)
"""Every carrier round trip a profile may list."""


_PAIRS = frozenset(
    (ir.DataType(ELEMENT_TYPES[dtype]), ir.DataType(ELEMENT_TYPES[carrier]))
    for dtype, carrier in CARRIERS.items()
)


def carrier_pair(source: ir.DataType | None, carrier: ir.DataType | None) -> bool:
    """Whether ``carrier`` is the carrier of ``source`` (a round trip restores it)."""
    return (source, carrier) in _PAIRS
