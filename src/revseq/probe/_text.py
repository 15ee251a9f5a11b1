"""The text of the probe models: the forms' index arithmetic, written in ONNX's syntax.

Op probes (:mod:`revseq.probe._ops`) are small graphs in ``onnx.parser``'s
text; the statements here compute the source index as the forms do, in int64 or int32.
"""

from __future__ import annotations

__all__ = [
    "CONSTANTS",
    "EMPTY_SIZES",
    "INDEX_TYPES",
    "OPSET",
    "ROWS",
    "SIZES",
    "T1",
    "as_type",
    "batch_of",
    "source",
    "t1",
    "to_type",
]

OPSET = 18
"""The opset every probe model imports."""

SIZES = ((5, 4), (7, 2), (1, 3))
"""(T, B) sizes each probe runs at: static shapes at the first, symbolic dims at all."""

EMPTY_SIZES = ((0, 3), (4, 0))
"""Empty sequences and batches, which a probe marked ``empty`` also runs with symbolic
dims."""

INDEX_TYPES = ("int64", "int32")
"""The index arithmetic's types: int64, and int32 as the forms run it where int64 is not
on the device or is slower."""

_ELEM = {"int64": 7, "int32": 6}


def to_type(itype: str) -> str:
    """A Cast to ``itype`` (int64 or int32), as statement text."""
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
    return f"{cast} = {to_type(target)} ({value})\n" + then.format(cast)


def source(
    dynamic: bool, *, batch_major: bool = False, itype: str = "int64", select: bool = False
) -> str:
    """Statements computing ``src``, the forms' source index, from ``lens`` at run time.

    With symbolic dims (or ``select``), as the forms compute it at run time: T (sliced
    from Shape and cast, or a constant) clamps the lengths by Less+Where, and
    ``src = where(L < t+1, t, L - (t+1))`` over [T, B] ([B, T] when batch-major). With
    static dims, as the forms build it for a static T: a row of a constant table of
    every length's index, gathered by the lengths (which the probes keep in [0, T]:
    the clamp's ops have probes of their own). Also ``bgrid``: 0 .. B-1 broadcast over
    the same shape; with symbolic dims B counts the lengths and the shape is ``src``'s,
    as ``gather_nd`` builds them; ``lead``, that shape. All are of ``itype``: with int32
    at run time the lengths are clamped in int64 and cast, and the time and batch
    vectors are made in int64 and cast, as the forms do. ``b1`` is B (int64), ``bi`` B
    in ``itype`` (see :func:`batch_of`).
    """
    if not dynamic and not select:
        return _table_source(batch_major, itype)
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
            dims += f"steps = {to_type(itype)} ({steps})\nbiota = {to_type(itype)} ({biota})\n"
            dims += f"bi = {to_type(itype)} (bshape)\n"
    else:
        time_len, batch = _STATIC[batch_major]
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
        clamp += f"L = {to_type(itype)} ({clamped})\n"
        clamp += f"onei = Constant <value = {itype}[1] {{1}}> ()\n"
        one = "onei"
    return (
        dims + clamp + f"t = Unsqueeze (steps, {t_dim})\nlb = Unsqueeze (L, {b_dim})\n"
        f"n = Add (t, {one})\nk = Less (lb, n)\nback = Sub (lb, n)\n"
        "src = Where (k, t, back)\n"
        "lead = Shape (src)\n"
        f"bu = Unsqueeze (biota, {b_dim})\nbgrid = Expand (bu, lead)"
    )


# (T, B) of the static probe models, time-major and batch-major.
_STATIC = {False: (5, 4), True: (4, 4)}


def _table_source(batch_major: bool, itype: str) -> str:
    """``source`` with static dims: each length's row of a constant table, as the forms."""
    time_len, batch = _STATIC[batch_major]
    table = [
        [length - 1 - t if t < length else t for t in range(time_len)]
        for length in range(time_len + 1)
    ]
    grid = [[b] * time_len for b in range(batch)]  # [B, T]
    if not batch_major:
        grid = [list(column) for column in zip(*grid, strict=True)]  # [T, B]
    lead = (batch, time_len) if batch_major else (time_len, batch)

    def constant(name: str, kind: str, rows: list[list[int]]) -> str:
        values = ", ".join(str(v) for row in rows for v in row)
        shape = f"{len(rows)}, {len(rows[0])}"
        return f"{name} = Constant <value = {kind}[{shape}] {{{values}}}> ()\n"

    statements = (
        constant("table", itype, table)
        + "rowsrc = Gather <axis = 0> (table, lens)\n"
        + ("src = Identity (rowsrc)\n" if batch_major else "src = Transpose (rowsrc)\n")
        + constant("bgrid", itype, grid)
        + f"lead = Constant <value = int64[2] {{{lead[0]}, {lead[1]}}}> ()\n"
        + f"b1 = Constant <value = int64[1] {{{batch}}}> ()"
    )
    if itype != "int64":
        statements += f"\nbi = Constant <value = {itype}[1] {{{batch}}}> ()"
    return statements


def batch_of(itype: str) -> str:
    """The name :func:`source` gives B in ``itype``."""
    return "b1" if itype == "int64" else "bi"


T1 = "t1shape = Shape <start = 0, end = 1> (x)\nt1 = Cast <to = 7> (t1shape)"


def t1(dynamic: bool) -> str:
    """``t1``, T as int64[1] beside the lengths: ``T1`` with symbolic dims, else a constant.

    The forms fold a static T to a constant, so that the ops that meet the lengths are
    probed with one: from Shape, a converter has ignored Shape's start and end, and a
    build for fixed sizes folds a static model's shape arithmetic away, then refuses what
    is left.
    """
    return T1 if dynamic else "t1 = Constant <value = int64[1] {5}> ()"


# The row form's view of [T, B, 3] data: its static trailing dim kept, the rows a -1.
ROWS = "rowdims = Constant <value = int64[2] {-1, 3}> ()\nrows = Reshape (x, rowdims)"

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
"""Constants every probe model declares."""


# What differs between two runs of the same failure: a temporary folder (a compiler
# may compile in one), a local server's port. A profile written again keeps its lines.
