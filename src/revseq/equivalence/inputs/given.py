"""What the user says of a model's inputs: values, sizes of symbolic dims, value ranges.

A check generates what the user does not give. Given values stay the same in every
trial and fix the sizes of the symbolic dims they are declared with, so that the
generated inputs fit them; sizes (``dims``, ``input_shapes``) fix dims without giving
values; a value range bounds an input's generated values. Every name is checked against
the model before anything runs: a typo is an error naming the names there are.
"""

from __future__ import annotations

__all__ = ["GivenInputs", "dim_key", "fixed_by", "given_inputs"]

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import onnx

from revseq.errors import CheckError


def dim_key(info: onnx.ValueInfoProto, axis: int) -> str | None:
    """The name a symbolic dim goes by: its symbol, else ``input:axis``; None if static."""
    dim = info.type.tensor_type.shape.dim[axis]
    if dim.HasField("dim_value"):
        return None
    return dim.dim_param or f"{info.name}:{axis}"


def _declared(info: onnx.ValueInfoProto) -> tuple[int | str, ...] | None:
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(
        d.dim_value if d.HasField("dim_value") else (dim_key(info, a) or "")
        for a, d in enumerate(tensor.shape.dim)
    )


@dataclasses.dataclass(frozen=True)
class GivenInputs:
    """What the user gives; everything else is generated.

    Attributes:
        values: Arrays by input name, the same in every trial.
        dims: Sizes by symbol name (``{"T": 64, "B": 2}``; a dim without a symbol is
            named ``input:axis``).
        input_shapes: Whole shapes by input name, fixing its symbolic dims.
        value_ranges: Inclusive ``(low, high)`` bounds of an input's generated values.
    """

    values: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    input_shapes: Mapping[str, Sequence[int]] = dataclasses.field(default_factory=dict)
    value_ranges: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.values or self.dims or self.input_shapes or self.value_ranges)

    def pinned(self, infos: Sequence[onnx.ValueInfoProto]) -> dict[str, int]:
        """The sizes the user fixed, by dim key, after checking every name and size.

        Raises:
            CheckError: An unknown input or symbol, a value or shape whose rank or static
                dims differ from the model's, a bad range, or two sizes for one symbol.
        """
        by_name = {i.name: i for i in infos}
        self._check_names(by_name)
        pins = _Pins()
        for name, shape in [
            *((n, tuple(np.shape(v))) for n, v in self.values.items()),
            *((n, tuple(int(d) for d in s)) for n, s in self.input_shapes.items()),
        ]:
            _pin_shape(pins, by_name[name], shape)
        symbols = {
            key for info in infos for key in (_declared(info) or ()) if isinstance(key, str)
        }
        for key, size in self.dims.items():
            if key not in symbols:
                known = ", ".join(sorted(symbols)) or "none"
                raise CheckError(f"dims: the model has no symbolic dim {key!r} (its: {known})")
            pins.pin(key, int(size), f"dims {key}={size}")
        for name, value in self.values.items():
            _check_value_type(by_name[name], np.asarray(value))
        return pins.sizes

    def _check_names(self, by_name: Mapping[str, onnx.ValueInfoProto]) -> None:
        """Refuse a name the model has no input of, and a range whose low is above high."""
        names = ", ".join(by_name) or "none"
        for what, keys in (
            ("values", self.values),
            ("input_shapes", self.input_shapes),
            ("value_ranges", self.value_ranges),
        ):
            for name in keys:
                if name not in by_name:
                    raise CheckError(
                        f"{what}: the model has no input named {name!r} (its inputs: {names})"
                    )
        for name, (low, high) in self.value_ranges.items():
            if not low <= high:
                raise CheckError(f"value_ranges: {name!r} has low {low} above high {high}")


class _Pins:
    """Sizes fixed by dim key, each with what fixed it: one symbol is given one size."""

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}
        self._sources: dict[str, str] = {}

    def pin(self, key: str, size: int, source: str) -> None:
        if size < 0:
            raise CheckError(f"{source}: size {size} of {key!r} is negative")
        if key in self.sizes and self.sizes[key] != size:
            raise CheckError(
                f"{source} makes {key!r} {size}, but {self._sources[key]} makes it "
                f"{self.sizes[key]}"
            )
        self.sizes[key], self._sources[key] = size, source


def _pin_shape(pins: _Pins, info: onnx.ValueInfoProto, shape: tuple[int, ...]) -> None:
    """Pin the symbols of ``info`` a given value's or shape's sizes fix; refuse a misfit."""
    source = f"input {info.name!r} {list(shape)}"
    declared = _declared(info)
    if declared is None:
        return
    if len(declared) != len(shape):
        raise CheckError(
            f"{source}: the model declares rank {len(declared)} "
            f"({_text(declared)}), not {len(shape)}"
        )
    for dim, size in zip(declared, shape, strict=True):
        if isinstance(dim, int):
            if dim != size:
                raise CheckError(f"{source}: the model declares {_text(declared)}")
        else:
            pins.pin(dim, size, source)


def _check_value_type(info: onnx.ValueInfoProto, value: np.ndarray) -> None:
    """Refuse a given value of another element type than the input's."""
    elem = info.type.tensor_type.elem_type
    if elem and elem != onnx.TensorProto.STRING:
        expected = onnx.helper.tensor_dtype_to_np_dtype(elem)
        if value.dtype != expected:
            raise CheckError(
                f"input {info.name!r}: the model takes {np.dtype(expected).name}, "
                f"the value given is {value.dtype.name}"
            )


def _text(dims: tuple[int | str, ...]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def fixed_by(cand: onnx.ModelProto, ref: onnx.ModelProto) -> dict[str, list[int]]:
    """The inputs whose sizes ``cand`` declares all static where ``ref`` has symbols."""

    def dims(info: onnx.ValueInfoProto) -> list[int | None]:
        shape = info.type.tensor_type.shape
        return [d.dim_value if d.HasField("dim_value") else None for d in shape.dim]

    ref_dims = {i.name: dims(i) for i in ref.graph.input}
    fixed = {}
    for info in cand.graph.input:
        ours, theirs = dims(info), ref_dims.get(info.name)
        if theirs is None or len(ours) != len(theirs) or None in ours or None not in theirs:
            continue
        fixed[info.name] = [int(d) for d in ours]
    return fixed


def given_inputs(
    inputs: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]] | None,
    dims: Mapping[str, int] | None,
    input_shapes: Mapping[str, Sequence[int]] | None,
    value_ranges: Mapping[str, tuple[float, float]] | None,
) -> tuple[GivenInputs, list[Mapping[str, np.ndarray]] | None]:
    """What the user gives, and their input sets where they give one per trial."""
    sets = None
    values: Mapping[str, np.ndarray] = {}
    if isinstance(inputs, Mapping):
        values = inputs
    elif inputs is not None:
        sets = list(inputs)
        if not sets:
            raise CheckError("inputs: an empty sequence of input sets")
    given = GivenInputs(
        values=values,
        dims=dict(dims or {}),
        input_shapes=dict(input_shapes or {}),
        value_ranges=dict(value_ranges or {}),
    )
    return given, sets
