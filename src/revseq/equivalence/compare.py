"""Comparing outputs: bit for bit, or within a stated tolerance across runtimes."""

from __future__ import annotations

__all__ = ["Difference", "first_difference", "first_difference_beyond"]

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Difference:
    """Where two arrays first differ.

    Attributes:
        index: The element, or None when the dtypes or shapes differ.
        expected: The reference's value there (or its dtype and shape).
        got: The candidate's value there (or its dtype and shape).
    """

    index: tuple[int, ...] | None
    expected: object
    got: object

    @property
    def where(self) -> str:
        """``at [i, j]`` or ``in dtype/shape``."""
        return f"at {list(self.index)}" if self.index is not None else "in dtype/shape"


def _layout_difference(expected: np.ndarray, got: np.ndarray) -> Difference | None:
    if expected.shape != got.shape or expected.dtype != got.dtype:
        return Difference(
            None, f"{expected.dtype} {list(expected.shape)}", f"{got.dtype} {list(got.shape)}"
        )
    return None


@dataclasses.dataclass(frozen=True)
class Bits:
    """An element whose value prints like the other side's, shown with its bits.

    Two NaNs with other payloads, or a quieted signalling NaN, print alike as ``nan``.
    """

    value: object
    bits: str

    def __repr__(self) -> str:
        return f"{self.value!r} (bits {self.bits})"


def _first(differs: np.ndarray, expected: np.ndarray, got: np.ndarray) -> Difference | None:
    if not differs.any():
        return None
    index = tuple(int(i) for i in np.argwhere(differs)[0])
    a, b = expected.item(index), got.item(index)
    if repr(a) == repr(b) and expected.dtype != object:
        return Difference(index, _with_bits(expected, index), _with_bits(got, index))
    return Difference(index, a, b)


def _with_bits(array: np.ndarray, index: tuple[int, ...]) -> Bits:
    raw = np.ascontiguousarray(array[index]).tobytes()
    return Bits(array.item(index), "0x" + (raw[::-1] if np.little_endian else raw).hex())


def first_difference(expected: np.ndarray, got: np.ndarray) -> Difference | None:
    """None when the arrays are bit-identical (strings: equal by value)."""
    expected, got = np.asarray(expected), np.asarray(got)
    layout = _layout_difference(expected, got)
    if layout is not None:
        return layout
    if expected.dtype == object:
        differs = np.array(
            [a != b for a, b in zip(expected.reshape(-1), got.reshape(-1), strict=True)],
            dtype=bool,
        ).reshape(expected.shape)
        return _first(differs, expected, got)
    if expected.tobytes() == got.tobytes():
        return None
    width = expected.dtype.itemsize
    a = np.ascontiguousarray(expected).view(np.uint8).reshape((*expected.shape, width))
    b = np.ascontiguousarray(got).view(np.uint8).reshape((*got.shape, width))
    return _first((a != b).any(axis=-1), expected, got)


def first_difference_beyond(
    expected: np.ndarray, got: np.ndarray, *, rtol: float, atol: float
) -> Difference | None:
    """None when every element is within ``atol + rtol * |expected|`` (NaN matches NaN).

    For outputs computed by arithmetic that two runtimes may round differently; a
    non-numeric output is compared bit for bit.
    """
    expected, got = np.asarray(expected), np.asarray(got)
    layout = _layout_difference(expected, got)
    if layout is not None:
        return layout
    if expected.dtype.kind not in "fciu":
        return first_difference(expected, got)
    a = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
    b = got.astype(a.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    return _first(~close, expected, got)
