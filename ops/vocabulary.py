"""The names revseq's layers share: forms, op variants, gathers, element types, domains.

A profile (each runtime room's ``NAME.json``) lists what a backend runs as ONNX op types and as
*variants*: an op used one particular way (``GatherND:batch_dims``), or a way of
computing the index (``Index:int32``). Forms, the planner, the probes and the profiles
all name these through the constants below, so a misspelt name is an error where it is
written, and a profile file naming something unknown fails to load
(:func:`revseq.ops.targets.profile.Profile.from_json`).
"""

from __future__ import annotations

__all__ = [
    "ALL_DIMS",
    "BATCH_FROM_DATA",
    "CLIP_CAST",
    "CONCAT_DATA",
    "COST_CLASSES",
    "DOMAIN_KEY",
    "DYNAMIC",
    "ELEMENT_TYPES",
    "FINITE",
    "FINITE_DOMAIN",
    "FLAT_GATHER_ELEMENTS",
    "FORM_NAMES",
    "FUNCTION_DOMAIN",
    "GATHER_CONSTANT_INDEX",
    "GATHER_ELEMENTS",
    "GATHER_ELEMENTS_INT32",
    "GATHER_ELEMENTS_KINDS",
    "GATHER_INT32",
    "GATHER_KINDS",
    "GATHER_ND",
    "GATHER_ND_BATCH_DIMS",
    "GATHER_ND_BATCH_TUPLES",
    "GATHER_ROWS",
    "GATHERS",
    "INDEX_IN_PLACE",
    "INT32_INDEX",
    "INT32_INDEX_SUFFIX",
    "INT64_INDEX",
    "LEAN_INDEX_SUFFIX",
    "LEAN_VARIANTS",
    "MATRIX",
    "MATRIX_STATIC",
    "MUL_DIM",
    "ONE_HOT",
    "ONNX_DOMAINS",
    "RESHAPE_ALLOWZERO",
    "RESHAPE_VIEW",
    "REVERSE_ALL",
    "REVERSING_SLICE",
    "REVERSING_SLICE_HIGH_RANK",
    "REVSEQ_DOMAIN",
    "SCALAR_BY_SUM",
    "SHAPE_ARITHMETIC",
    "SHAPE_CLASSES",
    "SHAPE_KINDS",
    "SLICE_DATA",
    "SLICES",
    "STATIC",
    "TIME_BATCH",
    "VARIANTS",
    "WHERE_BROADCAST_ELSE",
    "data_variant",
    "default_opset",
    "dtype_name",
    "int32_index_variant",
    "split_form_name",
    "variant_names",
]

from collections.abc import Iterable

import onnx
import onnx_ir as ir

# --- The forms -------------------------------------------------------------------------

GATHER_ELEMENTS = "gather_elements"
"""GatherElements with an index as large as the data (the canonical form)."""

GATHER_ND = "gather_nd"
"""GatherND with one (time, batch) index tuple per row of trailing elements."""

GATHER_ROWS = "gather_rows"
"""Gather of whole rows of a ``[rows, ...]`` view by a flat row index."""

FORM_NAMES = (GATHER_ELEMENTS, GATHER_ND, GATHER_ROWS)
"""The forms a strategy names."""

REVERSE_ALL = "reverse_all"
"""The form of a node whose lengths all reach T where no step -1 Slice runs: one Gather
along time at T-1 .. 0 (never a strategy of its own)."""

SLICES = "slices"
"""Constant lengths reversed by slices of the data (a forward Slice, a step -1 Slice and
a Concat per run of equal lengths): no index, for a target without a gather."""

ONE_HOT = "one_hot"
"""Lengths at run time without a gather, a comparison or a Cast: each entry's steps
picked by a product with a 0/1 matrix, computed in float32 (``ops/forms/_one_hot.py``).
Exact on finite data without -0.0 only (``FINITE``): a target asks for it by name."""

FINITE = "finite"
"""A profile's forms (and a target's domain) exact on finite data only: no inf, no NaN,
no -0.0 (``ONE_HOT``)."""

FINITE_DOMAIN = "finite float32 data without -0.0"
"""What ``FINITE`` means, as the check's report and ``revseq targets`` say it."""

DOMAIN_KEY = "revseq.domain"
"""The metadata key of a model whose decompositions are exact on part of the values
only, naming that part (``FINITE``): ``revseq check`` draws its data there."""

INT32_INDEX_SUFFIX = "@int32"
"""Suffix of a form run (and timed) with its symbolic-dim index in int32 where the
backend computes it in int64 otherwise: ``gather_rows@int32``."""

LEAN_INDEX_SUFFIX = "@lean"
"""Suffix of a form run (and timed) with the lean index (``LEAN_VARIANTS``):
``gather_rows@lean``, and ``gather_rows@lean@int32``."""

# --- The gathers -----------------------------------------------------------------------

GATHERS = ("Gather", "GatherElements", "GatherND")
"""The ops that move data."""

FLAT_GATHER_ELEMENTS = "GatherElements:flat"
"""GatherElements on a 1-D view of the data (single-element rows, static dims): a
kernel of its own on some backends (one keeps a signalling float16 NaN there only)."""

GATHER_KINDS = (*GATHERS, FLAT_GATHER_ELEMENTS)
"""What a profile records element types for: each gather, and the flat GatherElements."""

GATHER_ELEMENTS_KINDS = ("GatherElements", FLAT_GATHER_ELEMENTS)
"""GatherElements' kinds, on the data and on its 1-D view."""

# --- Op variants: an op used one particular way ----------------------------------------

GATHER_ND_BATCH_DIMS = "GatherND:batch_dims"
"""GatherND with ``batch_dims`` > 0."""

GATHER_ND_BATCH_TUPLES = "GatherND:batch_dims:tuples"
"""GatherND with ``batch_dims`` and tuples of two coordinates or more."""

GATHER_INT32 = "Gather:int32"
"""Gather reading an int32 index as it is."""

GATHER_ELEMENTS_INT32 = "GatherElements:int32"
"""GatherElements reading an int32 index as it is."""

GATHER_CONSTANT_INDEX = "Gather:constant_index"
"""Gather of the data by a constant index of two dims or more (constant lengths)."""

RESHAPE_ALLOWZERO = "Reshape:allowzero"
"""Reshape with ``allowzero=1`` back to a shape as read."""

RESHAPE_VIEW = "Reshape:view"
"""Reshape with ``allowzero=1`` to ``[rows, *trailing]`` computed from the data's shape."""

REVERSING_SLICE = "Slice:reverse"
"""A step -1 Slice of the data along one axis."""

REVERSING_SLICE_HIGH_RANK = "Slice:reverse:high_rank"
"""The same Slice over data of rank 4 and more."""

MUL_DIM = "Mul:dim"
"""Mul of an int64 tensor by a dim read from a shape."""

CLIP_CAST = "Clip:cast"
"""An integer Clip that is exact once cast back to an integer type."""

WHERE_BROADCAST_ELSE = "Where:broadcast_else"
"""Where with its broadcast operand on the "else" side (no form emits it)."""

SLICE_DATA = "Slice:data"
"""A forward Slice of the data itself along an axis (``Slice`` alone slices shapes)."""

CONCAT_DATA = "Concat:data"
"""A Concat of pieces of the data along an axis (``Concat`` alone joins index vectors)."""

# --- Variants of the index arithmetic --------------------------------------------------

INT32_INDEX = "Index:int32"
"""The index arithmetic in int32 (Less, Where, Add, Sub, Mul over int32)."""

INT64_INDEX = "Index:int64"
"""The index arithmetic in int64, on the backend's device."""

INDEX_IN_PLACE = "Index:in_place"
"""A time-major node's index computed as ``[T, B]``, with no Transpose (never listed by a
profile: the planner adds it where the profile's timed layout says so)."""

SHAPE_ARITHMETIC = "Shape:arithmetic"
"""Arithmetic on a dim read from a shape with no Cast in between (lean index)."""

BATCH_FROM_DATA = "Range:data_dim"
"""The batch count read from the data's shape where it meets the lengths (lean index)."""

SCALAR_BY_SUM = "ReduceSum:scalar"
"""Range's scalars made by ReduceSum rather than Squeeze (lean index)."""

LEAN_VARIANTS = frozenset({SHAPE_ARITHMETIC, BATCH_FROM_DATA, SCALAR_BY_SUM})
"""The lean index: steps a backend runs without, chosen only by its own timings."""

VARIANTS = frozenset(
    {
        GATHER_ND_BATCH_DIMS,
        GATHER_ND_BATCH_TUPLES,
        GATHER_INT32,
        GATHER_ELEMENTS_INT32,
        GATHER_CONSTANT_INDEX,
        RESHAPE_ALLOWZERO,
        RESHAPE_VIEW,
        REVERSING_SLICE,
        REVERSING_SLICE_HIGH_RANK,
        MUL_DIM,
        CLIP_CAST,
        WHERE_BROADCAST_ELSE,
        SLICE_DATA,
        CONCAT_DATA,
        INT32_INDEX,
        INT64_INDEX,
        INDEX_IN_PLACE,
        *LEAN_VARIANTS,
    }
)
"""Every op variant a profile may list (carrier round trips aside: ``carriers.py``)."""

_INT32_INDEX_VARIANTS = {"Gather": GATHER_INT32, "GatherElements": GATHER_ELEMENTS_INT32}


def int32_index_variant(gather: str) -> str | None:
    """The variant saying ``gather`` reads an int32 index as it is (None: int64 only)."""
    return _INT32_INDEX_VARIANTS.get(gather)


def data_variant(gather: str) -> str:
    """The name a signature's allowed set holds where ``gather`` moves the node's type.

    Not a profile's: the planner derives it from the profile's element types.
    """
    if gather not in GATHER_KINDS:
        raise ValueError(f"not a gather kind: {gather!r}")
    return f"{gather}:data"


# --- Element types ---------------------------------------------------------------------

ELEMENT_TYPES: dict[str, int] = {
    "float32": onnx.TensorProto.FLOAT,
    "uint8": onnx.TensorProto.UINT8,
    "int8": onnx.TensorProto.INT8,
    "uint16": onnx.TensorProto.UINT16,
    "int16": onnx.TensorProto.INT16,
    "int32": onnx.TensorProto.INT32,
    "int64": onnx.TensorProto.INT64,
    "string": onnx.TensorProto.STRING,
    "bool": onnx.TensorProto.BOOL,
    "float16": onnx.TensorProto.FLOAT16,
    "float64": onnx.TensorProto.DOUBLE,
    "uint32": onnx.TensorProto.UINT32,
    "uint64": onnx.TensorProto.UINT64,
    "complex64": onnx.TensorProto.COMPLEX64,
    "complex128": onnx.TensorProto.COMPLEX128,
    "bfloat16": onnx.TensorProto.BFLOAT16,
}
"""Every element type ReverseSequence allows (opset 10's fifteen, and bfloat16 from 28):
the name profiles use (numpy's; "string") and the ONNX element type."""

_DTYPE_NAMES = {ir.DataType(elem): name for name, elem in ELEMENT_TYPES.items()}


def dtype_name(dtype: ir.DataType | None) -> str | None:
    """The profile's name of an element type (numpy's, "string" for strings)."""
    if dtype is None:
        return None
    return _DTYPE_NAMES.get(dtype, dtype.name.lower())


# --- Shapes and the classes costs are timed in -----------------------------------------

STATIC = "static"
"""Every dim static."""

DYNAMIC = "dynamic"
"""Some dim symbolic."""

SHAPE_KINDS = (STATIC, DYNAMIC)
"""The two ways a profile lists what runs: with static shapes, with symbolic dims."""

TIME_BATCH = "time+batch"
"""The time and batch dims symbolic, the rows' dims static (as exporters write)."""

ALL_DIMS = "all"
"""Every dim symbolic."""

SHAPE_CLASSES = (STATIC, TIME_BATCH, ALL_DIMS)
"""What a form's cost is timed for."""

MATRIX = "matrix"
"""Single-element rows, time and batch symbolic: a class of its own."""

MATRIX_STATIC = "matrix:static"
"""Single-element rows, every dim static."""

COST_CLASSES = (*SHAPE_CLASSES, MATRIX_STATIC, MATRIX)
"""Every class a profile holds costs and layouts for."""


def variant_names(forms: Iterable[str]) -> tuple[str, ...]:
    """Each form's name, then each with ``@int32``, ``@lean`` and ``@lean@int32``."""
    forms = tuple(forms)
    return (
        *forms,
        *(f + INT32_INDEX_SUFFIX for f in forms),
        *(f + LEAN_INDEX_SUFFIX for f in forms),
        *(f + LEAN_INDEX_SUFFIX + INT32_INDEX_SUFFIX for f in forms),
    )


def split_form_name(name: str) -> tuple[str, bool, bool] | None:
    """``(form, lean, narrow)`` of a name a profile times forms under, or None if unknown."""
    for form in FORM_NAMES:
        for lean in (False, True):
            for narrow in (False, True):
                if name == form + (LEAN_INDEX_SUFFIX if lean else "") + (
                    INT32_INDEX_SUFFIX if narrow else ""
                ):
                    return form, lean, narrow
    return None


# --- Domains: the ONNX domain's two spellings, the generalised op's, the functions' ------
ONNX_DOMAINS = frozenset({"", "ai.onnx"})
"""The two spellings of ONNX's own (default) domain."""

REVSEQ_DOMAIN = "revseq"
"""Domain of the generalised op: any distinct axes, int32 or int64 lengths."""

FUNCTION_DOMAIN = "revseq.inline"
"""Domain of the model-local functions ``inline(..., as_function=True)`` emits."""


def default_opset(proto: onnx.ModelProto) -> int:
    """The version of ONNX's own domain the model imports (0 when none)."""
    return next((op.version for op in proto.opset_import if op.domain in ONNX_DOMAINS), 0)
