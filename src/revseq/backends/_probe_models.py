"""The probe models, and the inputs each runs on (see :mod:`revseq.backends.probe`).

Each op and variant the forms emit, used the way the forms use it; each gather on each
element type; each form end to end, time- and batch-major.
"""

from __future__ import annotations

__all__ = [
    "FORM_LAYOUTS",
    "INDEX_TYPES",
    "OP_PROBES",
    "OPSET",
    "Probe",
    "SIZES",
    "form_inputs",
    "gather_index",
    "gather_model",
    "op_probes",
    "probe_inputs",
    "probe_model",
]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx
import onnx.parser
import onnx.shape_inference

from revseq.ops.profiles import FLAT_GATHER_ELEMENTS

OPSET = 18
# (T, B) sizes each probe runs at: static shapes at the first, symbolic dims at all.
SIZES = ((5, 4), (7, 2), (1, 3))
# Empty sequences and batches, which a probe marked ``empty`` also runs with symbolic dims.
EMPTY_SIZES = ((0, 3), (4, 0))


@dataclasses.dataclass(frozen=True)
class Probe:
    """One probe model, and the op types or variants it tests.

    A probe may use other ops on the way (each has a probe of its own). A probe of the
    index arithmetic runs once per type in ``index_types`` (its body takes the dynamic
    flag and the type); an op or variant enters a profile when, for some index type,
    every probe that tests it with that type ran exactly. ``empty``: with symbolic dims
    it also runs an empty sequence and an empty batch (``EMPTY_SIZES``).
    """

    name: str
    certifies: tuple[str, ...]
    body: Callable[[bool, str], str]
    index_types: tuple[str, ...] = ("int64",)
    empty: bool = False


INDEX_TYPES = ("int64", "int32")
"""The index arithmetic's types: int64, and int32 as the forms run it where int64 is not
on the device (WebGPU) or is slower."""

_ELEM = {"int64": 7, "int32": 6}


def _to(itype: str) -> str:
    return f"Cast <to = {_ELEM[itype]}>"


# The suffix of a value cast to int64 (widened: GatherND takes no int32) or to int32
# (narrowed: the ":int32" variants).
_CAST_SUFFIX = {"int64": "w", "int32": "n"}


def as_type(value: str, itype: str, target: str, then: str) -> str:
    """``then`` reading ``value`` (of ``itype``) as ``target`` where it has ``{}``.

    Preceded by a Cast of ``value`` where the types differ.
    """
    if itype == target:
        return then.format(value)
    cast = f"{value}{_CAST_SUFFIX[target]}"
    return f"{cast} = {_to(target)} ({value})\n" + then.format(cast)


def source(dynamic: bool, *, batch_major: bool = False, itype: str = "int64") -> str:
    """Statements computing ``src``, the forms' source index, from ``lens`` at run time.

    As in the forms: T (a constant, or sliced from Shape and cast) clamps the lengths by
    Less+Where, and ``src = where(L < t+1, t, L - (t+1))`` over [T, B] ([B, T] when
    batch-major). Also ``bgrid``: 0 .. B-1 broadcast over the same shape; with symbolic
    dims B counts the lengths and the shape is ``src``'s, as ``gather_nd`` builds them.
    Both are of ``itype``: with int32 the lengths are clamped in int64 and cast, and the
    time and batch vectors are made in int64 and cast, as the forms do. ``b1`` is B
    (int64), ``bi`` B in ``itype`` (see :func:`batch_of`).
    """
    t_axis, b_axis = (1, 0) if batch_major else (0, 1)
    wide = itype == "int64"
    steps, biota, clamped = ("steps", "biota", "L") if wide else ("s64", "b64", "L64")
    if dynamic:
        dims = (
            f"tshape = Shape <start = {t_axis}, end = {t_axis + 1}> (x)\n"
            "t1 = Cast <to = 7> (tshape)\nts = Squeeze (t1, zero1)\n"
            f"{steps} = Range (zero, ts, one)\n"
            f"bshape = Shape <start = {b_axis}, end = {b_axis + 1}> (x)\n"
            "b1 = Cast <to = 7> (bshape)\nnlens = Shape (lens)\n"
            f"bs = Squeeze (nlens, zero1)\n{biota} = Range (zero, bs, one)\n"
        )
        if not wide:
            dims += f"steps = {_to(itype)} ({steps})\nbiota = {_to(itype)} ({biota})\n"
            dims += f"bi = {_to(itype)} (bshape)\n"
    else:
        time_len, batch = (4, 4) if batch_major else (5, 4)
        values = ", ".join(str(i) for i in range(time_len))
        dims = (
            f"t1 = Constant <value = int64[1] {{{time_len}}}> ()\n"
            f"steps = Constant <value = {itype}[{time_len}] {{{values}}}> ()\n"
            f"b1 = Constant <value = int64[1] {{{batch}}}> ()\n"
            f"biota = Constant <value = {itype}[4] {{0, 1, 2, 3}}> ()\n"
        )
        if not wide:
            dims += f"bi = Constant <value = {itype}[1] {{{batch}}}> ()\n"
    t_dim, b_dim = ("zero1", "one1") if batch_major else ("one1", "zero1")
    clamp = f"k0 = Less (t1, lens)\n{clamped} = Where (k0, t1, lens)\n"
    one = "one1"
    if not wide:
        clamp += f"L = {_to(itype)} ({clamped})\n"
        clamp += f"onei = Constant <value = {itype}[1] {{1}}> ()\n"
        one = "onei"
    return (
        dims + clamp + f"t = Unsqueeze (steps, {t_dim})\nlb = Unsqueeze (L, {b_dim})\n"
        f"n = Add (t, {one})\nk = Less (lb, n)\nback = Sub (lb, n)\n"
        "src = Where (k, t, back)\n"
        "lead = Shape (src)\n"
        f"bu = Unsqueeze (biota, {b_dim})\nbgrid = Expand (bu, lead)"
    )


def batch_of(itype: str) -> str:
    """The name :func:`source` gives B in ``itype``."""
    return "b1" if itype == "int64" else "bi"


T1 = "t1shape = Shape <start = 0, end = 1> (x)\nt1 = Cast <to = 7> (t1shape)"
# The row form's view of [T, B, 3] data: its static trailing dim kept, the rows a -1.
ROWS = "rowdims = Constant <value = int64[2] {-1, 3}> ()\nrows = Reshape (x, rowdims)"

OP_PROBES: tuple[Probe, ...] = (
    Probe("Shape", ("Shape",), lambda d, _: f"{T1}\ny = Identity (t1)"),
    Probe(
        "Slice",
        ("Slice",),
        lambda d, _: "s = Shape (x)\nt = Slice (s, zero1, one1)\ny = Cast <to = 7> (t)",
    ),
    Probe(
        "Slice:reverse",
        ("Slice:reverse",),
        lambda d, _: "y = Slice (x, minus1, lowest1, zero1, minus1)",
    ),
    # The same over rank-4 and rank-5 views of the data, along both leading axes: MNN
    # 3.6.1 reverses ranks 2 and 3 exactly, but not rank 4 (it frees an invalid pointer
    # on [5, 4, 2, 3]) nor rank 5.
    *(
        Probe(
            f"Slice:reverse:high_rank ({rank})",
            ("Slice:reverse:high_rank",),
            lambda d, _, axes=axes: (
                f"axes = Constant <value = int64[{len(axes)}] {{{', '.join(axes)}}}> ()\n"
                "v = Unsqueeze (x, axes)\nr = Slice (v, minus1, lowest1, zero1, minus1)\n"
                "y = Slice (r, minus1, lowest1, one1, minus1)"
            ),
        )
        for rank, axes in ((4, ("2",)), (5, ("2", "3")))
    ),
    Probe(
        "Cast", ("Cast",), lambda d, _: "l32 = Cast <to = 6> (lens)\ny = Cast <to = 7> (l32)"
    ),
    Probe("Squeeze", ("Squeeze",), lambda d, _: f"{T1}\ny = Squeeze (t1, zero1)"),
    Probe(
        "Range",
        ("Range",),
        lambda d, _: f"{T1}\nts = Squeeze (t1, zero1)\ny = Range (zero, ts, one)",
    ),
    Probe(
        "ConstantOfShape",
        ("ConstantOfShape",),
        lambda d, _: f"{T1}\ny = ConstantOfShape <value = int64[1] {{1}}> (t1)",
    ),
    Probe(
        "CumSum",
        ("CumSum",),
        lambda d, _: (
            f"{T1}\nones = ConstantOfShape <value = int64[1] {{1}}> (t1)\n"
            "c = CumSum (ones, zero)\ny = Sub (c, one1)"
        ),
    ),
    Probe(
        "Less",
        ("Less",),
        lambda d, _: f"{T1}\nk = Less (t1, lens)\ny = Where (k, t1, lens)",
    ),
    Probe(
        "Where",
        ("Where",),
        lambda d, it: f"{source(d, itype=it)}\ny = Identity (src)",
        INDEX_TYPES,
    ),
    # The select as it used to be written, its broadcast operand on the "else" side: no
    # form emits this variant any more (MNN 3.6 misread it); probed to keep it known.
    Probe(
        "Where:broadcast_else",
        ("Where:broadcast_else",),
        lambda d, _: (
            f"{T1}\nts = Squeeze (t1, zero1)\nr = Range (zero, ts, one)\n"
            "t = Unsqueeze (r, one1)\nlb = Unsqueeze (lens, zero1)\nn = Add (t, one1)\n"
            "k = Less (t, lb)\nback = Sub (lb, n)\ny = Where (k, back, t)"
        ),
    ),
    # The index arithmetic in int32 as the forms run it: with a static T, lengths
    # clamped to [0, T] in int64 and cast; with symbolic dims as ``source`` builds it;
    # the select over [T, B], a flat row index, index tuples, a Cast to int64 at the end.
    Probe(
        "Index:int32",
        ("Index:int32",),
        lambda d, it: (
            f"{source(True, itype=it)}\nscaled = Mul (src, bi)\nflat = Add (scaled, bgrid)\n"
            "t3 = Unsqueeze (src, two1)\nf3 = Unsqueeze (flat, two1)\n"
            "c = Concat <axis = 2> (t3, f3)\ny = Cast <to = 7> (c)"
            if d
            else "t1 = Constant <value = int64[1] {5}> ()\nc = Min (lens, t1)\n"
            "c0 = Max (c, zero1)\nL = Cast <to = 6> (c0)\n"
            "t = Constant <value = int32[5, 1] {0, 1, 2, 3, 4}> ()\n"
            "one32 = Constant <value = int32[1] {1}> ()\n"
            "b32 = Constant <value = int32[1] {3}> ()\n"
            "lb = Unsqueeze (L, zero1)\nn = Add (t, one32)\nk = Less (lb, n)\n"
            "back = Sub (lb, n)\nsrc = Where (k, t, back)\nscaled = Mul (src, b32)\n"
            "y = Cast <to = 7> (scaled)"
        ),
        ("int32",),
    ),
    # The same select in int64 and the index tuples of the coordinate forms, on the
    # device (onnxruntime-web's WebGPU EP lacks it).
    Probe(
        "Index:int64",
        ("Index:int64",),
        lambda d, it: (
            f"{source(d)}\nt3 = Unsqueeze (src, two1)\nb3 = Unsqueeze (bgrid, two1)\n"
            "y = Concat <axis = 2> (t3, b3)"
        ),
    ),
    # Lengths clamped to [0, T] in one op, int64 and int32 (-2 .. T+2 here), then used
    # as indices, as the forms use them (an integer type must survive the Clip).
    Probe(
        "Clip",
        ("Clip",),
        lambda d, _: (
            "two = Constant <value = int64[1] {2}> ()\nl = Sub (lens, two)\n"
            "top = Constant <value = int64 {4}> ()\nc = Clip (l, zero, top)\n"
            "l32 = Cast <to = 6> (l)\nzero32 = Constant <value = int32 {0}> ()\n"
            "top32 = Constant <value = int32 {4}> ()\nc32 = Clip (l32, zero32, top32)\n"
            "tab = Constant <value = float[5] {0.5, 1.5, 2.5, 3.5, 4.5}> ()\n"
            "g = Gather (tab, c)\ng32 = Gather (tab, c32)\ny = Concat <axis = 0> (g, g32)"
        ),
    ),
    # The same clamp where the Clip's result is cast back to an integer type before use
    # (``Clip:cast``: onnx2torch's integer Clip comes out float32), over the lengths and
    # four constants (-2**63 + 1, 2**63 - 1, 2**24 + 1, 3: no float32 holds the first
    # three), each cast to both index types; int32 lengths too.
    Probe(
        "Clip:cast",
        ("Clip:cast",),
        lambda d, _: (
            "two = Constant <value = int64[1] {2}> ()\nl = Sub (lens, two)\n"
            "top = Constant <value = int64 {4}> ()\nc = Clip (l, zero, top)\n"
            "c64 = Cast <to = 7> (c)\nc32 = Cast <to = 6> (c)\n"
            "far = Constant <value = int64[4] {-9223372036854775807, 9223372036854775807, "
            "16777217, 3}> ()\nf = Clip (far, zero, top)\n"
            "f64 = Cast <to = 7> (f)\nf32 = Cast <to = 6> (f)\n"
            "l32 = Cast <to = 6> (l)\nzero32 = Constant <value = int32 {0}> ()\n"
            "top32 = Constant <value = int32 {4}> ()\nk = Clip (l32, zero32, top32)\n"
            "k64 = Cast <to = 7> (k)\nk32 = Cast <to = 6> (k)\n"
            "tab = Constant <value = float[5] {0.5, 1.5, 2.5, 3.5, 4.5}> ()\n"
            "g1 = Gather (tab, c64)\ng2 = Gather (tab, c32)\ng3 = Gather (tab, k64)\n"
            "g4 = Gather (tab, k32)\ng5 = Gather (tab, f64)\ng6 = Gather (tab, f32)\n"
            "y = Concat <axis = 0> (g1, g2, g3, g4, g5, g6)"
        ),
    ),
    Probe("Min", ("Min",), lambda d, _: f"{T1}\ny = Min (lens, t1)"),
    Probe("Max", ("Max",), lambda d, _: f"{T1}\nd = Sub (lens, t1)\ny = Max (d, zero1)"),
    Probe("Add", ("Add",), lambda d, _: f"{T1}\ny = Add (lens, t1)"),
    Probe("Sub", ("Sub",), lambda d, _: f"{T1}\ny = Sub (lens, t1)"),
    # Of two run-time tensors (not a tensor and itself: tract makes that a Square, which
    # has no int64 kernel).
    Probe("Mul", ("Mul",), lambda d, _: "l1 = Add (lens, one1)\ny = Mul (lens, l1)"),
    # A tensor times a dim read from the data's shape, in int64 (a run-time stride).
    Probe("Mul:dim", ("Mul:dim",), lambda d, _: f"{T1}\ny = Mul (lens, t1)"),
    # A sum of a run-time vector, on its own: a probe through ConstantOfShape failed on
    # TVM for the ConstantOfShape (it cannot emit the broadcast), not for the sum.
    Probe(
        "ReduceSum", ("ReduceSum",), lambda d, _: f"{T1}\ny = ReduceSum <keepdims = 1> (t1)"
    ),
    # The stride without Mul:dim: a count of ones, ConstantOfShape as the stride uses it.
    Probe(
        "ConstantOfShape:count",
        ("ConstantOfShape",),
        lambda d, _: (
            f"{T1}\nones = ConstantOfShape <value = int64[1] {{1}}> (t1)\n"
            "y = ReduceSum <keepdims = 1> (ones)"
        ),
    ),
    # The lean index (``form@lean``, ``ops/_emit.py``), each step as the forms take it:
    # dims read from a shape used with no Cast (the lengths clamped to T, T's steps, a
    # row stride), the batch count read from the data where it meets the lengths, and
    # Range's scalar made by ReduceSum.
    Probe(
        "Shape:arithmetic",
        ("Shape:arithmetic",),
        lambda d, _: (
            "t1 = Shape <start = 0, end = 1> (x)\nk = Less (t1, lens)\n"
            "L = Where (k, t1, lens)\nts = Squeeze (t1, zero1)\nr = Range (zero, ts, one)\n"
            "t = Unsqueeze (r, one1)\nb1 = Shape <start = 1, end = 2> (x)\n"
            "m = Mul (t, b1)\ny = Add (m, L)"
        ),
        empty=True,
    ),
    Probe(
        "Range:data_dim",
        ("Range:data_dim",),
        lambda d, _: (
            "bshape = Shape <start = 1, end = 2> (x)\nb1 = Cast <to = 7> (bshape)\n"
            "bs = Squeeze (b1, zero1)\nb = Range (zero, bs, one)\ny = Add (lens, b)"
        ),
        empty=True,
    ),
    Probe(
        "ReduceSum:scalar",
        ("ReduceSum:scalar",),
        lambda d, _: f"{T1}\nts = ReduceSum <keepdims = 0> (t1)\ny = Range (zero, ts, one)",
        empty=True,
    ),
    Probe("Unsqueeze", ("Unsqueeze",), lambda d, _: "y = Unsqueeze (lens, zero1)"),
    Probe("Concat", ("Concat",), lambda d, _: f"{T1}\ny = Concat <axis = 0> (lens, t1)"),
    Probe(
        "Expand",
        ("Expand",),
        lambda d, it: (
            "axes = Constant <value = int64[2] {0, 2}> ()\n"
            + (
                "u = Unsqueeze (lens, axes)\n"
                if it == "int64"
                else f"l = {_to(it)} (lens)\nu = Unsqueeze (l, axes)\n"
            )
            + "s = Shape (x)\ny = Expand (u, s)"
        ),
        INDEX_TYPES,
    ),
    # The gathers fed as the forms feed them: with int32 arithmetic, Gather and
    # GatherElements take the int32 index as it is (their ":int32" variants), GatherND
    # takes its tuples cast to int64.
    Probe(
        "GatherElements",
        ("GatherElements",),
        lambda d, it: (
            f"{source(d, itype=it)}\nu = Unsqueeze (src, two1)\ns = Shape (x)\n"
            "idx = Expand (u, s)\ny = GatherElements <axis = 0> (x, idx)"
        ),
        INDEX_TYPES,
    ),
    Probe(
        "GatherElements:int32",
        ("GatherElements:int32",),
        lambda d, it: (
            f"{source(d, itype=it)}\n"
            + as_type("src", it, "int32", "u = Unsqueeze ({}, two1)\n")
            + "s = Shape (x)\nidx = Expand (u, s)\ny = GatherElements <axis = 0> (x, idx)"
        ),
        INDEX_TYPES,
    ),
    Probe(
        "GatherND",
        ("GatherND",),
        lambda d, it: (
            f"{source(d, itype=it)}\nt3 = Unsqueeze (src, two1)\n"
            "b3 = Unsqueeze (bgrid, two1)\nc = Concat <axis = 2> (t3, b3)\n"
            + as_type("c", it, "int64", "y = GatherND (x, {})")
        ),
        INDEX_TYPES,
    ),
    Probe(
        "GatherND:batch_dims",
        ("GatherND:batch_dims",),
        lambda d, it: (
            f"{source(d, batch_major=True, itype=it)}\nu = Unsqueeze (src, two1)\n"
            + as_type("u", it, "int64", "y = GatherND <batch_dims = 1> (x, {})")
        ),
        INDEX_TYPES,
    ),
    # batch_dims with tuples of two coordinates, as with a batch axis after the time
    # axis (rank >= 4 with general axes): the data stacked twice on a new axis 0, the
    # (src, b) tuples expanded over it. MNN 3.6.1 reads these wrong.
    Probe(
        "GatherND:batch_dims:tuples",
        ("GatherND:batch_dims:tuples",),
        lambda d, it: (
            f"{source(d, itype=it)}\nt3 = Unsqueeze (src, two1)\n"
            "b3 = Unsqueeze (bgrid, two1)\nc = Concat <axis = 2> (t3, b3)\n"
            "c4 = Unsqueeze (c, zero1)\n"
            "x4 = Unsqueeze (x, zero1)\nx2 = Concat <axis = 0> (x4, x4)\n"
            "two = Constant <value = int64[1] {2}> ()\n"
            "shape = Concat <axis = 0> (two, lead, two)\nidx = Expand (c4, shape)\n"
            + as_type("idx", it, "int64", "y = GatherND <batch_dims = 1> (x2, {})")
        ),
        INDEX_TYPES,
    ),
    Probe(
        "Gather",
        ("Gather",),
        lambda d, it: (
            f"{source(d, itype=it)}\nscaled = Mul (src, {batch_of(it)})\n"
            f"flat = Add (scaled, bgrid)\n{ROWS}\ny = Gather <axis = 0> (rows, flat)"
        ),
        INDEX_TYPES,
    ),
    Probe(
        "Gather:int32",
        ("Gather:int32",),
        lambda d, it: (
            f"{source(d, itype=it)}\nscaled = Mul (src, {batch_of(it)})\n"
            f"flat = Add (scaled, bgrid)\n{ROWS}\n"
            + as_type("flat", it, "int32", "y = Gather <axis = 0> (rows, {})")
        ),
        INDEX_TYPES,
    ),
    # What the row form emits for constant lengths: the data gathered by a constant
    # index of two dims (tinygrad 0.14 reads a constant index as a flat list).
    Probe(
        "Gather:constant_index",
        ("Gather:constant_index",),
        lambda d, _: (
            "idx = Constant <value = int64[2, 2] {1, 0, 0, 1}> ()\n"
            "y = Gather <axis = 1> (x, idx)"
        ),
    ),
    # Also of empty data: OpenVINO 2026.4 flattens [0, 3, 3] to [0, 9], tinygrad 0.14
    # divides by zero (the row form views such data as [rows, *trailing] instead).
    Probe("Flatten", ("Flatten",), lambda d, _: "y = Flatten <axis = 2> (x)", empty=True),
    Probe(
        "Reshape",
        ("Reshape",),
        lambda d, _: (
            "s = Shape (x)\nshape = Concat <axis = 0> (s, one1)\ny = Reshape (x, shape)"
        ),
    ),
    Probe(
        "Reshape:allowzero",
        ("Reshape:allowzero",),
        lambda d, _: (
            "f = Flatten <axis = 2> (x)\ns = Shape (x)\ny = Reshape <allowzero = 1> (f, s)"
        ),
    ),
    # The row form's view of data with several run-time trailing dims: [rows, *trailing]
    # read from the shape (TVM 0.27 reshapes only to a shape expression, not to a
    # tensor computed from one).
    Probe(
        "Reshape:view",
        ("Reshape:view",),
        lambda d, _: (
            "d0 = Shape <start = 0, end = 1> (x)\nc0 = Cast <to = 7> (d0)\n"
            "d1 = Shape <start = 1, end = 2> (x)\nc1 = Cast <to = 7> (d1)\n"
            "rows = Mul (c0, c1)\ntail = Shape <start = 2> (x)\n"
            "c2 = Cast <to = 7> (tail)\nshape = Concat <axis = 0> (rows, c2)\n"
            "y = Reshape <allowzero = 1> (x, shape)"
        ),
    ),
    Probe(
        "ReduceProd",
        ("ReduceProd",),
        lambda d, _: (
            "s = Shape (x)\ntail = Slice (s, one1, three1)\nc = Cast <to = 7> (tail)\n"
            "y = ReduceProd <keepdims = 1> (c)"
        ),
    ),
    Probe("Transpose", ("Transpose",), lambda d, _: "y = Transpose <perm = [1, 0, 2]> (x)"),
    Probe("Identity", ("Identity",), lambda d, _: "y = Identity (x)"),
)
"""Every op probe."""

CONSTANTS = """
    zero = Constant <value = int64 {0}> ()
    one = Constant <value = int64 {1}> ()
    zero1 = Constant <value = int64[1] {0}> ()
    one1 = Constant <value = int64[1] {1}> ()
    two1 = Constant <value = int64[1] {2}> ()
    three1 = Constant <value = int64[1] {3}> ()
    minus1 = Constant <value = int64[1] {-1}> ()
    lowest1 = Constant <value = int64[1] {-9223372036854775808}> ()
"""


def op_probes() -> tuple[Probe, ...]:
    """The op probes, in the order they run."""
    return OP_PROBES


def probe_model(
    probe: Probe, dynamic: bool, itype: str = "int64", *, float_output: bool = True
) -> onnx.ModelProto:
    """The probe's model with ``itype`` index arithmetic.

    With ``float_output``, an integer result leaves as float32 (exact for these small
    values): tract keeps shape arithmetic as symbolic dims, which its Python API cannot
    hand back. Not on a backend that reports placement: there the Cast itself (none
    from int64 on WebGPU) would be the CPU fallback the probe saw.
    """
    batch_major = probe.name == "GatherND:batch_dims"
    t, b = ("T", "B") if dynamic else ((4, 5) if batch_major else (5, 4))
    dims = f"[{b}, {t}, 3]" if batch_major else f"[{t}, {b}, 3]"
    if batch_major and not dynamic:
        dims = "[4, 4, 3]"
    lens_dim = "B" if dynamic else (4 if batch_major else b)
    text = f"""
    <ir_version: 9, opset_import: ["" : {OPSET}]>
    probe (float{dims} x, int64[{lens_dim}] lens) => (y) {{
    {CONSTANTS}
    {probe.body(dynamic, itype)}
    }}
    """
    model = onnx.parser.parse_model(text)
    # The output's type is whatever the probe computes: infer it for the runtimes.
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in (*inferred.graph.value_info, *inferred.graph.output)}
    result = types.get("y")
    if result is None or not result.tensor_type.elem_type:
        raise ValueError(f"probe {probe.name}: no output type")
    output = model.graph.output[0]
    output.type.CopyFrom(result)
    if float_output and result.tensor_type.elem_type != onnx.TensorProto.FLOAT:
        model.graph.node.append(onnx.helper.make_node("Cast", ["y"], ["y_float"], to=1))
        output.name = "y_float"
        output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for node in model.graph.node:  # placement logs name nodes: each needs its own
        node.name = node.output[0]
    return model


def probe_inputs(probe: Probe, dynamic: bool, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    batch_major = probe.name == "GatherND:batch_dims"
    if not dynamic:
        sizes: tuple[tuple[int, int], ...] = ((4, 4) if batch_major else (5, 4),)
    else:
        sizes = SIZES + EMPTY_SIZES if probe.empty else SIZES
    feeds = []
    for time_len, batch in sizes:
        shape = (batch, time_len, 3) if batch_major else (time_len, batch, 3)
        x = rng.standard_normal(shape).astype(np.float32)
        lens = np.array(([0, 1, time_len, 3] * batch)[:batch], dtype=np.int64)
        feeds.append({"x": x, "lens": np.minimum(lens, time_len)})
    return feeds


def gather_model(gather: str, elem: int, *, run_time_index: bool = False) -> onnx.ModelProto:
    """``gather`` reversing the time axis of a static [4, 3, 2] tensor of type ``elem``.

    Gather reads the rows of a Flatten view and is reshaped back, as the row form
    feeds it (WebGPU runs a uint8 Gather but not its Flatten on the GPU);
    ``GatherElements:flat`` reads the 1-D view of the data by a flat index and is
    reshaped back, as the forms gather single-element rows with static dims. The index
    is a constant, or with ``run_time_index`` computed from the int32 input ``steps``
    (``gather_index``) as the forms compute theirs from lengths given at run time: an
    Add, for GatherElements an Expand over the rows, and a Cast to int64. A backend may
    take another kernel for each: tinygrad 0.14 quiets a signalling float16 NaN in every
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
        if expands:  # in int32: WebGPU expands no int64 on its GPU
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

    What the planner emits where a target's gathers lack ``elem`` (``ops/carriers.py``).
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
    from revseq._inputs import random_array

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


# Layouts the form probes run: (dims with T and B placeholders, batch_axis, time_axis).
# Rows of three elements time-major, of six batch-major, and single-element rows (the
# matrix form: squeezed, and at the static (5, 4) transposed too); and general axes
# (revseq's op): a leading axis before the time axis and the batch axis after it (GatherND
# tuples of three coordinates, or batch_dims with two: MNN 3.6 read those wrong), and the
# time axis last. Ranks 2 to 5: a matrix (no trailing dim: the rank-2 form, which
# gathers the data's transpose where the batch is short) and rows of three trailing
# dims, one of size 1.
FORM_LAYOUTS = (
    (("T", "B", 3), 1, 0),
    (("B", "T", 2, 3), 0, 1),
    (("T", "B", 1), 1, 0),
    ((2, "T", 3, "B"), 3, 1),
    ((3, "B", "T"), 1, 2),
    (("T", "B"), 1, 0),
    (("T", "B", 2, 1, 3), 1, 0),
)


def form_inputs(layout: tuple, dynamic: bool, *, invalid: bool) -> list[dict[str, np.ndarray]]:
    """Lengths 0, 1, T and one between; with ``invalid``, also -1 and T+2."""
    dims = layout[0]
    rng = np.random.default_rng(2)
    feeds = []
    for time_len, batch in SIZES if dynamic else SIZES[:1]:
        shape = tuple(time_len if d == "T" else batch if d == "B" else d for d in dims)
        pattern = [time_len + 2, -1, 0, 1] if invalid else [time_len, 0, 1, min(2, time_len)]
        lens = np.array((pattern * batch)[:batch], np.int64)
        feeds.append({"x": rng.standard_normal(shape).astype(np.float32), "lens": lens})
    return feeds
