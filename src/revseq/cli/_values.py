"""What an option's text reads as: numbers at least some bound, named shapes and ranges.

Each is an ``argparse`` type: a malformed value is refused with the option it was
given to, in one line, before anything runs.
"""

from __future__ import annotations

__all__ = ["dim_sizes", "input_shape", "positive_int", "tolerance", "value_range"]

import argparse
from collections.abc import Callable


def _at_least(convert: Callable[[str], float], least: float, what: str) -> Callable:
    """An argument type: ``convert`` of the text, at least ``least`` (nan refused)."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not value >= least:  # also refuses nan
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {text}")
        return value

    return parse


positive_int = _at_least(int, 1, "a whole number")
tolerance = _at_least(float, 0, "a number")


def _numbers(text: str, convert: Callable[[str], float], what: str) -> list:
    """``[1,2]`` or ``1,2`` as numbers."""
    inner = text.strip().removeprefix("[").removesuffix("]")
    parts = [p for p in inner.split(",") if p.strip()] if inner else []
    try:
        return [convert(p.strip()) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _named(text: str, example: str) -> tuple[str, str]:
    """``NAME:REST``, split at the last colon (tf2onnx names inputs ``x:0``)."""
    name, colon, rest = text.rpartition(":")
    if not colon or not name:
        raise argparse.ArgumentTypeError(f"expected {example}, got {text!r}")
    return name, rest


def dim_sizes(text: str) -> dict[str, int]:
    """``T=64,B=2``: sizes of symbolic dims by name."""
    sizes = {}
    for part in text.split(","):
        name, equals, size = part.partition("=")
        if not equals or not name.strip():
            raise argparse.ArgumentTypeError(f"expected NAME=SIZE[,NAME=SIZE], got {text!r}")
        sizes[name.strip()] = int(_at_least(int, 0, "a size")(size.strip()))
    return sizes


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:[64,2]`` (polygraphy's form) or ``NAME:64,2`` (onnxsim's)."""
    name, rest = _named(text, "NAME:[D0,D1,...]")
    dims = _numbers(rest.replace("x", ","), int, "a shape")
    if any(d < 0 for d in dims):
        raise argparse.ArgumentTypeError(f"a negative size in {text!r}")
    return name, tuple(dims)


def value_range(text: str) -> tuple[str, tuple[float, float]]:
    """``NAME:[LO,HI]``: the inclusive range of an input's generated values."""
    name, rest = _named(text, "NAME:[LO,HI]")
    bounds = _numbers(rest, float, "a range")
    if len(bounds) != 2 or not bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"expected NAME:[LO,HI] with LO <= HI, got {text!r}")
    return name, (bounds[0], bounds[1])
