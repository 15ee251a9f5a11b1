"""Inputs for a check: random values of every type, lengths that exercise the reversal.

A check proves nothing about a reversal unless some lengths are 2 or more: a reversal of
at most one step is the identity. The lengths a ``sequence_lens`` input gets therefore
span 0..T of the node it feeds, with T learned from the data the node actually receives
(a first run of the model with every length 0), whatever computes that data: a MatMul,
an RNN, a Transpose.
"""

from __future__ import annotations

__all__ = [
    "InputGenerator",
    "Inputs",
    "LengthsInput",
    "lengths_pattern",
]

import dataclasses
import logging
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir

from revseq.equivalence.values import random_array
from revseq.ops.domains import ONNX_DOMAINS, REVSEQ_DOMAIN
from revseq.passes import is_reverse_sequence, walk

logger = logging.getLogger(__name__)

Inputs = dict[str, np.ndarray]

# Sizes given to symbolic dimensions, trial after trial; 1 comes early on purpose.
_SIZES = (3, 1, 4, 2, 5)


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


@dataclasses.dataclass(frozen=True)
class LengthsInput:
    """A graph input that feeds some node's ``sequence_lens``.

    Attributes:
        data: The graph input the node's data comes from unchanged, if any.
        data_dims: The node's data dims as declared (a size, a symbol or None).
        time_axis: The node's time axis.
        batch_axis: The node's batch axis: the lengths have the data's batch size there,
            whatever dim they are declared with (exporters give them a symbol of their
            own).
        observed: Main-graph data values whose time length the lengths must not exceed
            (read from a first run), with their time and batch axes.
    """

    data: str | None
    data_dims: tuple[int | str | None, ...] | None
    time_axis: int
    batch_axis: int = 1
    observed: tuple[tuple[str, int, int], ...] = ()


def _trace_to_input(value: ir.Value | None, inputs: set[str]) -> str | None:
    while value is not None:
        if value.name in inputs and value.producer() is None:
            return value.name
        node = value.producer()
        if node is None or node.op_type not in ("Cast", "Identity") or not node.inputs:
            return None
        value = node.inputs[0]
    return None


def _call_arguments(model: ir.Model) -> dict[int, list[ir.Value | None]]:
    """For each function parameter (by id), the arguments its call sites pass."""
    arguments: dict[int, list[ir.Value | None]] = {}
    for scoped in walk(model):
        function = model.functions.get(scoped.node.op_identifier())
        if function is None:
            continue
        for parameter, argument in zip(function.inputs, scoped.node.inputs, strict=False):
            arguments.setdefault(id(parameter), []).append(argument)
    return arguments


def lengths_inputs(model: ir.Model) -> dict[str, LengthsInput]:
    """Graph inputs that feed a ``sequence_lens``, with what their time length is.

    Lengths reach a node directly, through Cast/Identity, from an outer scope, or as
    the argument of a call to the model-local function that holds the node.
    """
    names = {v.name for v in model.graph.inputs if v.name}
    arguments = _call_arguments(model)

    def sources(value: ir.Value | None) -> list[ir.Value | None]:
        passed = arguments.get(id(value)) if value is not None else None
        return passed if passed else [value]

    found: dict[str, LengthsInput] = {}
    for scoped in walk(model):
        node = scoped.node
        if not is_reverse_sequence(node) or len(node.inputs) != 2:
            continue
        time_axis = node.attributes.get_int("time_axis", 0)
        batch_axis = node.attributes.get_int("batch_axis", 1)
        for lens, data in zip(sources(node.inputs[1]), sources(node.inputs[0]), strict=False):
            source = _trace_to_input(lens, names)
            if source is None:
                continue
            observed = found[source].observed if source in found else ()
            if data is not None and data.name and scoped.scope == "main":
                observed = (*observed, (data.name, time_axis, batch_axis))
            if source in found:
                found[source] = dataclasses.replace(found[source], observed=observed)
                continue
            dims = None
            if data is not None and data.shape is not None:
                dims = tuple(
                    d if isinstance(d, int) else (d.value if d else None) for d in data.shape
                )
            found[source] = LengthsInput(
                data=_trace_to_input(data, names),
                data_dims=dims,
                time_axis=time_axis,
                batch_axis=batch_axis,
                observed=observed,
            )
    return found


def _constant_reversals(model: ir.Model) -> list[tuple[ir.Node, int, bool]]:
    """Each ReverseSequence with constant lengths: the longest, and whether in main.

    Its lengths are no input the trials generate (restore fuses a constant index so).
    """
    found = []
    for scoped in walk(model):
        node = scoped.node
        if not is_reverse_sequence(node) or len(node.inputs) != 2 or node.inputs[1] is None:
            continue
        lens = ir.convenience.get_const_tensor(node.inputs[1])
        if lens is not None and lens.size:
            found.append((node, int(lens.numpy().max()), scoped.scope == "main"))
    return found


def _time_needs(
    model: ir.Model, reversals: list[tuple[ir.Node, int, bool]]
) -> tuple[dict[str, int], list[tuple[str, int, int]]]:
    """What the time dims of ``reversals`` need to hold their constant lengths.

    Floors: the least size of each symbolic time dim of a graph input the node reads
    (as is, or through Cast/Identity): it must hold the longest of its lengths (ONNX
    defines no others, and onnxruntime refuses them). Keyed as ``_concrete_dims`` keys a
    symbol: its name, else "input:axis". Computed: each main-graph node whose data is
    computed (a Slice of an input, a MatMul's result), as (data name, time axis, longest
    length): its time dim is known only once the model runs, so a trial reads it
    (``InputGenerator._grown``).
    """
    inputs = {v.name: v for v in model.graph.inputs if v.name}
    names = set(inputs)
    floors: dict[str, int] = {}
    computed: list[tuple[str, int, int]] = []
    for node, longest, main in reversals:
        data = node.inputs[0]
        time_axis = node.attributes.get_int("time_axis", 0)
        source = _trace_to_input(data, names)
        if source is None:
            if main and data is not None and data.name and longest >= 1:
                computed.append((data.name, time_axis, longest))
            continue
        shape = inputs[source].shape
        if shape is None or not len(shape):
            continue
        axis = time_axis % len(shape)
        dim = shape[axis]
        if not isinstance(dim, int):
            key = dim.value or f"{source}:{axis}"
            floors[key] = max(floors.get(key, 0), longest)
    return floors, computed


def _steps_reversed(node: ir.Node, longest: int) -> int:
    """The most steps constant lengths reverse: the longest, at most a static T."""
    data = node.inputs[0]
    if data is not None and data.shape is not None:
        time_dim = data.shape[node.attributes.get_int("time_axis", 0)]
        if isinstance(time_dim, int):
            return min(longest, time_dim)
    return longest


def _concrete_dims(
    info: onnx.ValueInfoProto, trial: int, symbols: dict[str, int], floors: dict[str, int]
) -> tuple[int, ...]:
    dims = []
    for axis, dim in enumerate(info.type.tensor_type.shape.dim):
        if dim.HasField("dim_value"):
            dims.append(dim.dim_value)
            continue
        key = dim.dim_param or f"{info.name}:{axis}"
        if key not in symbols:
            size = _SIZES[(trial + len(symbols)) % len(_SIZES)]
            symbols[key] = max(size, floors.get(key, 0))
        dims.append(symbols[key])
    return tuple(dims)


Capture = Callable[[onnx.ModelProto, Inputs, Sequence[str]], dict[str, np.ndarray]]
"""Runs a model and returns the named values (intermediate ones included)."""


class InputGenerator:
    """Input sets for trial after trial of a model (and of a model with its signature).

    Symbolic dims get sizes that vary by trial (1 among them; a time dim that constant
    lengths reverse along, at least the longest of them); an input that feeds a
    ``sequence_lens`` gets lengths in [0, T] that include 0, 1 and T across trials, with
    T the time length its nodes see (read from a first run with every length 0 where a
    node's data is computed); everything else gets random values of its type.
    """

    def __init__(
        self,
        models: Sequence[onnx.ModelProto],
        *,
        seed: int = 0,
        capture: Capture | None = None,
        specials: bool = True,
    ) -> None:
        self.model = models[0]
        self.seed = seed
        self.specials = specials
        self._capture = capture
        self._owners: dict[str, onnx.ModelProto] = {}
        self.lengths: dict[str, LengthsInput] = {}
        self._floors: dict[str, int] = {}
        # Models whose constant lengths reverse along a computed time dim, their
        # ReverseSequence nodes made Identities (_grown).
        self._computed: list[tuple[onnx.ModelProto, list[tuple[str, int, int]]]] = []
        # The most steps a node with constant lengths reverses, in any of the models.
        self.constant_steps = 0
        for model in reversed(models):  # the first model's view wins
            graph = ir.from_proto(model)
            for name, spec in lengths_inputs(graph).items():
                self.lengths[name] = spec
                if spec.observed:
                    self._owners[name] = model
            reversals = _constant_reversals(graph)
            floors, computed = _time_needs(graph, reversals)
            for key, floor in floors.items():
                self._floors[key] = max(self._floors.get(key, 0), floor)
            if computed:
                self._computed.append((_reversals_as_identities(model), computed))
            for node, longest, _ in reversals:
                self.constant_steps = max(self.constant_steps, _steps_reversed(node, longest))

    def trial(self, trial: int) -> Inputs:
        """The inputs of trial ``trial`` (the same for the same seed and trial)."""
        rng = np.random.default_rng([self.seed, trial])
        initializers = {t.name for t in self.model.graph.initializer}
        infos = [i for i in self.model.graph.input if i.name not in initializers]
        symbols: dict[str, int] = {}
        shapes = {i.name: _concrete_dims(i, trial, symbols, self._floors) for i in infos}
        if self._computed and self._capture is not None and symbols:
            shapes = self._grown(infos, trial, symbols, shapes)
        feeds: Inputs = {}
        for info in infos:
            if info.name not in self.lengths:
                elem = info.type.tensor_type.elem_type
                feeds[info.name] = random_array(
                    rng, elem, shapes[info.name], specials=self.specials
                )
        spans = self._spans(feeds, shapes)
        for info in infos:
            if info.name in self.lengths:
                time_len, batch = spans[info.name]
                shape = shapes[info.name] if batch is None else (batch,)
                values = lengths_pattern(rng, time_len, shape, trial)
                elem = info.type.tensor_type.elem_type
                feeds[info.name] = values.astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        return {i.name: feeds[i.name] for i in infos}

    def _grown(
        self,
        infos: Sequence[onnx.ValueInfoProto],
        trial: int,
        symbols: dict[str, int],
        shapes: dict[str, tuple[int, ...]],
    ) -> dict[str, tuple[int, ...]]:
        """The trial's shapes, grown until computed time dims hold their constant lengths.

        Each owner model runs on zeros of these shapes, its ReverseSequence nodes made
        Identities (lengths longer than the time dim are no valid input, and the
        node's output is shaped as its data); where a time dim is shorter than its
        longest length, every symbolic dim grows by the shortfall (doubled each round),
        up to ``_GROWTH_ROUNDS`` times (a dim that no input dim sizes stays as drawn, and the
        trial then fails with the backend's word).
        """
        for growth in range(_GROWTH_ROUNDS):
            short = 0
            zeros = {
                i.name: _zeros(i.type.tensor_type.elem_type, shapes[i.name]) for i in infos
            }
            for probe, computed in self._computed:
                values = self._capture(probe, zeros, sorted({name for name, _, _ in computed}))
                for name, axis, longest in computed:
                    dims = values[name].shape
                    short = max(short, longest - dims[axis % len(dims)] if dims else 0)
            if short <= 0:
                break
            for key in symbols:  # twice the step each round: a dim may be T / k
                symbols[key] += short << growth
            shapes = {i.name: _concrete_dims(i, trial, symbols, self._floors) for i in infos}
        return shapes

    def _spans(
        self, feeds: Inputs, shapes: dict[str, tuple[int, ...]]
    ) -> dict[str, tuple[int, int | None]]:
        """For each lengths input, the time length it must stay within and its size.

        The size is the batch size of the data its nodes reverse (None where unknown:
        the shape drawn for the input then stands), read from the data input's shape or
        from a first run with every length 0.
        """
        spans: dict[str, tuple[int, int | None]] = {}
        observed_by_model: dict[int, list[str]] = {}
        for name, spec in self.lengths.items():
            if spec.observed and self._capture is not None:
                observed_by_model.setdefault(id(self._owners[name]), []).append(name)
                continue
            spans[name] = _declared_span(spec, shapes)
        for names in observed_by_model.values():
            model = self._owners[names[0]]
            # The reversals as Identities: lengths of any size are no invalid input there.
            zero = {n: _zeros(_elem(model, n), shapes[n]) for n in self.lengths if n in shapes}
            wanted = sorted({d for n in names for d, _, _ in self.lengths[n].observed})
            assert self._capture is not None
            values = self._capture(_reversals_as_identities(model), {**feeds, **zero}, wanted)
            for name in names:
                observed = [
                    (values[data].shape, time_axis, batch_axis)
                    for data, time_axis, batch_axis in self.lengths[name].observed
                ]
                spans[name] = (
                    min(shape[t % len(shape)] for shape, t, _ in observed),
                    observed[0][0][observed[0][2] % len(observed[0][0])],
                )
        return spans


# How often a trial's symbolic dims grow for constant lengths along a computed time dim.
_GROWTH_ROUNDS = 6


def _zeros(elem: int, shape: tuple[int, ...]) -> np.ndarray:
    """Zeros (empty strings) of ONNX element type ``elem``."""
    if elem == onnx.TensorProto.STRING:
        return np.full(shape, "", dtype=object)
    if elem == onnx.TensorProto.BFLOAT16:
        return np.zeros(shape, ml_dtypes.bfloat16)
    return np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(elem))


def _reversals_as_identities(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each main-graph ReverseSequence an Identity of its data."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for node in probe.graph.node:
        if node.op_type == "ReverseSequence" and node.domain in {*ONNX_DOMAINS, REVSEQ_DOMAIN}:
            node.op_type = "Identity"
            node.domain = ""
            del node.input[1:]
            del node.attribute[:]
    return probe


def _elem(model: onnx.ModelProto, name: str) -> int:
    return next(i.type.tensor_type.elem_type for i in model.graph.input if i.name == name)


def _declared_span(
    spec: LengthsInput, shapes: dict[str, tuple[int, ...]]
) -> tuple[int, int | None]:
    """T and B from the data input's shape, or its declared static dims; else 1, None."""
    if spec.data is not None and spec.data in shapes:
        dims = shapes[spec.data]
        return dims[spec.time_axis % len(dims)], dims[spec.batch_axis % len(dims)]
    if spec.data_dims is not None:
        rank = len(spec.data_dims)
        time_len = spec.data_dims[spec.time_axis % rank]
        batch = spec.data_dims[spec.batch_axis % rank]
        return (
            time_len if isinstance(time_len, int) else 1,
            batch if isinstance(batch, int) else None,
        )
    return 1, None
