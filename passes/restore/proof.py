"""The proof by evaluation: a slice run on probe inputs must equal the reversal.

The data holds distinct ids, symbolic dims take two sizes, and the lengths run over 0, 1,
the full length, a ramp and random values; a slice that equals ``reverse_sequence`` for
one (batch_axis, time_axis) pair on every probe is a ReverseSequence. The verdict is
keyed by the slice's structure (:func:`fingerprint`), so identical decompositions are
probed once.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from revseq.ops.reference import reverse_sequence
from revseq.passes.graph.evaluate import UnsupportedOp, evaluate_node
from revseq.passes.graph.shapes import ShapeTable


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A proof's outcome: the (batch, time) axes it proved, or None and why not."""

    axes: tuple[int, int] | None
    reason: str


TensorKeys = dict[int, tuple[ir.TensorProtocol, bytes]]
DECLARED = ShapeTable()
DimReads = dict[int, int]
"""Shape nodes (by id) that read another tensor's dim equal to a data axis: that axis."""


def tensor_key(tensor: ir.TensorProtocol, cache: TensorKeys) -> bytes:
    """Content key of a tensor; tensors shared between nodes are hashed once.

    The cache holds the tensor too, so its id cannot be reused while the cache lives.
    """
    entry = cache.get(id(tensor))
    if entry is None:
        array = tensor.numpy()
        digest = hashlib.sha1(f"{array.dtype}{array.shape}".encode() + array.tobytes())
        entry = cache[id(tensor)] = (tensor, digest.digest())
    return entry[1]


def fingerprint(
    nodes: Sequence[ir.Node],
    data: ir.Value,
    lengths: ir.Value | None,
    output: ir.Value,
    tensor_keys: TensorKeys,
    *,
    dims: list[int | str] | None,
) -> str:
    """A key that is equal for structurally identical slices on same-shaped data.

    ``lengths`` None: a slice that reads no lengths (a constant index).
    """
    ids: dict[int, bytes] = {id(data): b"X"}
    if lengths is not None:
        ids[id(lengths)] = b"L"
    dtype = None if lengths is None else lengths.dtype
    digest = hashlib.sha1(repr((tuple(dims or ()), dtype)).encode())
    for i, node in enumerate(nodes):
        digest.update(node.op_type.encode())
        for value in node.inputs:
            if value is None:
                digest.update(b"-")
            elif id(value) in ids:
                digest.update(ids[id(value)])
            elif value.const_value is not None:
                digest.update(tensor_key(value.const_value, tensor_keys))
            else:
                digest.update(b"?")
        for name, attr in sorted(node.attributes.items()):
            digest.update(name.encode())
            if not isinstance(attr, ir.Attr):
                digest.update(repr(attr).encode())
            elif attr.type == ir.AttributeType.TENSOR:
                digest.update(tensor_key(attr.value, tensor_keys))
            else:
                digest.update(repr(attr.value).encode())
        for j, out in enumerate(node.outputs):
            ids[id(out)] = f"n{i}.{j}".encode()
        digest.update(b"|")
    digest.update(ids.get(id(output), b""))
    return digest.hexdigest()


def dims_of(value: ir.Value, shapes: ShapeTable) -> list[int | str] | None:
    """The data's dims, symbols renamed in order of appearance (``s0``, ``s1``, ...).

    Only which dims are equal matters to the probes; the names would make identical
    slices on differently named dims miss the verdict cache.
    """
    dims = shapes.dims(value)
    if dims is None:
        return None
    names: dict[str, str] = {}
    canonical: list[int | str] = []
    for i, dim in enumerate(dims):
        if isinstance(dim, int):
            canonical.append(dim)
        else:
            canonical.append(names.setdefault(dim or f"?{i}", f"s{len(names)}"))
    return canonical


def probe_shapes(dims: list[int | str]) -> list[tuple[int, ...]]:
    """Concrete shapes: static dims kept, each symbol a distinct size in two patterns."""
    symbols = sorted({d for d in dims if isinstance(d, str)})
    if not symbols:
        return [tuple(int(d) for d in dims)]
    shapes = []
    for sizes in ((2, 3, 4, 5, 6, 7), (5, 4, 3, 2, 6, 7)):
        chosen = {s: sizes[i % len(sizes)] + i // len(sizes) for i, s in enumerate(symbols)}
        shapes.append(tuple(d if isinstance(d, int) else chosen[d] for d in dims))
    return shapes


# Up to these sizes every length value is tried at every batch position.
EXHAUSTIVE_TIME = 64
EXHAUSTIVE_BATCH = 256


def probe_lengths(rng: np.random.Generator, batch: int, time: int) -> list[np.ndarray]:
    """Length vectors to test a candidate on, valid ones only (ONNX defines no others).

    Up to ``EXHAUSTIVE_TIME`` steps and ``EXHAUSTIVE_BATCH`` batch entries: one vector
    per length value 0 .. T (every value at every batch position) and mixed vectors
    (ramps both ways, two random); larger shapes get the mixed vectors and the
    constant vectors 0, 1 and T only.
    """
    if time <= EXHAUSTIVE_TIME and batch <= EXHAUSTIVE_BATCH:
        constant = [np.full(batch, value) for value in range(time + 1)]
    else:
        constant = [np.full(batch, time), np.zeros(batch), np.ones(batch)]
    ramp = np.arange(batch) % (time + 1)
    vectors = [
        *constant,
        ramp,
        time - ramp,
        rng.integers(0, time, batch, endpoint=True),
        rng.integers(0, time, batch, endpoint=True),
    ]
    return [v.astype(np.int64) for v in vectors]


def evaluate_slice(
    nodes: Sequence[ir.Node],
    *,
    data: ir.Value,
    x: np.ndarray,
    lengths: ir.Value | None,
    lens: np.ndarray | None,
    output: ir.Value,
    dim_reads: DimReads,
) -> np.ndarray:
    """The slice's output for data ``x`` and lengths ``lens``, node by node in numpy."""
    values: dict[int, np.ndarray] = {id(data): x}
    if lengths is not None and lens is not None:
        values[id(lengths)] = lens
    for node in nodes:
        axis = dim_reads.get(id(node))
        if axis is not None:  # a read of another tensor's dim, equal to this one
            values[id(node.outputs[0])] = np.array([x.shape[axis]], np.int64)
            continue
        args: list[np.ndarray | None] = []
        for value in node.inputs:
            if value is None:
                args.append(None)
            elif id(value) in values:
                args.append(values[id(value)])
            elif value.const_value is not None:
                args.append(value.const_value.numpy())
            else:
                raise UnsupportedOp(f"value {value.name!r} has no probe")
        values[id(node.outputs[0])] = evaluate_node(node, args)
    return values[id(output)]


def axis_pairs(rank: int) -> list[tuple[int, int]]:
    """Every (batch, time) pair of a rank, ONNX's two layouts first."""
    pairs = [(1, 0), (0, 1)]
    pairs += [p for p in itertools.permutations(range(rank), 2) if p not in pairs]
    return pairs


def surviving_axes(
    nodes: Sequence[ir.Node],
    data: ir.Value,
    lengths: ir.Value,
    output: ir.Value,
    dims: list[int | str],
    *,
    dim_reads: DimReads,
    given: np.ndarray | None = None,
) -> tuple[set[tuple[int, int]], set[tuple[int, int]], str]:
    """The axis pairs under which the slice equals ReverseSequence on every probe.

    Also those of them that reversed two or more steps on some probe. ``given``:
    lengths that are a constant the index may have folded in (``revseq.inline`` of
    constant lengths with a symbolic dim computes part of the index from their values),
    so other lengths fed in their place prove nothing. The slice is evaluated with them
    as they are, and must equal the reversal by them clamped to [0, T], as revseq's
    forms clamp (ONNX defines no others).
    """
    rng = np.random.default_rng(0)
    lens_type = (lengths.dtype or ir.DataType.INT64).numpy()
    surviving, first_failure = _fitting_batch_axes(lengths, dims)
    exercised: set[tuple[int, int]] = set()

    def evaluated(x: np.ndarray, lens: np.ndarray) -> np.ndarray:
        return evaluate_slice(
            nodes, data=data, x=x, lengths=lengths, lens=lens.astype(lens_type),
            output=output, dim_reads=dim_reads,
        )  # fmt: skip

    for shape in probe_shapes(dims):
        x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        with_given = functools.cache(functools.partial(evaluated, x, given))  # one per shape
        for pair in sorted(surviving):
            batch, time = shape[pair[0]], shape[pair[1]]
            if given is None:
                trials = probe_lengths(rng, batch, time)
                reach = time  # the trials run up to T
            elif len(given) != batch:
                surviving.discard(pair)
                continue
            else:
                trials = [np.clip(given, 0, time).astype(np.int64)]
                reach = int(trials[0].max(initial=0))
            run = evaluated if given is None else functools.partial(_ignoring, with_given)
            failure = _first_failure(run, x, trials, pair)
            if failure is not None:
                surviving.discard(pair)
                first_failure = first_failure or failure
            elif reach >= 2:
                exercised.add(pair)
    return surviving, exercised & surviving, first_failure


def _ignoring(
    computed: Callable[[], np.ndarray], _x: np.ndarray, _lens: np.ndarray
) -> np.ndarray:
    """What ``computed`` gives, whatever the lengths (the given ones are folded in)."""
    return computed()


def _fitting_batch_axes(
    lengths: ir.Value, dims: list[int | str]
) -> tuple[set[tuple[int, int]], str]:
    """Every axis pair, less those whose batch axis a static number of lengths cannot fit.

    Lengths of a static size fit only a batch axis of that size: a probe of another size
    broadcasts them and may agree (one length for a batch of one).
    """
    surviving = set(axis_pairs(len(dims)))
    first_failure = ""
    size = lengths.shape[0] if lengths.shape is not None and len(lengths.shape) == 1 else None
    if isinstance(size, int):
        for pair in list(surviving):
            if isinstance(dims[pair[0]], int) and dims[pair[0]] != size:
                surviving.discard(pair)
                first_failure = first_failure or (
                    f"its {size} lengths do not fit the batch axis {pair[0]} of size "
                    f"{dims[pair[0]]}"
                )
    return surviving, first_failure


def _first_failure(
    run: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x: np.ndarray,
    trials: Sequence[np.ndarray],
    pair: tuple[int, int],
) -> str | None:
    """Why the slice, run on ``x`` with each of ``trials``, is not the reversal by ``pair``.

    None where it equals ReverseSequence with that (batch, time) axis pair every time.
    """
    batch_axis, time_axis = pair
    for lens in trials:
        try:
            got = run(x, lens)
        except UnsupportedOp as e:
            return (
                f"cannot evaluate it on a probe of shape {list(x.shape)} with lengths "
                f"{lens.tolist()}: {e}"
            )
        expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
        if got.shape != expected.shape or not np.array_equal(got, expected):
            return (
                f"differs from ReverseSequence on a probe of shape {list(x.shape)} "
                f"with lengths {lens.tolist()}"
            )
    return None


# With the data's rank unknown, a decomposition must hold at every one of these ranks.
UNKNOWN_RANKS = (2, 3, 4, 5)


def prove(
    nodes: Sequence[ir.Node],
    data: ir.Value,
    lengths: ir.Value,
    output: ir.Value,
    dims: list[int | str] | None,
    *,
    dim_reads: DimReads,
    given: np.ndarray | None = None,
) -> Verdict:
    """The axes under which the slice is ReverseSequence(data, lengths), or why none.

    ``given``: the lengths' own constant values, proven as they are
    (``surviving_axes``); a slice they reverse by at most one step at every probe is an
    identity there, whatever constant it is read with: not fused.
    """
    if given is not None and (dims is None or given.ndim != 1):
        return Verdict(None, "constant lengths need data of known rank and 1-D lengths")
    if dims is not None:
        if len(dims) < 2:
            return Verdict(None, f"the data has rank {len(dims)}; ReverseSequence needs >= 2")
        surviving, exercised, failure = surviving_axes(
            nodes, data, lengths, output, dims, dim_reads=dim_reads, given=given
        )
        rank = len(dims)
    else:
        # Rank-generic decompositions (inside functions, or after a Reshape to a
        # computed shape) must hold for every rank the axes allow.
        surviving = set(axis_pairs(max(UNKNOWN_RANKS)))
        failure = ""
        for rank in UNKNOWN_RANKS:
            symbols = [f"d{i}" for i in range(rank)]
            here, _, reason = surviving_axes(
                nodes, data, lengths, output, symbols, dim_reads=dim_reads
            )
            failure = failure or reason
            surviving = {p for p in surviving if max(p) >= rank or p in here}
        exercised = surviving  # every symbol is probed at sizes of 2 and more
        rank = max(UNKNOWN_RANKS)
    if not surviving:
        return Verdict(None, failure or "no axes fit")
    if given is not None and not exercised:
        return Verdict(None, "by its constant lengths it moves no element: an identity")
    # A reading that reversed nothing at any probe (its time axis 1 everywhere: its valid
    # lengths are 0 and 1) is no reversal where another reversed along a longer axis
    # (data [1, 1, T] reversed along T is none along its first axis).
    surviving = exercised or surviving
    # Only degenerate shapes (a size-1 time axis, or batch axes of size 1) leave several
    # readings; prefer the ONNX layouts, in the spec's default order.
    ordered = [p for p in axis_pairs(rank) if p in surviving]
    return Verdict(ordered[0], "")


# A constant index over at most this many data elements is read back (the data held as
# int64 ids: 32 MiB); a larger one is left unfused.
MAX_READ_BACK_ELEMENTS = 1 << 22


def read_back_lengths(
    nodes: Sequence[ir.Node], data: ir.Value, output: ir.Value, shape: tuple[int, ...]
) -> tuple[tuple[int, int], np.ndarray] | str:
    """The axes and the lengths a slice that reads no lengths reverses by, or why none.

    With the lengths folded into a constant index (``revseq.inline`` of constant lengths)
    and static dims, one evaluation on distinct ids shows where every element of the
    result comes from: a proof, not a sample. A batch whose first step comes from step
    ``k > 0`` has length ``k + 1``, one left in place length 0 (1 moves nothing
    either); the reversal by those lengths must then equal the whole result. An identity
    (every length at most 1) and a flip (every sequence whole) are not fused: neither
    needs ReverseSequence (``simplify`` writes a flip as a Slice).
    """
    size = int(np.prod(shape))
    if size == 0:
        return "the data is empty"
    if size > MAX_READ_BACK_ELEMENTS:
        return f"its constant index covers {size:,} elements, too many to read back"
    x = np.arange(size, dtype=np.int64).reshape(shape)
    try:
        got = evaluate_slice(
            nodes, data=data, x=x, lengths=None, lens=None, output=output, dim_reads={}
        )
    except UnsupportedOp as e:
        return f"cannot evaluate it: {e}"
    if got.shape != x.shape:
        return "its result is not shaped as the data"
    for batch_axis, time_axis in axis_pairs(len(shape)):
        time_len = shape[time_axis]
        first = np.moveaxis(got, (batch_axis, time_axis), (0, 1))[:, 0]
        steps = np.unravel_index(first, shape)[time_axis].reshape(len(first), -1)
        lens = np.where(steps[:, 0] > 0, steps[:, 0] + 1, 0).astype(np.int64)
        expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
        if not np.array_equal(expected, got):
            continue
        if (lens <= 1).all():
            return "it moves no element: an identity, not a reversal"
        if (lens == time_len).all():
            return f"it reverses axis {time_axis} whole: a flip, not a ReverseSequence"
        return (batch_axis, time_axis), lens
    return "its constant index is not a reversal of the data's sequences"
