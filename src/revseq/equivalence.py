"""Equivalence checking: run two models on the same inputs and compare outputs bit for bit.

Numeric outputs are equal when their dtype, shape and bytes are (so NaN payloads and -0.0
count); string outputs when every element is. No tolerance, ever: a rewrite that moves
data must move it exactly.

onnxruntime runs both models, with graph optimisations off and on. Where it cannot
(complex types, bfloat16 inputs its Python API cannot take, opsets newer than it loads),
onnx's ReferenceEvaluator runs that model instead, and the report says so. A model using
the ``revseq`` domain op gets revseq's own definition of it attached (a model-local
function) so that a runtime can execute it.
"""

from __future__ import annotations

__all__ = ["CheckReport", "Counterexample", "NodeReport", "check", "check_nodes"]

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import onnx
import onnx.external_data_helper
import onnx_ir as ir

from revseq.backends import onnxruntime as ort_adapter
from revseq.ops.errors import CheckError, RevseqError
from revseq.ops.function import definition
from revseq.ops.reference import reference_evaluator
from revseq.passes import InlineReverseSequencePass
from revseq.passes._node import REVSEQ_DOMAIN, is_reverse_sequence, signature_of
from revseq.passes._scopes import walk

logger = logging.getLogger(__name__)

ModelLike = onnx.ModelProto | ir.Model | str | os.PathLike
Inputs = dict[str, np.ndarray]

# Sizes given to symbolic dimensions, trial after trial; 1 comes early on purpose.
_SIZES = (3, 1, 4, 2, 5)
_ORT_MAX_OPSET = 27
_COMPLEX = {onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128}


@dataclasses.dataclass(frozen=True)
class Counterexample:
    """The first difference found."""

    trial: int
    inputs: Inputs
    output_name: str
    index: tuple[int, ...] | None
    reference_value: object
    candidate_value: object


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """The outcome of :func:`check`.

    Attributes:
        ok: Every output of every trial was bit-identical.
        trials: Input sets run.
        outputs_compared: Output tensors compared (trials x levels x outputs).
        engines: What ran each model: "onnxruntime" or "onnx.reference (why)".
        optimizations: The onnxruntime optimisation levels run ("off", "on").
        counterexample: The first difference, when not ``ok``.
        message: One line saying what happened.
    """

    ok: bool
    trials: int
    outputs_compared: int
    engines: dict[str, str]
    optimizations: tuple[str, ...]
    counterexample: Counterexample | None
    message: str

    def __str__(self) -> str:
        engines = ", ".join(f"{k}: {v}" for k, v in self.engines.items())
        lines = [
            f"{'OK' if self.ok else 'DIFFERENT'}: {self.message}",
            f"  trials: {self.trials}, optimisation levels: {', '.join(self.optimizations)}, "
            f"outputs compared: {self.outputs_compared}",
            f"  engines: {engines}",
        ]
        c = self.counterexample
        if c is not None:
            lines.append(f"  first difference: trial {c.trial}, output {c.output_name!r}")
            if c.index is not None:
                lines.append(f"  at index {list(c.index)}:")
            lines.append(f"    reference: {c.reference_value!r}")
            lines.append(f"    candidate: {c.candidate_value!r}")
            for name, value in c.inputs.items():
                lines.append(f"  input {name}: {value.dtype} {list(value.shape)}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class NodeReport:
    """The outcome of checking one ReverseSequence node in isolation."""

    name: str
    scope: str
    report: CheckReport | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the node's decomposition was bit-identical to the op."""
        return self.report is not None and self.report.ok

    def __str__(self) -> str:
        label = f"{self.name or '(unnamed)'} in {self.scope}"
        if self.report is None:
            return f"ERROR {label}: {self.error}"
        return f"{'OK' if self.ok else 'DIFFERENT'} {label}: {self.report.message}"


def _to_proto(model: ModelLike) -> onnx.ModelProto:
    """A self-contained proto: external weights read in, since runtimes load from bytes."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)):
        from revseq import _io

        model = _io.load_model(model)  # validates the file and its external data
    if not isinstance(model, ir.Model):
        raise TypeError(f"expected a model or a path, got {type(model).__name__}")
    base_dirs = {
        str(value.const_value.base_dir)
        for graph in model.graphs()
        for value in graph.initializers.values()
        if isinstance(value.const_value, ir.ExternalTensor)
    }
    proto = ir.to_proto(model)
    for base_dir in base_dirs:
        onnx.external_data_helper.load_external_data_for_model(proto, base_dir)
    return proto


def _with_definition(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Attach revseq's definition of the ``revseq`` domain op, if the model uses it."""
    if not any(op.domain == REVSEQ_DOMAIN for op in proto.opset_import):
        return proto
    if any(f.domain == REVSEQ_DOMAIN and f.name == "ReverseSequence" for f in proto.functions):
        return proto
    opset = next((op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")), 0)
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    try:
        copy.functions.append(definition(opset))
    except ValueError as e:
        raise CheckError(f"cannot run the revseq domain op at opset {opset}: {e}") from e
    return copy


def _elem_types(proto: onnx.ModelProto) -> set[int]:
    graph = proto.graph
    infos = [*graph.input, *graph.output, *graph.value_info]
    types = {i.type.tensor_type.elem_type for i in infos if i.type.HasField("tensor_type")}
    types |= {t.data_type for t in graph.initializer}
    return types


def _reference_evaluator_reason(proto: onnx.ModelProto) -> str | None:
    """Why onnxruntime cannot run ``proto`` (so the ReferenceEvaluator must), or None."""
    types = _elem_types(proto)
    if types & _COMPLEX:
        return "onnxruntime has no complex types"
    if onnx.TensorProto.BFLOAT16 in {
        i.type.tensor_type.elem_type for i in [*proto.graph.input, *proto.graph.output]
    }:
        return "onnxruntime's Python API takes and returns no bfloat16 arrays"
    opset = next((op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")), 0)
    if opset > _ORT_MAX_OPSET:
        return f"onnxruntime loads opsets up to {_ORT_MAX_OPSET}, the model has {opset}"
    return None


Runner = Callable[[Inputs], list[np.ndarray]]


def _runners(proto: onnx.ModelProto, levels: Sequence[str]) -> tuple[dict[str, Runner], str]:
    """One runner per optimisation level (one in all for the ReferenceEvaluator)."""
    reason = _reference_evaluator_reason(proto)
    if reason is None:
        try:
            runners: dict[str, Runner] = {
                level: ort_adapter.prepare(proto, optimize=level == "on") for level in levels
            }
            return runners, "onnxruntime"
        except Exception as e:  # onnxruntime's own error types vary by build
            reason = f"onnxruntime cannot load it: {' '.join(str(e).split())[:160]}"
    try:
        evaluator = reference_evaluator(proto)
    except Exception as e:
        raise CheckError(
            f"neither onnxruntime nor onnx.reference can run the model ({reason}; "
            f"{' '.join(str(e).split())[:160]})"
        ) from e
    return {level: (lambda feeds: evaluator.run(None, feeds)) for level in levels}, (
        f"onnx.reference ({reason})"
    )


def _backend_runners(
    proto: onnx.ModelProto, name: str, levels: Sequence[str]
) -> tuple[dict[str, Runner], str]:
    """The candidate on a backend adapter: one runner, whatever the level."""
    from revseq import backends

    try:
        backend = backends.get(name)
        runner = backend.prepare(proto)
    except RevseqError as e:
        raise CheckError(str(e)) from e
    return {level: runner for level in levels}, backend.label


def _guard(proto: onnx.ModelProto, label: str) -> None:
    """Refuse invalid ReverseSequence nodes before a runtime sees them.

    onnxruntime aborts the whole process (SIGABRT) on a rank-1 ReverseSequence and
    misreads negative axes; revseq's validation rejects both with a clear message.
    """
    try:
        InlineReverseSequencePass().requires(ir.from_proto(proto))
    except RevseqError as e:
        raise CheckError(f"{label}: {e}") from e


@dataclasses.dataclass(frozen=True)
class _LengthsInput:
    data: str | None
    data_dims: tuple[int | str | None, ...] | None
    time_axis: int
    batch_axis: int


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


def _lengths_inputs(model: ir.Model) -> dict[str, _LengthsInput]:
    """Graph inputs that feed a ``sequence_lens``, with the data input they go with.

    Lengths reach a node directly, through Cast/Identity, from an outer scope, or as
    the argument of a call to the model-local function that holds the node.
    """
    names = {v.name for v in model.graph.inputs if v.name}
    arguments = _call_arguments(model)

    def sources(value: ir.Value | None) -> list[ir.Value | None]:
        passed = arguments.get(id(value)) if value is not None else None
        return passed if passed else [value]

    found: dict[str, _LengthsInput] = {}
    for scoped in walk(model):
        node = scoped.node
        if not is_reverse_sequence(node) or len(node.inputs) != 2:
            continue
        for lens, data in zip(sources(node.inputs[1]), sources(node.inputs[0]), strict=False):
            source = _trace_to_input(lens, names)
            if source is None or source in found:
                continue
            dims = None
            if data is not None and data.shape is not None:
                dims = tuple(
                    d if isinstance(d, int) else (d.value if d else None) for d in data.shape
                )
            found[source] = _LengthsInput(
                data=_trace_to_input(data, names),
                data_dims=dims,
                time_axis=node.attributes.get_int("time_axis", 0),
                batch_axis=node.attributes.get_int("batch_axis", 1),
            )
    return found


def _random_array(rng: np.random.Generator, elem: int, shape: tuple[int, ...]) -> np.ndarray:
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
    specials = [np.nan, -0.0, np.inf, -np.inf, 1e-40, -1e-310]
    for i, special in enumerate(specials[: max(0, size // 4)]):
        values[rng.integers(0, size)] = special if i else values[0]
    array = values.astype(np_type).reshape(shape)
    if size and np_type in (np.float32, np.float64, np.float16):
        # A NaN with a non-default payload: a copy must keep it.
        flat = array.reshape(-1)
        bits = flat.view(np.dtype(f"u{flat.itemsize}"))
        bits[rng.integers(0, size)] = {2: 0x7E01, 4: 0x7FC00123, 8: 0x7FF8000000000123}[
            flat.itemsize
        ]
    return array


def _concrete_dims(
    info: onnx.ValueInfoProto, trial: int, symbols: dict[str, int]
) -> tuple[int, ...]:
    dims = []
    for axis, dim in enumerate(info.type.tensor_type.shape.dim):
        if dim.HasField("dim_value"):
            dims.append(dim.dim_value)
            continue
        key = dim.dim_param or f"{info.name}:{axis}"
        if key not in symbols:
            symbols[key] = _SIZES[(trial + len(symbols)) % len(_SIZES)]
        dims.append(symbols[key])
    return tuple(dims)


def generate_inputs(
    proto: onnx.ModelProto, trial: int, seed: int, *, also: onnx.ModelProto | None = None
) -> Inputs:
    """Random inputs for one trial of ``proto`` (whose signature ``also`` shares).

    Symbolic dims get sizes that vary by trial (1 among them); an input that feeds a
    ``sequence_lens`` in either model gets lengths in [0, T] that include 0, 1 and T
    across trials; everything else gets random values of its type, with NaNs (one with
    a non-default payload), infinities, -0.0 and subnormals for floats.
    """
    rng = np.random.default_rng([seed, trial])
    initializers = {t.name for t in proto.graph.initializer}
    infos = [i for i in proto.graph.input if i.name not in initializers]
    lengths = _lengths_inputs(ir.from_proto(proto))
    if also is not None:
        lengths = {**_lengths_inputs(ir.from_proto(also)), **lengths}
    symbols: dict[str, int] = {}
    shapes = {i.name: _concrete_dims(i, trial, symbols) for i in infos}
    feeds: Inputs = {}
    for info in infos:
        elem = info.type.tensor_type.elem_type
        shape = shapes[info.name]
        spec = lengths.get(info.name)
        if spec is None:
            feeds[info.name] = _random_array(rng, elem, shape)
            continue
        time_len = _time_length(spec, shapes)
        values = rng.integers(0, time_len, shape, endpoint=True)
        flat = values.reshape(-1)
        if flat.size:
            flat[0] = (0, 1, time_len)[trial % 3]
            flat[-1] = (time_len, 0, 1)[trial % 3] if flat.size > 1 else flat[0]
        feeds[info.name] = values.astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    return feeds


def _time_length(spec: _LengthsInput, shapes: dict[str, tuple[int, ...]]) -> int:
    if spec.data is not None and spec.data in shapes:
        dims = shapes[spec.data]
        return dims[spec.time_axis % len(dims)]
    if spec.data_dims is not None:
        static = spec.data_dims[spec.time_axis % len(spec.data_dims)]
        if isinstance(static, int):
            return static
    return 1


def _first_difference(
    expected: np.ndarray, got: np.ndarray
) -> tuple[tuple[int, ...] | None, object, object] | None:
    """None when identical; else (index or None, reference value, candidate value)."""
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.shape != got.shape or expected.dtype != got.dtype:
        return (
            None,
            f"{expected.dtype} {list(expected.shape)}",
            f"{got.dtype} {list(got.shape)}",
        )
    if expected.dtype == object:
        differs = np.array(
            [a != b for a, b in zip(expected.reshape(-1), got.reshape(-1), strict=True)],
            dtype=bool,
        ).reshape(expected.shape)
    else:
        if expected.tobytes() == got.tobytes():
            return None
        width = expected.dtype.itemsize
        a = np.ascontiguousarray(expected).view(np.uint8).reshape((*expected.shape, width))
        b = np.ascontiguousarray(got).view(np.uint8).reshape((*got.shape, width))
        differs = (a != b).any(axis=-1)
    if not differs.any():
        return None
    index = tuple(int(i) for i in np.argwhere(differs)[0])
    return index, expected.item(index), got.item(index)


def check(
    reference: ModelLike,
    candidate: ModelLike,
    *,
    trials: int = 3,
    seed: int = 0,
    inputs: Sequence[Inputs] | None = None,
    optimize: bool | None = None,
    labels: tuple[str, str] = ("reference", "candidate"),
    progress: Callable[[str], None] | None = None,
    backend: str | None = None,
) -> CheckReport:
    """Run both models on the same inputs and compare every output bit for bit.

    Args:
        reference: The model taken as right (ModelProto, onnx_ir.Model or path).
        candidate: The model to check against it.
        trials: Input sets to generate (ignored when ``inputs`` is given).
        seed: Seed of the generated inputs.
        inputs: Your own input sets, instead of generated ones.
        optimize: Run onnxruntime with graph optimisations only off (False) or only on
            (True); by default both.
        labels: How errors name the two models (the CLI passes their paths).
        progress: Called with a line after each trial (the CLI prints it to stderr).
        backend: Run the candidate on this backend (a name in
            ``revseq.backends.ADAPTERS``: "tvm", "onnx2torch", ...) instead of
            onnxruntime; the reference still runs in onnxruntime (graph optimisations
            on, unless ``optimize`` says otherwise).

    Returns:
        A report; a difference is ``ok=False``, not an exception.

    Raises:
        CheckError: The models cannot be compared (different inputs or outputs, a model
            no runtime can run, an invalid ReverseSequence node, a backend that is not
            installed or refuses the candidate).
    """
    ref = _with_definition(_to_proto(reference))
    cand = _with_definition(_to_proto(candidate))
    ref_inputs = [
        i.name
        for i in ref.graph.input
        if i.name not in {t.name for t in ref.graph.initializer}
    ]
    cand_inputs = [
        i.name
        for i in cand.graph.input
        if i.name not in {t.name for t in cand.graph.initializer}
    ]
    if sorted(ref_inputs) != sorted(cand_inputs):
        raise CheckError(f"the models take different inputs: {ref_inputs} vs {cand_inputs}")
    if len(ref.graph.output) != len(cand.graph.output):
        raise CheckError(
            f"the models have different output counts: {len(ref.graph.output)} vs "
            f"{len(cand.graph.output)}"
        )
    _guard(ref, labels[0])
    _guard(cand, labels[1])
    if optimize is None:
        levels: tuple[str, ...] = ("on",) if backend is not None else ("off", "on")
    else:
        levels = ("on",) if optimize else ("off",)
    ref_runners, ref_engine = _runners(ref, levels)
    if backend is None:
        cand_runners, cand_engine = _runners(cand, levels)
    else:
        cand_runners, cand_engine = _backend_runners(cand, backend, levels)
    engines = {"reference": ref_engine, "candidate": cand_engine}
    input_sets = (
        list(inputs)
        if inputs is not None
        else [generate_inputs(ref, trial, seed, also=cand) for trial in range(trials)]
    )
    output_names = [o.name for o in ref.graph.output]
    compared = 0
    for trial, feeds in enumerate(input_sets):
        if progress is not None and trial:
            progress(f"check: trial {trial}/{len(input_sets)} identical")
        for level in levels:
            try:
                expected = ref_runners[level](feeds)
                got = cand_runners[level](feeds)
            except Exception as e:
                raise CheckError(
                    f"running trial {trial} failed: {' '.join(str(e).split())[:200]}"
                ) from e
            for name, a, b in zip(output_names, expected, got, strict=True):
                compared += 1
                difference = _first_difference(a, b)
                if difference is None:
                    continue
                index, ref_value, cand_value = difference
                where = f"at {list(index)}" if index is not None else "in dtype/shape"
                return CheckReport(
                    ok=False,
                    trials=len(input_sets),
                    outputs_compared=compared,
                    engines=engines,
                    optimizations=levels,
                    counterexample=Counterexample(
                        trial, feeds, name, index, ref_value, cand_value
                    ),
                    message=(
                        f"output {name!r} differs {where} in trial {trial} "
                        f"(optimisations {level})"
                    ),
                )
    return CheckReport(
        ok=True,
        trials=len(input_sets),
        outputs_compared=compared,
        engines=engines,
        optimizations=levels,
        counterexample=None,
        message=(
            f"{len(input_sets)} trial(s) x {len(levels)} optimisation level(s), "
            f"{compared} outputs compared, bit-identical"
        ),
    )


# Ranks a node of unknown rank is checked at (those its axes allow).
_UNKNOWN_RANKS = (2, 3, 4)


def _single_node_models(node: ir.Node, opset: int) -> list[tuple[onnx.ModelProto, str]]:
    """The node alone, its inputs as graph inputs: native op vs decomposition.

    A node whose data has no known type or rank (in a Loop body or a function) is
    checked as float32 at each rank its axes allow; the note says so.
    """
    data, lens = node.inputs
    assert data is not None and lens is not None
    batch_axis = node.attributes.get_int("batch_axis", 1)
    time_axis = node.attributes.get_int("time_axis", 0)
    dtype = data.dtype or ir.DataType.FLOAT
    if data.shape is not None:
        shapes = [
            [
                d if isinstance(d, int) else (d.value or f"d{i}")
                for i, d in enumerate(data.shape)
            ]
        ]
        note = ""
    else:
        low = max(batch_axis, time_axis, -batch_axis - 1, -time_axis - 1) + 1
        shapes = [[f"d{i}" for i in range(rank)] for rank in _UNKNOWN_RANKS if rank >= low]
        note = f" (rank unknown: checked at ranks {', '.join(str(len(d)) for d in shapes)}"
        note += f" as {dtype.name.lower()})" if data.dtype is None else ")"
    models = []
    for dims in shapes:
        rs = onnx.helper.make_node(
            "ReverseSequence",
            ["input", "sequence_lens"],
            ["output"],
            domain=node.domain,
            batch_axis=batch_axis,
            time_axis=time_axis,
        )
        graph = onnx.helper.make_graph(
            [rs],
            "node",
            [
                onnx.helper.make_tensor_value_info("input", int(dtype), dims),
                onnx.helper.make_tensor_value_info(
                    "sequence_lens",
                    int(lens.dtype or ir.DataType.INT64),
                    [dims[batch_axis % len(dims)]],
                ),
            ],
            [onnx.helper.make_tensor_value_info("output", int(dtype), dims)],
        )
        imports = [onnx.helper.make_opsetid("", opset)]
        if node.domain == REVSEQ_DOMAIN:
            imports.append(onnx.helper.make_opsetid(REVSEQ_DOMAIN, 1))
        models.append(
            (onnx.helper.make_model(graph, opset_imports=imports, ir_version=10), note)
        )
    return models


def check_nodes(
    model: ModelLike, *, strategy: str = "auto", trials: int = 3, seed: int = 0
) -> list[NodeReport]:
    """Check every ReverseSequence node of ``model`` against its decomposition, alone.

    Each node becomes a one-node model with the node's types, shapes and attributes; the
    native op (or, for the ``revseq`` domain, revseq's definition) is the reference and
    ``revseq.inline(..., strategy=strategy)`` the candidate. A user learns which node,
    if any, breaks.
    """
    from revseq._api import inline

    ir_model = model if isinstance(model, ir.Model) else ir.from_proto(_to_proto(model))
    reports = []
    for scoped in walk(ir_model):
        node = scoped.node
        if not is_reverse_sequence(node):
            continue
        version = scoped.owner.opset_imports.get("", 17)
        # The revseq definition needs opset 14; the ONNX op exists from 10 (11 inlines).
        opset = max(version, 14 if node.domain == REVSEQ_DOMAIN else 11)
        try:
            signature_of(scoped, opset=opset)  # an invalid node is an error, not a check
            for single, note in _single_node_models(node, opset):
                report = check(
                    single, inline(single, strategy=strategy), trials=trials, seed=seed
                )
                report = dataclasses.replace(report, message=report.message + note)
                if not report.ok:
                    break
        except RevseqError as e:
            reports.append(NodeReport(node.name or "", scoped.scope, None, str(e)))
            continue
        reports.append(NodeReport(node.name or "", scoped.scope, report))
    return reports
