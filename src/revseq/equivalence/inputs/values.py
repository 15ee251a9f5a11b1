"""Random values of every element type, holding what a copy must keep byte for byte.

Floats hold a quiet NaN with a payload, a signalling NaN with its sign set, infinities,
-0.0 and subnormals: a candidate that computes on the data instead of moving it
(``x * 1`` sets a signalling NaN's quiet bit) differs there. Lengths are drawn in
[0, T] so that every trial holds 0, 1, T and one strictly between
(:func:`lengths_pattern`, :func:`covering_lengths`).
"""

from __future__ import annotations

__all__ = [
    "FLOATS",
    "MIN_TELLING_T",
    "NAN_PAYLOADS",
    "covering_lengths",
    "drawn",
    "held",
    "lengths_pattern",
    "random_array",
    "ranged_array",
    "zeros",
]

from collections.abc import Mapping

import ml_dtypes
import numpy as np
import onnx

_COMPLEX = {onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128}


def random_array(
    rng: np.random.Generator, elem: int, shape: tuple[int, ...], *, specials: bool = True
) -> np.ndarray:
    """Random values of the ONNX element type ``elem``.

    With ``specials``, floats include the NaNs of ``NAN_PAYLOADS`` (a quiet one with a
    payload, a signalling one with its sign set, each in several places), infinities,
    -0.0 and subnormals: a copy must keep every byte. Without, they are finite normals,
    for comparisons across runtimes whose arithmetic may round differently.
    """
    np_type = onnx.helper.tensor_dtype_to_np_dtype(elem)
    size = int(np.prod(shape))
    if elem == onnx.TensorProto.STRING:
        words = np.array(["", "a", "revseq", "ñandú", "🙂", "two words"], dtype=object)
        return rng.choice(words, size=shape).astype(object)
    if elem == onnx.TensorProto.BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if elem in _COMPLEX:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_type)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        return rng.integers(info.min, info.max, shape, dtype=np_type, endpoint=True)
    if elem == onnx.TensorProto.BFLOAT16:
        np_type = ml_dtypes.bfloat16
    values = rng.standard_normal(size).astype(np.float64)
    if not specials:
        return values.astype(np_type).reshape(shape)
    for special in [-0.0, np.inf, -np.inf, 1e-40, -1e-310][: size // 4]:
        values[rng.integers(0, size)] = special  # NaNs: NAN_PAYLOADS, below
    array = values.astype(np_type).reshape(shape)
    payloads = NAN_PAYLOADS.get(np.dtype(np_type), ())
    # Each at several places: a vectorised kernel may quiet a NaN in some lanes only.
    places = rng.permutation(size)[: len(payloads) * max(1, size // 16)]
    bits = array.reshape(-1).view(np.dtype(f"u{array.itemsize}"))
    for i, payload in enumerate(payloads):
        bits[places[i :: len(payloads)]] = payload
    return array


def ranged_array(
    rng: np.random.Generator, elem: int, shape: tuple[int, ...], low: float, high: float
) -> np.ndarray:
    """Random values of the ONNX element type ``elem`` in ``[low, high]``.

    Integers are drawn whole (both ends included, clipped to the type's range); floats
    uniformly; booleans as 0/1 within the range.
    """
    np_type = onnx.helper.tensor_dtype_to_np_dtype(elem)
    if elem == onnx.TensorProto.BFLOAT16:
        np_type = ml_dtypes.bfloat16
    if elem == onnx.TensorProto.STRING:
        return random_array(rng, elem, shape)
    if elem == onnx.TensorProto.BOOL:
        lo, hi = max(int(np.ceil(low)), 0), min(int(np.floor(high)), 1)
        return rng.integers(lo, max(lo, hi), shape, endpoint=True).astype(np.bool_)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        lo = min(max(int(np.ceil(low)), int(info.min)), int(info.max))
        hi = max(min(int(np.floor(high)), int(info.max)), lo)
        return rng.integers(lo, hi, shape, dtype=np_type, endpoint=True)
    values = rng.uniform(low, high, shape)
    if elem in _COMPLEX:
        values = values + 1j * rng.uniform(low, high, shape)
    return values.astype(np_type)


NAN_PAYLOADS: dict[np.dtype, tuple[int, ...]] = {
    np.dtype(np.float16): (0x7E01, 0xFC01),
    np.dtype(np.float32): (0x7FC00123, 0xFF800123),
    np.dtype(np.float64): (0x7FF8000000000123, 0xFFF0000000000123),
    np.dtype(ml_dtypes.bfloat16): (0x7FC1, 0xFF81),
}
"""NaNs that a copy must keep bit for bit, per float type: a quiet NaN with a payload,
and a signalling one with its sign set. Arithmetic quiets a signalling NaN (``x * 1``
sets its quiet bit), and some kernels canonicalise a NaN's sign or payload: a
decomposition that computes on the data instead of moving it shows here."""


def held(feeds: Mapping[str, np.ndarray], storage: Mapping[str, str]) -> dict[str, np.ndarray]:
    """``feeds`` as a backend that holds some types narrower holds them (``storage``).

    Each array of a type ``storage`` names is rounded to the narrower type and back as
    IEEE 754 converts: to nearest, a NaN keeping its sign and the top of its payload,
    quieted (numpy's cast keeps a signalling NaN signalling, a backend's conversion
    does not). The rest are as given.
    """
    out = {}
    for name, given in feeds.items():
        array = np.asarray(given)
        narrow = storage.get(array.dtype.name)
        out[name] = array if narrow is None else _round_trip(array, np.dtype(narrow))
    return out


def _round_trip(array: np.ndarray, narrow: np.dtype) -> np.ndarray:
    kept = array.astype(narrow)
    wide_bits = array.view(np.dtype(f"u{array.itemsize}"))
    bits = kept.view(np.dtype(f"u{kept.itemsize}"))
    wide, small = np.finfo(array.dtype), np.finfo(narrow)
    nan = np.isnan(array)
    sign = (wide_bits[nan] >> (8 * array.itemsize - 1)).astype(bits.dtype)
    payload = (wide_bits[nan] >> (wide.nmant - small.nmant)).astype(bits.dtype)
    exponent = ((1 << small.nexp) - 1) << small.nmant
    quiet = 1 << (small.nmant - 1)
    mantissa = (payload & ((1 << small.nmant) - 1)) | quiet
    bits[nan] = (sign << (8 * kept.itemsize - 1)) | exponent | mantissa
    return kept.astype(array.dtype)


FLOATS = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
})  # fmt: skip
"""The element types ``random_array`` draws NaN payloads, -0.0 and infinities of."""


def drawn(elem: int, *, reversed_: bool, specials: bool, finite_because: str) -> str:
    """What ``random_array`` drew for an input of ``elem``, said for a report.

    ``reversed_``: the input reaches a reversal and an output unchanged; ``specials``:
    the check draws NaN payloads, -0.0 and infinities there (else ``finite_because``).
    """
    if elem not in FLOATS:
        return "generated over its type's range"
    if not reversed_:
        return "generated finite, standard normal (no output holds it merely reversed)"
    if specials:
        return "generated, with NaN payloads, -0.0 and infinities (it is reversed)"
    return (
        f"generated finite, standard normal (it is reversed, but {finite_because} "
        "draws no NaN, inf or -0.0)"
    )


# --- Zeros, and the lengths drawn: 0, 1, T and between ----------------------------------
def zeros(elem: int, shape: tuple[int, ...]) -> np.ndarray:
    """Zeros (empty strings) of ONNX element type ``elem``."""
    if elem == onnx.TensorProto.STRING:
        return np.full(shape, "", dtype=object)
    if elem == onnx.TensorProto.BFLOAT16:
        return np.zeros(shape, ml_dtypes.bfloat16)
    return np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(elem))


def lengths_pattern(
    rng: np.random.Generator, time_len: int, shape: tuple[int, ...], trial: int
) -> np.ndarray:
    """Lengths in [0, T]; across three trials the first and last include 0, 1 and T."""
    values = rng.integers(0, time_len, shape, endpoint=True)
    flat = values.reshape(-1)
    if flat.size:
        flat[0] = (0, 1, time_len)[trial % 3]
        flat[-1] = (time_len, 0, 1)[trial % 3] if flat.size > 1 else flat[0]
    return values


MIN_TELLING_T = 4
"""The shortest time axis on which lengths strictly between 1 and T come in two values."""


def covering_lengths(
    rng: np.random.Generator, time_len: int, shape: tuple[int, ...], dtype: np.dtype
) -> list[np.ndarray]:
    """Lengths vectors of ``shape`` in [0, T] that hold 0, 1, T and one strictly between.

    The one between (2 <= l <= T - 1, where T >= 3) tells a wrong clamp or select that
    0, 1 and T alone do not; a batch too small to hold the four gets more vectors.
    Where the four fall is drawn; the other entries are random.
    """
    size = int(np.prod(shape))
    if size == 0:
        return [np.zeros(shape, dtype)]
    wanted = [0, 1, time_len]
    if time_len >= 3:
        wanted.append(int(rng.integers(2, time_len)))
    vectors = []
    for start in range(0, len(wanted), size):
        flat = rng.integers(0, time_len, size, endpoint=True)
        chunk = wanted[start : start + size]
        flat[rng.permutation(size)[: len(chunk)]] = chunk
        vectors.append(flat.reshape(shape).astype(dtype))
    return vectors
