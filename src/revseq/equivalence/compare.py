"""Comparing outputs: bit for bit, or within a stated tolerance across runtimes."""

from __future__ import annotations

__all__ = ["Difference", "Largest", "first_difference", "first_difference_beyond", "largest"]

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


@dataclasses.dataclass(frozen=True)
class Largest:
    """The largest errors of one output across runtimes, over every trial compared.

    Attributes:
        output: The output's name.
        absolute: The largest ``|expected - got|`` (inf where one side is NaN or inf
            and the other is not).
        relative: The largest ``|expected - got| / |expected|`` over the expected values
            that are finite and nonzero.
    """

    output: str
    absolute: float
    relative: float

    def merged(self, other: Largest) -> Largest:
        """The larger of each error, over both."""
        return Largest(
            self.output, max(self.absolute, other.absolute), max(self.relative, other.relative)
        )

    def __str__(self) -> str:
        return (
            f"{self.output!r}: largest absolute error {self.absolute:.3g}, "
            f"relative {self.relative:.3g}"
        )


def largest(name: str, expected: np.ndarray, got: np.ndarray) -> Largest | None:
    """The largest absolute and relative errors of ``got`` against ``expected``.

    None where they cannot be measured so (another dtype or shape, not numbers). NaN
    against NaN and an infinity against the same one count as no error.
    """
    expected, got = np.asarray(expected), np.asarray(got)
    if _layout_difference(expected, got) is not None or expected.dtype.kind not in "fciu":
        return None
    if not expected.size:
        return Largest(name, 0.0, 0.0)
    wide = np.complex128 if expected.dtype.kind == "c" else np.float64
    a, b = expected.astype(wide), got.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        error = np.where(same, 0.0, np.abs(a - b))
        error = np.where(np.isnan(error), np.inf, error)
        scale = np.abs(a)
        finite = (scale > 0) & np.isfinite(scale)  # the relative error is defined there
        relative = np.where(finite, error / np.where(finite, scale, 1.0), 0.0)
    return Largest(name, float(error.max()), float(relative.max()))
