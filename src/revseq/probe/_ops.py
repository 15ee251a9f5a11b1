"""The op probes: each op and variant the forms emit, used the way the forms use it.

A probe may use other ops on the way (each has a probe of its own). An op or variant
enters a profile when, for some index type, every probe that tests it with that type
ran exactly, with static shapes and with symbolic dims.
"""

from __future__ import annotations

__all__ = ["OP_PROBES", "Probe"]

import dataclasses
from collections.abc import Callable

from revseq.ops import vocabulary as v
from revseq.probe._text import (
    INDEX_TYPES,
    ROWS,
    T1,
    as_type,
    batch_of,
    source,
    t1,
    to_type,
)

_HIGHEST = "highest1 = Constant <value = int64[1] {9223372036854775807}> ()"


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


OP_PROBES: tuple[Probe, ...] = (
    Probe("Shape", ("Shape",), lambda d, _: f"{T1}\ny = Identity (t1)"),
    Probe(
        "Slice",
        ("Slice",),
        lambda d, _: "s = Shape (x)\nt = Slice (s, zero1, one1)\ny = Cast <to = 7> (t)",
    ),
    Probe(
        v.REVERSING_SLICE,
        (v.REVERSING_SLICE,),
        lambda d, _: "y = Slice (x, minus1, lowest1, zero1, minus1)",
    ),
    # The data itself sliced and joined along both leading axes, as the slices form
    # moves it: its second step on, and its second batch entry on, put before the rest.
    Probe(
        v.SLICE_DATA,
        (v.SLICE_DATA,),
        lambda d, _: (
            f"{_HIGHEST}\nrest = Slice (x, one1, highest1, zero1)\n"
            "y = Slice (rest, one1, highest1, one1)"
        ),
    ),
    Probe(
        v.CONCAT_DATA,
        (v.CONCAT_DATA,),
        lambda d, _: (
            f"{_HIGHEST}\nhead = Slice (x, zero1, one1, zero1)\n"
            "rest = Slice (x, one1, highest1, zero1)\nt = Concat <axis = 0> (rest, head)\n"
            "first = Slice (t, zero1, one1, one1)\nothers = Slice (t, one1, highest1, one1)\n"
            "y = Concat <axis = 1> (others, first)"
        ),
    ),
    # The same over rank-4 and rank-5 views of the data, along both leading axes: a
    # runtime has reversed ranks 2 and 3 exactly, but not rank 4 (freeing an invalid
    # pointer on [5, 4, 2, 3]) nor rank 5.
    *(
        Probe(
            f"{v.REVERSING_SLICE_HIGH_RANK} ({rank})",
            (v.REVERSING_SLICE_HIGH_RANK,),
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
        lambda d, _: f"{t1(d)}\nk = Less (t1, lens)\ny = Where (k, t1, lens)",
    ),
    Probe(
        "Where",
        ("Where",),
        lambda d, it: f"{source(d, itype=it, select=True)}\ny = Identity (src)",
        INDEX_TYPES,
    ),
    # The select as it used to be written, its broadcast operand on the "else" side: no
    # form emits this variant any more (a runtime misread it); probed to keep it known.
    Probe(
        v.WHERE_BROADCAST_ELSE,
        (v.WHERE_BROADCAST_ELSE,),
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
        v.INT32_INDEX,
        (v.INT32_INDEX,),
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
    # device (a GPU without int64 arithmetic lacks it).
    Probe(
        v.INT64_INDEX,
        (v.INT64_INDEX,),
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
    # (``Clip:cast``: a converter's integer Clip may come out float32), over the lengths and
    # four constants (-2**63 + 1, 2**63 - 1, 2**24 + 1, 3: no float32 holds the first
    # three), each cast to both index types; int32 lengths too.
    Probe(
        v.CLIP_CAST,
        (v.CLIP_CAST,),
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
    Probe("Min", ("Min",), lambda d, _: f"{t1(d)}\ny = Min (lens, t1)"),
    Probe("Max", ("Max",), lambda d, _: f"{t1(d)}\nd = Sub (lens, t1)\ny = Max (d, zero1)"),
    Probe("Add", ("Add",), lambda d, _: f"{t1(d)}\ny = Add (lens, t1)"),
    Probe("Sub", ("Sub",), lambda d, _: f"{t1(d)}\ny = Sub (lens, t1)"),
    # Of two run-time tensors (not a tensor and itself: a runtime may make that a
    # Square, which may have no int64 kernel).
    Probe("Mul", ("Mul",), lambda d, _: "l1 = Add (lens, one1)\ny = Mul (lens, l1)"),
    # A tensor times a dim read from the data's shape, in int64 (a run-time stride).
    Probe(v.MUL_DIM, (v.MUL_DIM,), lambda d, _: f"{t1(d)}\ny = Mul (lens, t1)"),
    # A sum of a run-time vector, on its own: a probe through ConstantOfShape failed on
    # a compiler for the ConstantOfShape (it could not emit the broadcast), not the sum.
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
    # The lean index (``form@lean``, ``ops/forms/_emit.py``), each step as the forms take it:
    # dims read from a shape used with no Cast (the lengths clamped to T, T's steps, a
    # row stride), the batch count read from the data where it meets the lengths, and
    # Range's scalar made by ReduceSum.
    Probe(
        v.SHAPE_ARITHMETIC,
        (v.SHAPE_ARITHMETIC,),
        lambda d, _: (
            "t1 = Shape <start = 0, end = 1> (x)\nk = Less (t1, lens)\n"
            "L = Where (k, t1, lens)\nts = Squeeze (t1, zero1)\nr = Range (zero, ts, one)\n"
            "t = Unsqueeze (r, one1)\nb1 = Shape <start = 1, end = 2> (x)\n"
            "m = Mul (t, b1)\ny = Add (m, L)"
        ),
        empty=True,
    ),
    Probe(
        v.BATCH_FROM_DATA,
        (v.BATCH_FROM_DATA,),
        lambda d, _: (
            "bshape = Shape <start = 1, end = 2> (x)\nb1 = Cast <to = 7> (bshape)\n"
            "bs = Squeeze (b1, zero1)\nb = Range (zero, bs, one)\ny = Add (lens, b)"
        ),
        empty=True,
    ),
    Probe(
        v.SCALAR_BY_SUM,
        (v.SCALAR_BY_SUM,),
        lambda d, _: f"{T1}\nts = ReduceSum <keepdims = 0> (t1)\ny = Range (zero, ts, one)",
        empty=True,
    ),
    Probe("Unsqueeze", ("Unsqueeze",), lambda d, _: "y = Unsqueeze (lens, zero1)"),
    Probe("Concat", ("Concat",), lambda d, _: f"{t1(d)}\ny = Concat <axis = 0> (lens, t1)"),
    Probe(
        "Expand",
        ("Expand",),
        lambda d, it: (
            "axes = Constant <value = int64[2] {0, 2}> ()\n"
            + (
                "u = Unsqueeze (lens, axes)\n"
                if it == "int64"
                else f"l = {to_type(it)} (lens)\nu = Unsqueeze (l, axes)\n"
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
        v.GATHER_ELEMENTS_INT32,
        (v.GATHER_ELEMENTS_INT32,),
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
        v.GATHER_ND_BATCH_DIMS,
        (v.GATHER_ND_BATCH_DIMS,),
        lambda d, it: (
            f"{source(d, batch_major=True, itype=it)}\nu = Unsqueeze (src, two1)\n"
            + as_type("u", it, "int64", "y = GatherND <batch_dims = 1> (x, {})")
        ),
        INDEX_TYPES,
    ),
    # batch_dims with tuples of two coordinates, as with a batch axis after the time
    # axis (rank >= 4 with general axes): the data stacked twice on a new axis 0, the
    # (src, b) tuples expanded over it. A runtime has read these wrong.
    Probe(
        v.GATHER_ND_BATCH_TUPLES,
        (v.GATHER_ND_BATCH_TUPLES,),
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
        v.GATHER_INT32,
        (v.GATHER_INT32,),
        lambda d, it: (
            f"{source(d, itype=it)}\nscaled = Mul (src, {batch_of(it)})\n"
            f"flat = Add (scaled, bgrid)\n{ROWS}\n"
            + as_type("flat", it, "int32", "y = Gather <axis = 0> (rows, {})")
        ),
        INDEX_TYPES,
    ),
    # What the row form emits for constant lengths: the data gathered by a constant
    # index of two dims (a runtime has read a constant index as a flat list).
    Probe(
        v.GATHER_CONSTANT_INDEX,
        (v.GATHER_CONSTANT_INDEX,),
        lambda d, _: (
            "idx = Constant <value = int64[2, 2] {1, 0, 0, 1}> ()\n"
            "y = Gather <axis = 1> (x, idx)"
        ),
    ),
    # Also of empty data: runtimes have flattened [0, 3, 3] to [0, 9] and divided by
    # zero (the row form views such data as [rows, *trailing] instead).
    Probe("Flatten", ("Flatten",), lambda d, _: "y = Flatten <axis = 2> (x)", empty=True),
    Probe(
        "Reshape",
        ("Reshape",),
        lambda d, _: (
            "s = Shape (x)\nshape = Concat <axis = 0> (s, one1)\ny = Reshape (x, shape)"
        ),
    ),
    Probe(
        v.RESHAPE_ALLOWZERO,
        (v.RESHAPE_ALLOWZERO,),
        lambda d, _: (
            "f = Flatten <axis = 2> (x)\ns = Shape (x)\ny = Reshape <allowzero = 1> (f, s)"
        ),
    ),
    # The row form's view of data with several run-time trailing dims: [rows, *trailing]
    # read from the shape (a compiler may reshape only to a shape expression, not to a
    # tensor computed from one).
    Probe(
        v.RESHAPE_VIEW,
        (v.RESHAPE_VIEW,),
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
