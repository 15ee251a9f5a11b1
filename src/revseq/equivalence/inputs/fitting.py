"""Sizes of symbolic dims that a model runs with, and what to say when none is found.

Generated sizes start small (1 among them, which finds batch and broadcast bugs), but
real models need more: a Conv needs its kernel's length, a reflect Pad two steps, an
audio front end a frame. Where the reference fails on the generated inputs,
:func:`larger_sizes` proposes sizes to try: one dim at a time up a ladder of powers of
two (which also divide evenly where a Reshape splits a dim), then all of them together
(which also makes dims named differently but broadcast together equal). The first that
runs is taken, and the report says which size was chosen and why.
"""

from __future__ import annotations

__all__ = [
    "MAX_FIT_RUNS",
    "FittedSizes",
    "concrete_dims",
    "draw_sizes",
    "explain_failure",
    "input_shapes",
    "larger_sizes",
    "runtime_reason",
    "sizes_of_one",
]

import dataclasses
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import onnx

from revseq.equivalence.inputs.given import GivenInputs, dim_key
from revseq.files import run_time_inputs

logger = logging.getLogger(__name__)

# Sizes given to symbolic dimensions, trial after trial; 1 comes early on purpose.
_SIZES = (3, 1, 4, 2, 5)


def draw_sizes(
    infos: Sequence[onnx.ValueInfoProto],
    trial: int,
    floors: Mapping[str, int],
    pinned: Mapping[str, int],
) -> dict[str, int]:
    """A size for each symbolic dim of the inputs: pinned, else drawn for the trial."""
    symbols: dict[str, int] = {}
    for info in infos:
        for axis in range(len(info.type.tensor_type.shape.dim)):
            key = dim_key(info, axis)
            if key is None or key in symbols:
                continue
            if key in pinned:
                symbols[key] = pinned[key]
                continue
            size = _SIZES[(trial + len(symbols)) % len(_SIZES)]
            symbols[key] = max(size, floors.get(key, 0))
    return symbols


def concrete_dims(info: onnx.ValueInfoProto, symbols: Mapping[str, int]) -> tuple[int, ...]:
    """The input's shape with each symbolic dim at its size in ``symbols``."""
    return tuple(
        d.dim_value if d.HasField("dim_value") else symbols[dim_key(info, axis) or ""]
        for axis, d in enumerate(info.type.tensor_type.shape.dim)
    )


def input_shapes(
    infos: Sequence[onnx.ValueInfoProto], symbols: Mapping[str, int], given: GivenInputs
) -> dict[str, tuple[int, ...]]:
    """Each input's shape: a given value's own, else its dims with these sizes."""
    return {
        i.name: (
            tuple(np.shape(given.values[i.name]))
            if i.name in given.values
            else concrete_dims(i, symbols)
        )
        for i in infos
    }


# The largest size a dim is grown to, and the most elements all inputs may hold then.
_LADDER = tuple(2**k for k in range(1, 17))
_MAX_ELEMENTS = 1 << 22
MAX_FIT_RUNS = 96
"""The most runs of the reference spent looking for sizes it runs with, per trial."""


def larger_sizes(
    sizes: Mapping[str, int],
    free: Sequence[str],
    elements: Callable[[Mapping[str, int]], int],
) -> Iterator[dict[str, int]]:
    """Sizes to try: one dim raised to another's, then each alone up the ladder, then all.

    ``elements(sizes)`` counts the elements every input would hold; candidates above
    ``_MAX_ELEMENTS`` are skipped.
    """
    seen: set[tuple[int, ...]] = {tuple(sizes[k] for k in free)}
    # First one dim raised to another's size: dims named apart may be broadcast together.
    for key in free:
        for size in sorted({sizes[k] for k in free if sizes[k] > sizes[key]}):
            each = {**sizes, key: size}
            seen.add(tuple(each[k] for k in free))
            yield each
    for step in _LADDER:
        tries = [{**sizes, key: step} for key in free if sizes[key] < step]
        if len(free) > 1:
            tries.append({**sizes, **{key: max(sizes[key], step) for key in free}})
        for each in tries:
            key = tuple(each[k] for k in free)
            if key in seen or elements(each) > _MAX_ELEMENTS:
                continue
            seen.add(key)
            yield each


@dataclasses.dataclass
class FittedSizes:
    """The sizes the reference ran with where the drawn ones failed.

    Later trials start there, and the report says why.

    Attributes:
        floors: Sizes dims grew to (later trials draw at least these).
        ones: Dims the reference ran with only at 1 (later trials keep 1).
        lines: What was fitted, trial by trial, for the report.
    """

    floors: dict[str, int] = dataclasses.field(default_factory=dict)
    ones: set[str] = dataclasses.field(default_factory=set)
    lines: list[str] = dataclasses.field(default_factory=list)

    def record(
        self,
        trial: int,
        drawn: Mapping[str, int],
        sizes: Mapping[str, int],
        free: Sequence[str],
        reason: str,
    ) -> None:
        """The reference ran at ``sizes`` where ``drawn`` failed (``reason``)."""
        changed = [k for k in free if sizes[k] != drawn[k]]
        text = ", ".join(f"{k} {drawn[k]} -> {sizes[k]}" for k in changed)
        if all(sizes[k] == 1 for k in changed):  # it runs only there: 1 from now on
            self.lines.append(
                f"dims set to 1: {text} (trial {trial}; the reference ran at no larger "
                f"size tried: {reason})"
            )
            self.ones.update(changed)
        else:
            self.lines.append(f"dims grown: {text} (trial {trial}; before, {reason})")
            for key in changed:
                self.floors[key] = max(self.floors.get(key, 0), sizes[key])
        logger.info("trial %d: symbolic dims fitted: %s", trial, text)


def sizes_of_one(sizes: Mapping[str, int], free: Sequence[str]) -> Iterator[dict[str, int]]:
    """Sizes to try where no larger ones run: each dim alone at 1, then all of them.

    Some models run only at 1 (an exporter baked batch 1 into a Reshape or Squeeze).
    """
    above = [key for key in free if sizes[key] > 1]
    for key in above:
        yield {**sizes, key: 1}
    if len(above) > 1:
        yield {**sizes, **dict.fromkeys(above, 1)}


_ORT_NODE = re.compile(r"running (\w+) node\. Name:'([^']*)'")
_ASSERTION = re.compile(r"^/\S+:\d+ .*? was false\. ")
_ORT_MESSAGE = re.compile(r"running (\w+) node\. Name:'([^']*)' Status Message: (.*)")


def runtime_reason(text: str) -> str:
    """A runtime's failure, short: onnxruntime's as ``Op 'name': message``."""
    found = _ORT_MESSAGE.search(text)
    if found is None:
        return text
    op_type, name, message = found.groups()
    # A failed assertion leads with its source file, function and condition.
    message = _ASSERTION.sub("", message)
    return f"{op_type} {name!r}: {message}" if name else f"{op_type}: {message}"


def _failing_node(model: onnx.ModelProto, text: str) -> onnx.NodeProto | None:
    """The main-graph node an onnxruntime error names, if it names one."""
    found = _ORT_NODE.search(text)
    if found is None:
        return None
    op_type, name = found.groups()
    for node in model.graph.node:
        if node.op_type == op_type and node.name == name:
            return node
    return None


def _feeding_inputs(model: onnx.ModelProto, node: onnx.NodeProto) -> list[str]:
    """The graph inputs ``node`` computes from (initializers left out), in graph order."""
    producers = {o: n for n in model.graph.node for o in n.output if o}
    inputs = [i.name for i in run_time_inputs(model)]
    seen: set[str] = set()
    stack = [v for v in node.input if v]
    while stack:
        value = stack.pop()
        if value in seen:
            continue
        seen.add(value)
        producer = producers.get(value)
        if producer is not None:
            stack.extend(v for v in producer.input if v)
    return [name for name in inputs if name in seen]


def explain_failure(
    model: onnx.ModelProto,
    text: str,
    *,
    generated: Sequence[str],
    symbols: Mapping[str, int],
) -> str:
    """Where the reference failed on generated inputs, and what the user can give.

    ``text`` is the runtime's message; ``generated`` the inputs revseq made up;
    ``symbols`` the sizes of the symbolic dims it tried last.
    """
    node = _failing_node(model, text)
    where = ""
    suspects = list(generated)
    if node is not None:
        label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
        feeding = _feeding_inputs(model, node)
        suspects = [n for n in feeding if n in generated] or suspects
        where = f" at {label}"
        if feeding:
            where += f" (computed from {', '.join(map(repr, feeding))})"
    infos = {i.name: i for i in model.graph.input}
    integers = [
        n
        for n in suspects
        if n in infos
        and onnx.helper.tensor_dtype_to_np_dtype(infos[n].type.tensor_type.elem_type).kind
        in "iu"
    ]
    hints = [f"--val-range {name}:[LO,HI]" for name in integers[:2]]
    if symbols:
        hints.append("--dims " + ",".join(f"{k}=N" for k in list(symbols)[:2]))
    hints.append(f"--input {suspects[0] if suspects else 'NAME'}=FILE.npy")
    sizes = ", ".join(f"{k}={v}" for k, v in symbols.items())
    tried = f" with {sizes}" if sizes else ""
    if node is not None:  # the node is named already: the runtime's reason alone
        text = runtime_reason(text).partition(": ")[2] or text
    return (
        f"the reference cannot run on generated inputs{where}{tried}: {text}; "
        f"say what it needs: {' or '.join(hints)}"
    )
