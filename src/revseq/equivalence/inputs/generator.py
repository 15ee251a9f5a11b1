"""Inputs for a check: values the model runs on, lengths that exercise the reversal.

A check proves nothing about a reversal unless some lengths are 2 or more: a reversal of
at most one step is the identity. The lengths a ``sequence_lens`` input gets therefore
span 0..T of the node it feeds, with T learned from the data the node actually receives
(a first run of the model with every length 0), whatever computes that data: a MatMul,
an RNN, a Transpose. Other inputs get values the model can run on: token ids within the
embedding they index (:mod:`~revseq.equivalence.inputs.uses`), special floats only where
they reach a reversal, symbolic dims grown where the model needs more
(:mod:`~revseq.equivalence.inputs.sizes`), and whatever the user gives
(:class:`~revseq.equivalence.inputs.sizes.GivenInputs`).
"""

from __future__ import annotations

__all__ = ["Capture", "InputGenerator", "Inputs"]

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from revseq.equivalence.inputs.sizes import (
    MAX_FIT_RUNS,
    FittedSizes,
    GivenInputs,
    concrete_dims,
    dim_key,
    draw_sizes,
    explain_failure,
    input_shapes,
    larger_sizes,
    runtime_reason,
    sizes_of_one,
)
from revseq.equivalence.inputs.uses import (
    IndexUse,
    LengthsInput,
    constant_reversals,
    declared_span,
    index_uses,
    input_elem,
    lengths_inputs,
    reversals_as_identities,
    reversed_inputs,
    steps_reversed,
    time_needs,
)
from revseq.equivalence.inputs.values import (
    FLOATS,
    drawn,
    lengths_pattern,
    random_array,
    ranged_array,
    zeros,
)
from revseq.errors import CheckError, one_line
from revseq.passes.graph.scopes import run_time_input_infos

Inputs = dict[str, np.ndarray]


Capture = Callable[[onnx.ModelProto, Inputs, Sequence[str]], dict[str, np.ndarray]]
"""Runs a model and returns the named values (intermediate ones included)."""


@dataclasses.dataclass(frozen=True)
class _Failure:
    """A run of the reference that failed on generated inputs: the runtime's words."""

    text: str


def _failure(error: CheckError) -> _Failure:
    cause = error.__cause__ if error.__cause__ is not None else error
    return _Failure(one_line(cause, 400))


class InputGenerator:
    """Input sets for trial after trial of a model (and of a model with its signature).

    Symbolic dims get sizes that vary by trial (1 among them; a time dim that constant
    lengths reverse along, at least the longest of them), grown where the reference
    cannot run with them; an input that feeds a ``sequence_lens`` gets lengths in
    [0, T] that include 0, 1 and T across trials, with T the time length its nodes see
    (read from a first run with every length 0 where a node's data is computed); an
    input used as an index gets values within the axis it indexes; everything else gets
    random values of its type, with NaN payloads, -0.0 and infinities where they reach a
    ReverseSequence unchanged. What the user gives (``given``) is taken as given.
    """

    def __init__(
        self,
        models: Sequence[onnx.ModelProto],
        *,
        seed: int = 0,
        capture: Capture | None = None,
        specials: bool = True,
        finite_because: str = "",
        given: GivenInputs | None = None,
        unit_floats: bool = False,
    ) -> None:
        self.model = models[0]
        self.seed = seed
        self.specials = specials
        self.unit_floats = unit_floats
        self.finite_because = finite_because or "asked for finite data"
        self.given = given if given is not None else GivenInputs()
        self._capture = capture
        self._owners: dict[str, onnx.ModelProto] = {}
        self.lengths: dict[str, LengthsInput] = {}
        self._floors: dict[str, int] = {}
        # Models whose constant lengths reverse along a computed time dim, their
        # ReverseSequence nodes made Identities (_grown).
        self._computed: list[tuple[onnx.ModelProto, list[tuple[str, int, int]]]] = []
        # The most steps a node with constant lengths reverses, in any of the models.
        self.constant_steps = 0
        self._indices: dict[str, list[IndexUse]] = {}
        self._reversed: set[str] = set()
        for model in reversed(models):  # the first model's view wins
            graph = ir.from_proto(model)
            for name, spec in lengths_inputs(graph).items():
                self.lengths[name] = spec
                if spec.observed:
                    self._owners[name] = model
            reversals = constant_reversals(graph)
            floors, computed = time_needs(graph, reversals)
            for key, floor in floors.items():
                self._floors[key] = max(self._floors.get(key, 0), floor)
            if computed:
                self._computed.append((reversals_as_identities(model), computed))
            for node, longest, _ in reversals:
                self.constant_steps = max(self.constant_steps, steps_reversed(node, longest))
            for name, uses in index_uses(graph).items():
                known = self._indices.setdefault(name, [])
                known.extend(u for u in uses if u not in known)
            self._reversed |= reversed_inputs(graph)
        self._infos = run_time_input_infos(self.model)
        self._pinned = self.given.pinned(self._infos)  # every name checked, up front
        self._data_dims = {
            dim_key(i, axis)
            for i in self._infos
            if i.name not in self.lengths
            for axis in range(len(i.type.tensor_type.shape.dim))
        }
        self._fitted = FittedSizes()  # what later trials start from, and why
        self._fed: list[dict[str, tuple[int, ...]]] = []  # the shapes of each trial
        self._bounds: dict[str, int] = {}  # the index bounds of the last trial

    def gives_every_input(self) -> bool:
        """Whether the user gave a value for every input (trials would repeat it)."""
        return all(i.name in self.given.values for i in self._infos)

    def trials(
        self, sets: Sequence[Mapping[str, np.ndarray]] | None, count: int
    ) -> list[Inputs]:
        """One input set per trial: the user's ``sets`` filled in, else ``count`` generated."""
        if sets is not None:
            return [self.trial(t, values=values) for t, values in enumerate(sets)]
        # Where the user gives every input, more trials would repeat the same one.
        return [self.trial(t) for t in range(1 if self.gives_every_input() else count)]

    def trial(self, trial: int, values: Mapping[str, np.ndarray] | None = None) -> Inputs:
        """The inputs of trial ``trial`` (the same for the same seed and trial).

        Args:
            trial: The trial's number.
            values: Values given for this trial (instead of ``given.values``).

        Raises:
            CheckError: The reference cannot run on any inputs tried (the message says
                where it failed and what the user can give).
        """
        given = self.given
        pinned = self._pinned
        if values is not None:
            given = dataclasses.replace(given, values=values)
            pinned = given.pinned(self._infos)
        pinned = {**pinned, **{k: 1 for k in self._fitted.ones if k not in pinned}}
        floors = {**self._floors, **self._fitted.floors}
        symbols = draw_sizes(self._infos, trial, floors, pinned)
        # Lengths take their size from the data: their own dims need no growing.
        free = [k for k in symbols if k not in pinned and k in self._data_dims]
        first = self._attempt(trial, symbols, given)
        if not isinstance(first, _Failure):
            self._fed.append({n: np.shape(v) for n, v in first.items()})
            return first
        larger = larger_sizes(symbols, free, lambda each: self._elements(each, given))
        candidates = itertools.chain(
            itertools.islice(larger, MAX_FIT_RUNS), sizes_of_one(symbols, free)
        )
        for sizes in candidates:
            feeds = self._attempt(trial, sizes, given)
            if not isinstance(feeds, _Failure):
                self._fitted.record(trial, symbols, sizes, free, runtime_reason(first.text))
                self._fed.append({n: np.shape(v) for n, v in feeds.items()})
                return feeds
        generated = [i.name for i in self._infos if i.name not in given.values]
        shown = {k: v for k, v in symbols.items() if k in self._data_dims}
        raise CheckError(
            explain_failure(self.model, first.text, generated=generated, symbols=shown)
        )

    def _elements(self, symbols: Mapping[str, int], given: GivenInputs) -> int:
        return sum(
            int(np.prod(concrete_dims(i, symbols)))
            for i in self._infos
            if i.name not in given.values
        )

    def _attempt(
        self, trial: int, symbols: dict[str, int], given: GivenInputs
    ) -> Inputs | _Failure:
        """The trial's inputs for these sizes, or how the reference failed on them."""
        try:
            feeds = self._feeds(trial, dict(symbols), given)
        except CheckError as e:
            return _failure(e)
        outputs = [o.name for o in self.model.graph.output if o.name]
        if self._capture is None or not outputs:
            return feeds
        try:
            self._capture(self.model, feeds, outputs[:1])
        except CheckError as e:
            return _failure(e)
        return feeds

    def _feeds(self, trial: int, symbols: dict[str, int], given: GivenInputs) -> Inputs:
        rng = np.random.default_rng([self.seed, trial])
        infos = self._infos
        shapes = input_shapes(infos, symbols, given)
        free = [k for k in symbols if k not in self._pinned]
        if self._computed and self._capture is not None and free:
            shapes = self._grown(infos, symbols, free, shapes, given)
        bounds = self._bounds = self._index_bounds(shapes, given)
        feeds: Inputs = {}
        for info in infos:
            name = info.name
            if name in given.values:
                feeds[name] = np.asarray(given.values[name])
                continue
            if name in self.lengths:
                continue
            elem = info.type.tensor_type.elem_type
            if name in given.value_ranges:
                low, high = given.value_ranges[name]
                feeds[name] = ranged_array(rng, elem, shapes[name], low, high)
            elif name in bounds:
                top = max(bounds[name] - 1, 0)
                feeds[name] = ranged_array(rng, elem, shapes[name], 0, top)
            elif self.unit_floats and elem in FLOATS:
                feeds[name] = ranged_array(rng, elem, shapes[name], 0.0, 1.0)
            else:
                specials = self.specials and name in self._reversed
                feeds[name] = random_array(rng, elem, shapes[name], specials=specials)
        spans = self._spans(feeds, shapes)
        for info in infos:
            name = info.name
            if name in self.lengths and name not in given.values:
                time_len, batch = spans[name]
                shape = shapes[name] if batch is None else (batch,)
                elem = info.type.tensor_type.elem_type
                if name in given.value_ranges:
                    low, high = given.value_ranges[name]
                    feeds[name] = ranged_array(rng, elem, shape, low, high)
                    continue
                values = lengths_pattern(rng, time_len, shape, trial)
                feeds[name] = values.astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        return {i.name: feeds[i.name] for i in infos}

    def _index_bounds(
        self, shapes: Mapping[str, tuple[int, ...]], given: GivenInputs
    ) -> dict[str, int]:
        """For each generated index input, the size of the smallest axis it indexes."""
        bounds: dict[str, int] = {}
        pending: list[tuple[str, IndexUse]] = []
        for name, uses in self._indices.items():
            if name in given.values or name in given.value_ranges or name in self.lengths:
                continue
            for use in uses:
                if use.size is not None:
                    size = use.size
                elif use.data in shapes and len(shapes[use.data]) > use.axis:
                    size = shapes[use.data][use.axis]
                else:
                    pending.append((name, use))
                    continue
                bounds[name] = min(bounds.get(name, size), size)
        if pending and self._capture is not None:
            blank = {
                i.name: zeros(i.type.tensor_type.elem_type, shapes[i.name])
                for i in self._infos
            }
            wanted = sorted({use.data for _, use in pending})
            values = self._capture(reversals_as_identities(self.model), blank, wanted)
            for name, use in pending:
                dims = values[use.data].shape
                if len(dims) > use.axis:
                    bounds[name] = min(bounds.get(name, dims[use.axis]), dims[use.axis])
        return bounds

    def describe(self) -> tuple[str, ...]:
        """What the trials so far fed each input, and the sizes of the symbolic dims."""
        lines = []
        for info in self._infos:
            name = info.name
            if name in self.given.values:
                how = "given"
            elif name in self.given.value_ranges:
                low, high = self.given.value_ranges[name]
                how = f"generated in [{low:g}, {high:g}] (value range given)"
            elif name in self.lengths:
                how = "generated lengths in [0, T], 0, 1 and T among them"
            elif name in self._bounds:
                how = f"generated in [0, {self._bounds[name] - 1}]: it " + "; ".join(
                    u.describe() for u in self._indices[name][:2]
                )
            elif self.unit_floats and info.type.tensor_type.elem_type in FLOATS:
                how = (
                    f"generated in [0, 1], as polygraphy draws floats (--val-range "
                    f"{name}:[LO,HI] states their real range)"
                )
            else:
                how = drawn(
                    info.type.tensor_type.elem_type,
                    reversed_=info.name in self._reversed,
                    specials=self.specials,
                    finite_because=self.finite_because,
                )
            lines.append(f"input {name}: {how}")
        sizes: dict[str, list[str]] = {}
        for info in self._infos:
            for axis in range(len(info.type.tensor_type.shape.dim)):
                key = dim_key(info, axis)
                if key is None or key in sizes or info.name in self.lengths:
                    continue
                sizes[key] = [str(fed[info.name][axis]) for fed in self._fed]
        for key, each in sizes.items():
            fixed = " (given)" if key in self._pinned else ""
            lines.append(f"dim {key}: {', '.join(each)}{fixed}")
        lines.extend(self._fitted.lines)
        return tuple(lines)

    def _grown(
        self,
        infos: Sequence[onnx.ValueInfoProto],
        symbols: dict[str, int],
        free: Sequence[str],
        shapes: dict[str, tuple[int, ...]],
        given: GivenInputs,
    ) -> dict[str, tuple[int, ...]]:
        """The trial's shapes, grown until computed time dims hold their constant lengths.

        Each owner model runs on zeros of these shapes, its ReverseSequence nodes made
        Identities (lengths longer than the time dim are no valid input, and the
        node's output is shaped as its data); where a time dim is shorter than its
        longest length, every free symbolic dim grows by the shortfall (doubled each
        round), up to ``_GROWTH_ROUNDS`` times (a dim that no input dim sizes stays as
        drawn, and the trial then fails with the backend's word).
        """
        for growth in range(_GROWTH_ROUNDS):
            short = 0
            blank = {
                i.name: zeros(i.type.tensor_type.elem_type, shapes[i.name]) for i in infos
            }
            for probe, computed in self._computed:
                values = self._capture(probe, blank, sorted({name for name, _, _ in computed}))
                for name, axis, longest in computed:
                    dims = values[name].shape
                    short = max(short, longest - dims[axis % len(dims)] if dims else 0)
            if short <= 0:
                break
            for key in free:  # twice the step each round: a dim may be T / k
                symbols[key] += short << growth
            shapes = input_shapes(infos, symbols, given)
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
            spans[name] = declared_span(spec, shapes)
        for names in observed_by_model.values():
            model = self._owners[names[0]]
            # The reversals as Identities: lengths of any size are no invalid input there.
            zero = {
                n: zeros(input_elem(model, n), shapes[n]) for n in self.lengths if n in shapes
            }
            wanted = sorted({d for n in names for d, _, _ in self.lengths[n].observed})
            assert self._capture is not None
            values = self._capture(reversals_as_identities(model), {**feeds, **zero}, wanted)
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
