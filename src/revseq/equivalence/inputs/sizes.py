"""The sizes a check runs at: what the user says of the inputs, and what the model needs.

What the user says of a model's inputs: values, sizes of symbolic dims, value ranges. A
check generates what the user does not give. Given values stay the same in every
trial and fix the sizes of the symbolic dims they are declared with, so that the
generated inputs fit them; sizes (``dims``, ``input_shapes``) fix dims without giving
values; a value range bounds an input's generated values. Every name is checked against
the model before anything runs: a typo is an error naming the names there are.

Generated sizes start small (1 among them, which finds batch and broadcast bugs), but
real models need more: a Conv needs its kernel's length, a reflect Pad two steps, an
audio front end a frame. Where the reference fails on the generated inputs,
:func:`larger_sizes` proposes sizes to try: one dim at a time up a ladder of powers of
two (which also divide evenly where a Reshape splits a dim), then all of them together
(which also makes dims named differently but broadcast together equal). The first that
runs is taken, and the report says which size was chosen and why.
"""

from __future__ import annotations

__all__ = [
    "MAX_FIT_RUNS",
    "concrete_dims",
    "dim_key",
    "draw_sizes",
    "explain_failure",
    "FittedSizes",
    "fixed_by",
    "given_inputs",
    "GivenInputs",
    "input_shapes",
    "larger_sizes",
    "runtime_reason",
    "sizes_of_one",
]

import dataclasses
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import onnx

from revseq.errors import CheckError
from revseq.passes.graph.scopes import run_time_input_infos


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


logger = logging.getLogger(__name__)

# Sizes given to symbolic dimensions, trial after trial; 1 comes early on purpose.
# --- The sizes a model runs with, and what to say when none is found -------------------
_SIZES = (3, 1, 4, 2, 5)


def draw_sizes(
    infos: Sequence[onnx.ValueInfoProto],
    trial: int,
    floors: Mapping[str, int],
    pinned: Mapping[str, int],
) -> dict[str, int]:
    """A size for each symbolic dim of the inputs: pinned, else drawn for the trial."""
    symbols: dict[str, int] = {}
    for info in infos:
        for axis in range(len(info.type.tensor_type.shape.dim)):
            key = dim_key(info, axis)
            if key is None or key in symbols:
                continue
            if key in pinned:
                symbols[key] = pinned[key]
                continue
            size = _SIZES[(trial + len(symbols)) % len(_SIZES)]
            symbols[key] = max(size, floors.get(key, 0))
    return symbols


def concrete_dims(info: onnx.ValueInfoProto, symbols: Mapping[str, int]) -> tuple[int, ...]:
    """The input's shape with each symbolic dim at its size in ``symbols``."""
    return tuple(
        d.dim_value if d.HasField("dim_value") else symbols[dim_key(info, axis) or ""]
        for axis, d in enumerate(info.type.tensor_type.shape.dim)
    )


def input_shapes(
    infos: Sequence[onnx.ValueInfoProto], symbols: Mapping[str, int], given: GivenInputs
) -> dict[str, tuple[int, ...]]:
    """Each input's shape: a given value's own, else its dims with these sizes."""
    return {
        i.name: (
            tuple(np.shape(given.values[i.name]))
            if i.name in given.values
            else concrete_dims(i, symbols)
        )
        for i in infos
    }


# The largest size a dim is grown to, and the most elements all inputs may hold then.
_LADDER = tuple(2**k for k in range(1, 17))
_MAX_ELEMENTS = 1 << 22
MAX_FIT_RUNS = 96
"""The most runs of the reference spent looking for sizes it runs with, per trial."""


def larger_sizes(
    sizes: Mapping[str, int],
    free: Sequence[str],
    elements: Callable[[Mapping[str, int]], int],
) -> Iterator[dict[str, int]]:
    """Sizes to try: one dim raised to another's, then each alone up the ladder, then all.

    ``elements(sizes)`` counts the elements every input would hold; candidates above
    ``_MAX_ELEMENTS`` are skipped.
    """
    seen: set[tuple[int, ...]] = {tuple(sizes[k] for k in free)}
    # First one dim raised to another's size: dims named apart may be broadcast together.
    for key in free:
        for size in sorted({sizes[k] for k in free if sizes[k] > sizes[key]}):
            each = {**sizes, key: size}
            seen.add(tuple(each[k] for k in free))
            yield each
    for step in _LADDER:
        tries = [{**sizes, key: step} for key in free if sizes[key] < step]
        if len(free) > 1:
            tries.append({**sizes, **{key: max(sizes[key], step) for key in free}})
        for each in tries:
            key = tuple(each[k] for k in free)
            if key in seen or elements(each) > _MAX_ELEMENTS:
                continue
            seen.add(key)
            yield each


@dataclasses.dataclass
class FittedSizes:
    """The sizes the reference ran with where the drawn ones failed.

    Later trials start there, and the report says why.

    Attributes:
        floors: Sizes dims grew to (later trials draw at least these).
        ones: Dims the reference ran with only at 1 (later trials keep 1).
        lines: What was fitted, trial by trial, for the report.
    """

    floors: dict[str, int] = dataclasses.field(default_factory=dict)
    ones: set[str] = dataclasses.field(default_factory=set)
    lines: list[str] = dataclasses.field(default_factory=list)

    def record(
        self,
        trial: int,
        drawn: Mapping[str, int],
        sizes: Mapping[str, int],
        free: Sequence[str],
        reason: str,
    ) -> None:
        """The reference ran at ``sizes`` where ``drawn`` failed (``reason``)."""
        changed = [k for k in free if sizes[k] != drawn[k]]
        text = ", ".join(f"{k} {drawn[k]} -> {sizes[k]}" for k in changed)
        if all(sizes[k] == 1 for k in changed):  # it runs only there: 1 from now on
            self.lines.append(
                f"dims set to 1: {text} (trial {trial}; the reference ran at no larger "
                f"size tried: {reason})"
            )
            self.ones.update(changed)
        else:
            self.lines.append(f"dims grown: {text} (trial {trial}; before, {reason})")
            for key in changed:
                self.floors[key] = max(self.floors.get(key, 0), sizes[key])
        logger.info("trial %d: symbolic dims fitted: %s", trial, text)


def sizes_of_one(sizes: Mapping[str, int], free: Sequence[str]) -> Iterator[dict[str, int]]:
    """Sizes to try where no larger ones run: each dim alone at 1, then all of them.

    Some models run only at 1 (an exporter baked batch 1 into a Reshape or Squeeze).
    """
    above = [key for key in free if sizes[key] > 1]
    for key in above:
        yield {**sizes, key: 1}
    if len(above) > 1:
        yield {**sizes, **dict.fromkeys(above, 1)}


_ORT_NODE = re.compile(r"running (\w+) node\. Name:'([^']*)'")
_ASSERTION = re.compile(r"^/\S+:\d+ .*? was false\. ")
_ORT_MESSAGE = re.compile(r"running (\w+) node\. Name:'([^']*)' Status Message: (.*)")


def runtime_reason(text: str) -> str:
    """A runtime's failure, short: onnxruntime's as ``Op 'name': message``."""
    found = _ORT_MESSAGE.search(text)
    if found is None:
        return text
    op_type, name, message = found.groups()
    # A failed assertion leads with its source file, function and condition.
    message = _ASSERTION.sub("", message)
    return f"{op_type} {name!r}: {message}" if name else f"{op_type}: {message}"


def _failing_node(model: onnx.ModelProto, text: str) -> onnx.NodeProto | None:
    """The main-graph node an onnxruntime error names, if it names one."""
    found = _ORT_NODE.search(text)
    if found is None:
        return None
    op_type, name = found.groups()
    for node in model.graph.node:
        if node.op_type == op_type and node.name == name:
            return node
    return None


def _feeding_inputs(model: onnx.ModelProto, node: onnx.NodeProto) -> list[str]:
    """The graph inputs ``node`` computes from (initializers left out), in graph order."""
    producers = {o: n for n in model.graph.node for o in n.output if o}
    inputs = [i.name for i in run_time_input_infos(model)]
    seen: set[str] = set()
    stack = [v for v in node.input if v]
    while stack:
        value = stack.pop()
        if value in seen:
            continue
        seen.add(value)
        producer = producers.get(value)
        if producer is not None:
            stack.extend(v for v in producer.input if v)
    return [name for name in inputs if name in seen]


def explain_failure(
    model: onnx.ModelProto,
    text: str,
    *,
    generated: Sequence[str],
    symbols: Mapping[str, int],
) -> str:
    """Where the reference failed on generated inputs, and what the user can give.

    ``text`` is the runtime's message; ``generated`` the inputs revseq made up;
    ``symbols`` the sizes of the symbolic dims it tried last.
    """
    node = _failing_node(model, text)
    where = ""
    suspects = list(generated)
    if node is not None:
        label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
        feeding = _feeding_inputs(model, node)
        suspects = [n for n in feeding if n in generated] or suspects
        where = f" at {label}"
        if feeding:
            where += f" (computed from {', '.join(map(repr, feeding))})"
    infos = {i.name: i for i in model.graph.input}
    integers = [
        n
        for n in suspects
        if n in infos
        and onnx.helper.tensor_dtype_to_np_dtype(infos[n].type.tensor_type.elem_type).kind
        in "iu"
    ]
    hints = [f"--val-range {name}:[LO,HI]" for name in integers[:2]]
    if symbols:
        hints.append("--dims " + ",".join(f"{k}=N" for k in list(symbols)[:2]))
    hints.append(f"--input {suspects[0] if suspects else 'NAME'}=FILE.npy")
    sizes = ", ".join(f"{k}={v}" for k, v in symbols.items())
    tried = f" with {sizes}" if sizes else ""
    if node is not None:  # the node is named already: the runtime's reason alone
        text = runtime_reason(text).partition(": ")[2] or text
    return (
        f"the reference cannot run on generated inputs{where}{tried}: {text}; "
        f"say what it needs: {' or '.join(hints)}"
    )
