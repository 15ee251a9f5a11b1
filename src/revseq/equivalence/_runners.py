"""Running a model for a check: onnxruntime where it can, onnx's ReferenceEvaluator where not.

onnxruntime runs models with graph optimisations off and on. Where it cannot (complex
types, bfloat16 inputs its Python API cannot take, opsets newer than it loads), onnx's
ReferenceEvaluator runs the model instead, and the engine's name says so. A model using
the ``revseq`` domain op gets revseq's own definition of it attached (a model-local
function) so that a runtime can execute it.
"""

from __future__ import annotations

__all__ = [
    "as_declared",
    "capture",
    "Capturer",
    "declared_domain",
    "declared_types",
    "Engine",
    "fed_as_declared",
    "ModelLike",
    "Native",
    "refuse_invalid_nodes",
    "Runner",
    "runners",
    "to_proto",
    "with_definition",
]

import logging
import os
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnx.external_data_helper
import onnx_ir as ir

from revseq.backends import onnxruntime as ort_adapter
from revseq.errors import CheckError, RevseqError, one_line
from revseq.ops.function import definition
from revseq.ops.reference import reference_evaluator, reverse_sequence_model
from revseq.ops.vocabulary import DOMAIN_KEY, REVSEQ_DOMAIN, default_opset
from revseq.passes import ShapeTable, validate_all, walk
from revseq.passes.graph.reverse_sequence import FLAVOUR_LENGTH_TYPES

logger = logging.getLogger(__name__)

ModelLike = onnx.ModelProto | ir.Model | str | os.PathLike
Inputs = dict[str, np.ndarray]
Runner = Callable[[Inputs], list[np.ndarray]]

_ORT_MAX_OPSET = 27
_COMPLEX = {onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128}


def to_proto(model: ModelLike) -> onnx.ModelProto:
    """A self-contained proto: external weights read in, since runtimes load from bytes."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)):
        from revseq import files

        model = files.load_model(model)  # validates the file and its external data
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


def with_definition(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Attach revseq's definition of the ``revseq`` domain op, if the model uses it.

    An ONNX-domain node with int32 lengths (TensorFlow's flavour, which
    onnxruntime refuses) is run on them cast to int64: the same lengths.
    """
    proto = _flavour_cast(proto)
    if not any(op.domain == REVSEQ_DOMAIN for op in proto.opset_import):
        return proto
    if any(f.domain == REVSEQ_DOMAIN and f.name == "ReverseSequence" for f in proto.functions):
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    try:
        copy.functions.append(definition(default_opset(proto)))
    except ValueError as e:
        raise CheckError(
            f"cannot run the revseq domain op at opset {default_opset(proto)}: {e}"
        ) from e
    return copy


def _flavour_cast(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with the int32 lengths of its ONNX-domain ReverseSequence nodes cast.

    One Cast per lengths value and graph, named apart (two flips often share lengths);
    the lengths' type as shape inference knows it (an intermediate value has none
    declared).
    """
    model = ir.from_proto(proto)
    shapes: ShapeTable | None = None
    casts: dict[tuple[int, int], ir.Value] = {}
    for scoped in list(walk(model)):
        node = scoped.node
        if (
            node.op_type != "ReverseSequence"
            or node.domain not in ("", "ai.onnx")
            or len(node.inputs) != 2
            or node.inputs[1] is None
        ):
            continue
        lens = node.inputs[1]
        if lens.dtype is None and shapes is None:
            shapes = ShapeTable.infer(model)
        dtype = lens.dtype if lens.dtype is not None else shapes.dtype(lens)  # type: ignore[union-attr]
        if dtype not in FLAVOUR_LENGTH_TYPES:
            continue
        graph = node.graph
        assert graph is not None
        key = (id(graph), id(lens))
        if key not in casts:
            cast = ir.node("Cast", [lens], attributes={"to": ir.DataType.INT64})
            cast.outputs[0].name = f"{lens.name}_as_int64_{len(casts)}"
            cast.outputs[0].dtype = ir.DataType.INT64
            graph.insert_before(node, cast)
            casts[key] = cast.outputs[0]
        node.replace_input_with(1, casts[key])
    return ir.to_proto(model) if casts else proto


def _elem_types(proto: onnx.ModelProto) -> set[int]:
    graph = proto.graph
    infos = [*graph.input, *graph.output, *graph.value_info]
    types = {i.type.tensor_type.elem_type for i in infos if i.type.HasField("tensor_type")}
    types |= {t.data_type for t in graph.initializer}
    return types


def _reference_evaluator_reason(proto: onnx.ModelProto) -> str | None:
    """Why onnxruntime cannot run ``proto`` (so the ReferenceEvaluator must), or None."""
    if _elem_types(proto) & _COMPLEX:
        return "onnxruntime has no complex types"
    if onnx.TensorProto.BFLOAT16 in {
        i.type.tensor_type.elem_type for i in [*proto.graph.input, *proto.graph.output]
    }:
        return "onnxruntime's Python API takes and returns no bfloat16 arrays"
    opset = default_opset(proto)
    if opset > _ORT_MAX_OPSET:
        return f"onnxruntime loads opsets up to {_ORT_MAX_OPSET}, the model has {opset}"
    return None


def runners(proto: onnx.ModelProto, levels: Sequence[str]) -> tuple[dict[str, Runner], str]:
    """One runner per optimisation level ("off", "on"), and the engine's name.

    Raises:
        CheckError: Neither onnxruntime nor the ReferenceEvaluator can run the model.
    """
    reason = _reference_evaluator_reason(proto)
    if reason is None:
        try:
            by_level: dict[str, Runner] = {
                level: ort_adapter.prepare(proto, optimize=level == "on") for level in levels
            }
            return by_level, "onnxruntime"
        except Exception as e:  # onnxruntime's own error types vary by build
            reason = f"onnxruntime cannot load it: {one_line(e, 160, typed=True)}"
    try:
        evaluator = reference_evaluator(proto)
    except Exception as e:
        raise CheckError(
            f"neither onnxruntime nor onnx.reference can run the model ({reason}; "
            f"{one_line(e, 160, typed=True)})"
        ) from e
    return {level: (lambda feeds: evaluator.run(None, feeds)) for level in levels}, (
        f"onnx.reference ({reason})"
    )


class Capturer:
    """Runs a model and returns named values, intermediate ones included.

    A check runs the same model many times (sizes tried, a first run for the lengths'
    T, every trial): each (model, values) pair gets its session once.
    """

    def __init__(self) -> None:
        self._runs: dict[tuple, tuple[onnx.ModelProto, Runner, list[str]]] = {}

    def __call__(
        self, proto: onnx.ModelProto, feeds: Inputs, names: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """The named values of a run of ``proto`` on ``feeds``.

        Raises:
            CheckError: The model cannot be run on these inputs (the runtime's own
                error is its ``__cause__``).
        """
        wanted = [n for n in names if n not in feeds]
        values = {n: feeds[n] for n in names if n in feeds}
        if not wanted:
            return values
        key = (id(proto), tuple(wanted))
        if key not in self._runs:
            copy = onnx.ModelProto()
            copy.CopyFrom(proto)
            declared = {o.name for o in copy.graph.output}
            copy.graph.output.extend(
                onnx.ValueInfoProto(name=n) for n in wanted if n not in declared
            )
            outputs = [o.name for o in copy.graph.output]
            # The proto is kept: its id stays its own while the entry lives.
            self._runs[key] = (proto, runners(copy, ("off",))[0]["off"], outputs)
        _, run, outputs = self._runs[key]
        try:
            results = run(feeds)
        except Exception as e:
            raise CheckError(
                f"running the reference failed: {one_line(e, 200, typed=True)}"
            ) from e
        values.update(
            (name, np.asarray(result))
            for name, result in zip(outputs, results, strict=True)
            if name in wanted
        )
        return values


def capture(
    proto: onnx.ModelProto, feeds: Inputs, names: Sequence[str]
) -> dict[str, np.ndarray]:
    """Run ``proto`` once and return the named values, intermediate ones included.

    Raises:
        CheckError: The model cannot be run on these inputs.
    """
    return Capturer()(proto, feeds, names)


class Engine:
    """What runs the candidate's decompositions: onnxruntime or a backend's worker."""

    def __init__(self, backend: str | None) -> None:
        self._backend = None
        self.name = backend or "onnxruntime"
        self.label = "onnxruntime"
        if backend is not None:
            from revseq.backends import isolated

            self._backend = isolated(backend)
            self.label = self._backend.label

    @property
    def storage(self) -> dict[str, str]:
        """The element types the engine holds in a narrower one (``Backend.storage``)."""
        return {} if self._backend is None else self._backend.storage

    def rounding(self, dtype: str, rank: int) -> str | None:
        """What the engine does to ``dtype`` data of ``rank`` inexactly, or None."""
        return None if self._backend is None else self._backend.rounding(dtype, rank)

    def prepare(self, model: onnx.ModelProto) -> Runner:
        """A runner of ``model`` on the engine (onnxruntime with optimisations on)."""
        if self._backend is not None:
            return self._backend.prepare(model)
        by_level, _ = runners(model, ("on",))
        return by_level["on"]


class Native:
    """The native op alone, run by onnxruntime (onnx.reference for complex types)."""

    def __init__(self) -> None:
        self._runners: dict[tuple, Runner] = {}

    def __call__(
        self,
        data: np.ndarray,
        lens: np.ndarray,
        *,
        domain: str,
        batch_axis: int,
        time_axis: int,
        opset: int,
    ) -> np.ndarray:
        """The op's output for ``data`` and ``lens``, with these attributes."""
        elem = onnx.helper.np_dtype_to_tensor_dtype(data.dtype)
        lens_elem = onnx.helper.np_dtype_to_tensor_dtype(lens.dtype)
        key = (domain, batch_axis, time_axis, elem, lens_elem, data.ndim, opset)
        if key not in self._runners:
            model = reverse_sequence_model(
                [f"d{i}" for i in range(data.ndim)],
                elem,
                batch_axis=batch_axis,
                time_axis=time_axis,
                domain=domain,
                lens_elem=lens_elem,
                opset=opset,
                name="native",
            )
            self._runners[key] = runners(with_definition(model), ("on",))[0]["on"]
        return self._runners[key]({"x": data, "lens": lens})[0]


def refuse_invalid_nodes(proto: onnx.ModelProto, label: str) -> None:
    """Refuse invalid ReverseSequence nodes before a runtime sees them.

    onnxruntime aborts the whole process (SIGABRT) on a rank-1 ReverseSequence and
    misreads negative axes; revseq's validation rejects both with a clear message.
    """
    try:
        validate_all(walk(ir.from_proto(proto)))
    except RevseqError as e:
        raise CheckError(f"{label}: {e}") from e


def declared_domain(proto: onnx.ModelProto) -> str | None:
    """The data ``proto`` says its decompositions are exact on, where not every value."""
    return next((p.value for p in proto.metadata_props if p.key == DOMAIN_KEY), None)


def declared_types(proto: onnx.ModelProto) -> dict[str, int]:
    """Each graph input's declared element type, by name."""
    return {i.name: i.type.tensor_type.elem_type for i in proto.graph.input}


def as_declared(feeds: Inputs, declared: dict[str, int]) -> Inputs:
    """``feeds`` in the element types ``declared`` names, where an integer input differs.

    A ``-finite`` target makes a lengths input float32 (a float-only runtime's
    interface): it is fed the reference's integer values as float32, which holds each
    exactly below 2**24 (larger lengths are beyond any time axis such a form takes).
    """
    fed = dict(feeds)
    for name, elem in declared.items():
        value = fed.get(name)
        if value is None or elem != onnx.TensorProto.FLOAT or value.dtype.kind not in "iu":
            continue
        fed[name] = np.clip(value.astype(np.int64), -(2**24), 2**24).astype(np.float32)
    return fed


def fed_as_declared(proto: onnx.ModelProto, runner: Runner) -> Runner:
    """``runner`` fed its inputs in the types ``proto`` declares (``as_declared``)."""
    declared = declared_types(proto)
    return lambda feeds: runner(as_declared(feeds, declared))
