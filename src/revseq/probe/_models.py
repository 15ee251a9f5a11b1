"""The probe models and the inputs each runs on (see :mod:`revseq.probe.backend`).

Each gather on each element type; each type's round trip through its carrier; each form
end to end, in the layouts of ``FORM_LAYOUTS`` (the op probes' models are the forms
as traced: :mod:`revseq.probe._traces`).
"""

from __future__ import annotations

__all__ = [
    "FORM_LAYOUTS",
    "FormLayout",
    "carrier_input",
    "carrier_model",
    "form_inputs",
    "gather_index",
    "gather_model",
    "probe_floats",
    "EMPTY_SIZES",
    "OPSET",
    "SIZES",
]

import dataclasses

import numpy as np
import onnx
import onnx.parser
import onnx.shape_inference

from revseq.equivalence.inputs.values import random_array
from revseq.ops.reference import reverse_sequence_model
from revseq.ops.vocabulary import FLAT_GATHER_ELEMENTS, REVSEQ_DOMAIN

OPSET = 18
"""The opset every probe model imports."""

SIZES = ((5, 4), (7, 2), (1, 3))
"""(T, B) sizes each probe runs at: static shapes at the first, symbolic dims at all."""

EMPTY_SIZES = ((0, 3), (4, 0))
"""Empty sequences and batches, which some probes also run with symbolic dims."""


def probe_floats(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random float32 data on float16's grid, for the op and form probes.

    They ask whether an op or a form computes what ONNX says, not how wide the backend
    stores float32 (the element-type probes ask that): an NPU that stores it as
    float16 still runs a Gather exactly, and moves int32 with it.
    """
    return rng.standard_normal(shape).astype(np.float16).astype(np.float32)


def gather_model(gather: str, elem: int, *, run_time_index: bool = False) -> onnx.ModelProto:
    """``gather`` reversing the time axis of a static [4, 3, 2] tensor of type ``elem``.

    Gather reads the rows of a Flatten view and is reshaped back, as the row form
    feeds it (a GPU may run a uint8 Gather but not its Flatten);
    ``GatherElements:flat`` reads the 1-D view of the data by a flat index and is
    reshaped back, as the forms gather single-element rows with static dims. The index
    is a constant, or with ``run_time_index`` computed from the int32 input ``steps``
    (``gather_index``) as the forms compute theirs from lengths given at run time: an
    Add, for GatherElements an Expand over the rows, and a Cast to int64. A backend may
    take another kernel for each, and one has quieted a signalling float16 NaN in every
    gather by such an index, and in none by a constant one or an index given as an input.
    """
    from onnx import helper

    shape = onnx.numpy_helper.from_array(np.array([4, 3, 2]), "shape")
    flat = gather == FLAT_GATHER_ELEMENTS
    expands = run_time_index and gather == "GatherElements"
    initializers = [shape] if gather == "Gather" or expands or flat else []
    nodes = []
    inputs = [helper.make_tensor_value_info("x", elem, [4, 3, 2])]
    if run_time_index:
        steps = gather_index(gather, run_time=True)
        inputs.append(
            helper.make_tensor_value_info("steps", onnx.TensorProto.INT32, steps.shape)
        )
        initializers.append(onnx.numpy_helper.from_array(np.array(0, np.int32), "zero"))
        nodes.append(helper.make_node("Add", ["steps", "zero"], ["sum"], name="sum"))
        if expands:  # in int32: a GPU without int64 arithmetic expands no int64
            nodes.append(helper.make_node("Expand", ["sum", "shape"], ["sums"], name="sums"))
        last = nodes[-1].output[0]
        int64 = onnx.TensorProto.INT64
        nodes.append(helper.make_node("Cast", [last], ["index"], name="index", to=int64))
    else:
        initializers.append(onnx.numpy_helper.from_array(gather_index(gather), "index"))
    if gather == "Gather":
        nodes += [
            helper.make_node("Flatten", ["x"], ["rows"], name="rows", axis=1),
            helper.make_node("Gather", ["rows", "index"], ["g"], name="g", axis=0),
            helper.make_node("Reshape", ["g", "shape"], ["y"], name="y"),
        ]
    elif flat:
        size = onnx.numpy_helper.from_array(np.array([24]), "size")
        initializers.append(size)
        nodes += [
            helper.make_node("Reshape", ["x", "size"], ["view"], name="view"),
            helper.make_node("GatherElements", ["view", "index"], ["g"], name="g", axis=0),
            helper.make_node("Reshape", ["g", "shape"], ["y"], name="y"),
        ]
    else:
        attrs = {"axis": 0} if gather == "GatherElements" else {}
        nodes.append(helper.make_node(gather, ["x", "index"], ["y"], name="y", **attrs))
    graph = helper.make_graph(
        nodes,
        "probe",
        inputs,
        [helper.make_tensor_value_info("y", elem, [4, 3, 2])],
        initializer=initializers,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9
    )


def gather_index(gather: str, *, run_time: bool = False) -> np.ndarray:
    """The index with which ``gather_model``'s ``gather`` reverses the time axis.

    With ``run_time``, what its input ``steps`` takes (int32; for GatherElements before
    its Expand over the rows).
    """
    rev = np.arange(3, -1, -1, dtype=np.int64)
    if gather == "Gather":
        index = rev
    elif gather == FLAT_GATHER_ELEMENTS:
        index = np.flip(np.arange(24).reshape(4, 3, 2), axis=0).reshape(-1)
    elif gather == "GatherElements":
        index = (
            rev[:, None, None] if run_time else np.broadcast_to(rev[:, None, None], (4, 3, 2))
        )
    else:
        t, b = np.meshgrid(rev, np.arange(3), indexing="ij")
        index = np.stack([t, b], axis=-1)
    return np.ascontiguousarray(index, dtype=np.int32 if run_time else np.int64)


def carrier_model(gather: str, elem: int, carrier: int) -> onnx.ModelProto:
    """``gather_model`` in the ``carrier`` type, on data of type ``elem`` cast to it and back.

    What the planner emits where a target's gathers lack ``elem``
    (``ops/targets/carriers.py``).
    """
    from onnx import helper

    model = gather_model(gather, carrier)
    graph = model.graph
    for node in graph.node:
        node.input[:] = ["x_carried" if name == "x" else name for name in node.input]
        node.output[:] = ["y_carried" if name == "y" else name for name in node.output]
    graph.node.insert(
        0, helper.make_node("Cast", ["x"], ["x_carried"], name="x_carried", to=carrier)
    )
    graph.node.append(
        helper.make_node("Cast", ["y_carried"], ["y"], name="y_carried", to=elem)
    )
    graph.input[0].type.tensor_type.elem_type = elem
    graph.output[0].type.tensor_type.elem_type = elem
    return model


def carrier_input(elem: int, rng: np.random.Generator) -> np.ndarray:
    """A [4, 3, 2] tensor of type ``elem`` holding its extremes: the round trip's hard cases.

    The least and greatest values, 0 and 1, and for unsigned types the values with the
    top bit set (uint64's wrap to negative int64 values), the rest random.
    """
    x = random_array(rng, elem, (4, 3, 2))
    if x.dtype == np.bool_:
        return x
    info = np.iinfo(x.dtype)
    extremes = [info.min, info.max, 0, 1]
    if info.min == 0:
        top = 1 << (info.bits - 1)
        extremes += [top, top + 1, info.max - 1]
    x.reshape(-1)[: len(extremes)] = np.array(extremes, dtype=x.dtype)
    return x


@dataclasses.dataclass(frozen=True)
class FormLayout:
    """One layout the form probes run each form in.

    Attributes:
        dims: The data's dims, ``"T"`` and ``"B"`` standing for the time and batch
            sizes (symbolic with symbolic dims).
        batch_axis: The batch axis.
        time_axis: The time axis.
        lens_type: The lengths' type (int32: TensorFlow's, with revseq's op).
        computed: Whether the lengths are computed in the graph (a Cast of an int32
            input, as exporters cast them) rather than a graph input.
    """

    dims: tuple[int | str, ...]
    batch_axis: int
    time_axis: int
    lens_type: int = onnx.TensorProto.INT64
    computed: bool = False

    def model(self, dynamic: bool, elem: int = onnx.TensorProto.FLOAT) -> onnx.ModelProto:
        """The one-node model of ``elem`` data; symbolic lengths have a dim of their own.

        Exporters declare ``sequence_lens`` with a symbol of its own (tf2onnx's
        ``unk__18`` beside the data's ``unk__16``), so the probes do.
        """
        dims = self.dims if dynamic else self.shape(5, 4)
        model = reverse_sequence_model(
            dims,
            elem,
            batch_axis=self.batch_axis,
            time_axis=self.time_axis,
            domain="" if {self.batch_axis, self.time_axis} == {0, 1} else REVSEQ_DOMAIN,
            lens_elem=onnx.TensorProto.INT32 if self.computed else self.lens_type,
            lens_dim="N" if dynamic else ...,
            opset=OPSET,
            ir_version=9,
            name="probe",
        )
        if self.computed:
            graph = model.graph
            graph.node[0].input[1] = "lens_cast"
            cast = onnx.helper.make_node("Cast", ["lens"], ["lens_cast"], to=self.lens_type)
            graph.node.insert(0, cast)
        return model

    def shape(self, time_len: int, batch: int) -> tuple[int, ...]:
        """The data's shape at these sizes."""
        return tuple(time_len if d == "T" else batch if d == "B" else d for d in self.dims)


FORM_LAYOUTS = (
    FormLayout(("T", "B", 3), 1, 0),
    FormLayout(("B", "T", 2, 3), 0, 1, computed=True),
    FormLayout(("T", "B", 1), 1, 0),
    FormLayout((2, "T", 3, "B"), 3, 1, lens_type=onnx.TensorProto.INT32),
    FormLayout((3, "B", "T"), 1, 2),
    FormLayout(("T", "B"), 1, 0),
    FormLayout(("T", "B", 2, 1, 3), 1, 0),
)
"""Rows of three elements time-major, of six batch-major (its lengths computed), and
single-element rows (the matrix form: squeezed, and at the static (5, 4) transposed
too); general axes (revseq's op): a leading axis before the time axis and the batch
axis after it, int32 lengths (GatherND tuples of three coordinates, or batch_dims with
two: a runtime has read those wrong), and the time axis last. Ranks 2 to 5: a matrix
and rows of three trailing dims, one of size 1. The first is what the costs are timed on."""


def form_inputs(
    layout: FormLayout, dynamic: bool, *, invalid: bool, elem: int = onnx.TensorProto.FLOAT
) -> list[dict[str, np.ndarray]]:
    """Lengths 0, 1, T and one between; with ``invalid``, also -1 and T+2.

    The data is float32 on float16's grid (:func:`probe_floats`), or for another
    ``elem`` random integers of that type.
    """
    rng = np.random.default_rng(2)
    lens_type = (
        np.int32 if layout.computed or layout.lens_type == onnx.TensorProto.INT32 else np.int64
    )
    feeds = []
    for time_len, batch in SIZES if dynamic else SIZES[:1]:
        pattern = [time_len + 2, -1, 0, 1] if invalid else [time_len, 0, 1, min(2, time_len)]
        lens = np.array((pattern * batch)[:batch], lens_type)
        shape = layout.shape(time_len, batch)
        if elem == onnx.TensorProto.FLOAT:
            x = probe_floats(rng, shape)
        else:
            np_type = onnx.helper.tensor_dtype_to_np_dtype(elem)
            x = rng.integers(-100, 100, shape).astype(np_type)
        feeds.append({"x": x, "lens": lens})
    return feeds
