"""Where a model's lengths come from, and what their time length is.

A check proves nothing about a reversal unless some lengths are 2 or more, and no
runtime takes lengths beyond the time length: the generator must know, for each graph
input that feeds a ``sequence_lens``, the data its nodes reverse (:func:`lengths_inputs`),
and for nodes with constant lengths, how long their time dims must be
(:func:`time_needs`).
"""

from __future__ import annotations

__all__ = [
    "MIN_TELLING_T",
    "covering_lengths",
    "lengths_pattern",
    "LengthsInput",
    "constant_reversals",
    "lengths_inputs",
    "steps_reversed",
    "time_needs",
    "declared_span",
    "input_elem",
    "reversals_as_identities",
    "trace_to_input",
    "zeros",
]

import dataclasses

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir

from revseq.ops.domains import ONNX_DOMAINS, REVSEQ_DOMAIN
from revseq.passes import is_reverse_sequence, walk


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


def trace_to_input(value: ir.Value | None, inputs: set[str]) -> str | None:
    """The graph input ``value`` is, through Casts and Identities; None where none."""
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
            source = trace_to_input(lens, names)
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
                data=trace_to_input(data, names),
                data_dims=dims,
                time_axis=time_axis,
                batch_axis=batch_axis,
                observed=observed,
            )
    return found


def constant_reversals(model: ir.Model) -> list[tuple[ir.Node, int, bool]]:
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


def time_needs(
    model: ir.Model, reversals: list[tuple[ir.Node, int, bool]]
) -> tuple[dict[str, int], list[tuple[str, int, int]]]:
    """What the time dims of ``reversals`` need to hold their constant lengths.

    Floors: the least size of each symbolic time dim of a graph input the node reads
    (as is, or through Cast/Identity): it must hold the longest of its lengths (ONNX
    defines no others, and onnxruntime refuses them). Keyed as ``_concrete_dims`` keys a
    symbol: its name, else "input:axis". Computed: each main-graph node whose data is
    computed (a Slice of an input, a MatMul's result), as (data name, time axis, longest
    length): its time dim is known only once the model runs, so a trial reads it
    (the generator's growth of its dims).
    """
    inputs = {v.name: v for v in model.graph.inputs if v.name}
    names = set(inputs)
    floors: dict[str, int] = {}
    computed: list[tuple[str, int, int]] = []
    for node, longest, main in reversals:
        data = node.inputs[0]
        time_axis = node.attributes.get_int("time_axis", 0)
        source = trace_to_input(data, names)
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


def steps_reversed(node: ir.Node, longest: int) -> int:
    """The most steps constant lengths reverse: the longest, at most a static T."""
    data = node.inputs[0]
    if data is not None and data.shape is not None:
        time_dim = data.shape[node.attributes.get_int("time_axis", 0)]
        if isinstance(time_dim, int):
            return min(longest, time_dim)
    return longest


def zeros(elem: int, shape: tuple[int, ...]) -> np.ndarray:
    """Zeros (empty strings) of ONNX element type ``elem``."""
    if elem == onnx.TensorProto.STRING:
        return np.full(shape, "", dtype=object)
    if elem == onnx.TensorProto.BFLOAT16:
        return np.zeros(shape, ml_dtypes.bfloat16)
    return np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(elem))


def reversals_as_identities(model: onnx.ModelProto) -> onnx.ModelProto:
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


def input_elem(model: onnx.ModelProto, name: str) -> int:
    """The element type graph input ``name`` declares."""
    return next(i.type.tensor_type.elem_type for i in model.graph.input if i.name == name)


def declared_span(
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
