"""What a check finds and says: the first difference, the reports, the stages as they run.

Outputs are compared bit for bit (:func:`first_difference`), or within a stated
tolerance across runtimes (:func:`first_difference_beyond`, :func:`largest`); what a
check found is reported per model, per node and whole (:class:`CheckReport`), with whose
a difference across runtimes is (:class:`Whose`). A runtime may convert a model for
minutes (a build for a device, a converter) before its first run returns: a check that
printed nothing then looks hung, so each stage says when it starts, every
``HEARTBEAT`` seconds while it lasts, and how long it took when it was slow
(:func:`stage`).
"""

from __future__ import annotations

__all__ = [
    "HEARTBEAT",
    "CheckReport",
    "Counterexample",
    "Difference",
    "first_difference",
    "first_difference_beyond",
    "largest",
    "Largest",
    "NodeReport",
    "Progress",
    "stage",
    "verdict_message",
    "WholeComparison",
    "Whose",
]

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from revseq.equivalence.inputs import Inputs

# --- What a long check says while it works: the stage, and how long it has taken ---------
Progress = Callable[[str], None]
"""Called with one line (the command line prints it to stderr)."""

HEARTBEAT = 15.0
"""Seconds between two lines of a stage that is still running."""

_SLOW = 2.0  # a stage that took longer says so when it ends


@contextlib.contextmanager
def stage(progress: Progress | None, what: str, *, every: float = HEARTBEAT) -> Iterator[None]:
    """Say ``what`` starts, that it still runs every ``every`` seconds, and its time."""
    if progress is None:
        yield
        return
    started = time.perf_counter()
    progress(f"check: {what} ...")
    done = threading.Event()

    def beat() -> None:
        while not done.wait(every):
            progress(f"check: {what}: still running, {time.perf_counter() - started:.0f} s")

    heart = threading.Thread(target=beat, daemon=True)
    heart.start()
    try:
        yield
    finally:
        done.set()
        heart.join()
        took = time.perf_counter() - started
        if took >= _SLOW:
            progress(f"check: {what}: {took:.1f} s")


# --- Comparing outputs: bit for bit, or within a stated tolerance across runtimes --------
@dataclasses.dataclass(frozen=True)
class Difference:
    """Where two arrays first differ.

    Attributes:
        index: The element, or None when the dtypes or shapes differ.
        expected: The reference's value there (or its dtype and shape).
        got: The candidate's value there (or its dtype and shape).
    """

    index: tuple[int, ...] | None
    expected: object
    got: object

    @property
    def where(self) -> str:
        """``at [i, j]`` or ``in dtype/shape``."""
        return f"at {list(self.index)}" if self.index is not None else "in dtype/shape"


def _layout_difference(expected: np.ndarray, got: np.ndarray) -> Difference | None:
    if expected.shape != got.shape or expected.dtype != got.dtype:
        return Difference(
            None, f"{expected.dtype} {list(expected.shape)}", f"{got.dtype} {list(got.shape)}"
        )
    return None


@dataclasses.dataclass(frozen=True)
class Bits:
    """An element whose value prints like the other side's, shown with its bits.

    Two NaNs with other payloads, or a quieted signalling NaN, print alike as ``nan``.
    """

    value: object
    bits: str

    def __repr__(self) -> str:
        return f"{self.value!r} (bits {self.bits})"


def _first(differs: np.ndarray, expected: np.ndarray, got: np.ndarray) -> Difference | None:
    if not differs.any():
        return None
    index = tuple(int(i) for i in np.argwhere(differs)[0])
    a, b = expected.item(index), got.item(index)
    if repr(a) == repr(b) and expected.dtype != object:
        return Difference(index, _with_bits(expected, index), _with_bits(got, index))
    return Difference(index, a, b)


def _with_bits(array: np.ndarray, index: tuple[int, ...]) -> Bits:
    raw = np.ascontiguousarray(array[index]).tobytes()
    return Bits(array.item(index), "0x" + (raw[::-1] if np.little_endian else raw).hex())


def first_difference(expected: np.ndarray, got: np.ndarray) -> Difference | None:
    """None when the arrays are bit-identical (strings: equal by value)."""
    expected, got = np.asarray(expected), np.asarray(got)
    layout = _layout_difference(expected, got)
    if layout is not None:
        return layout
    if expected.dtype == object:
        differs = np.array(
            [a != b for a, b in zip(expected.reshape(-1), got.reshape(-1), strict=True)],
            dtype=bool,
        ).reshape(expected.shape)
        return _first(differs, expected, got)
    if expected.tobytes() == got.tobytes():
        return None
    width = expected.dtype.itemsize
    a = np.ascontiguousarray(expected).view(np.uint8).reshape((*expected.shape, width))
    b = np.ascontiguousarray(got).view(np.uint8).reshape((*got.shape, width))
    return _first((a != b).any(axis=-1), expected, got)


def first_difference_beyond(
    expected: np.ndarray, got: np.ndarray, *, rtol: float, atol: float
) -> Difference | None:
    """None when every element is within ``atol + rtol * |expected|`` (NaN matches NaN).

    For outputs computed by arithmetic that two runtimes may round differently; a
    non-numeric output is compared bit for bit.
    """
    expected, got = np.asarray(expected), np.asarray(got)
    layout = _layout_difference(expected, got)
    if layout is not None:
        return layout
    if expected.dtype.kind not in "fciu":
        return first_difference(expected, got)
    a = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
    b = got.astype(a.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    return _first(~close, expected, got)


@dataclasses.dataclass(frozen=True)
class Largest:
    """The largest errors of one output across runtimes, over every trial compared.

    Attributes:
        output: The output's name.
        absolute: The largest ``|expected - got|`` (inf where one side is NaN or inf
            and the other is not).
        relative: The largest ``|expected - got| / |expected|`` over the expected values
            that are finite and nonzero.
    """

    output: str
    absolute: float
    relative: float

    def merged(self, other: Largest) -> Largest:
        """The larger of each error, over both."""
        return Largest(
            self.output, max(self.absolute, other.absolute), max(self.relative, other.relative)
        )

    def __str__(self) -> str:
        return (
            f"{self.output!r}: largest absolute error {self.absolute:.3g}, "
            f"relative {self.relative:.3g}"
        )


def largest(name: str, expected: np.ndarray, got: np.ndarray) -> Largest | None:
    """The largest absolute and relative errors of ``got`` against ``expected``.

    None where they cannot be measured so (another dtype or shape, not numbers). NaN
    against NaN and an infinity against the same one count as no error.
    """
    expected, got = np.asarray(expected), np.asarray(got)
    if _layout_difference(expected, got) is not None or expected.dtype.kind not in "fciu":
        return None
    if not expected.size:
        return Largest(name, 0.0, 0.0)
    wide = np.complex128 if expected.dtype.kind == "c" else np.float64
    a, b = expected.astype(wide), got.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        error = np.where(same, 0.0, np.abs(a - b))
        error = np.where(np.isnan(error), np.inf, error)
        scale = np.abs(a)
        finite = (scale > 0) & np.isfinite(scale)  # the relative error is defined there
        relative = np.where(finite, error / np.where(finite, scale, 1.0), 0.0)
    return Largest(name, float(error.max()), float(relative.max()))


# --- The reports: of a whole model, of each node, of the check -------------------------
@dataclasses.dataclass(frozen=True)
class Counterexample:
    """The first difference found in the whole models' outputs."""

    trial: int
    inputs: Inputs
    output_name: str
    index: tuple[int, ...] | None
    reference_value: object
    candidate_value: object


@dataclasses.dataclass(frozen=True)
class WholeComparison:
    """What comparing the whole models found (``whole_models.compare_whole``).

    Attributes:
        compared: Output tensors compared.
        example: The first difference, or None.
        where: Where it was, said whole ("" where there is none).
        set_aside: Runs whose difference says nothing of the rewrite.
        largest: Each output's largest errors across runtimes (within a tolerance).
    """

    compared: int
    example: Counterexample | None
    where: str
    set_aside: tuple[str, ...]
    largest: tuple[Largest, ...] = ()


@dataclasses.dataclass(frozen=True)
class NodeReport:
    """The outcome of running one node's decomposition alone against the native op.

    Attributes:
        name: The reference node's name ("" when unnamed).
        scope: Where it sits.
        engine: What ran the decomposition ("onnxruntime", or a backend's label).
        runs: Runs compared (trials x lengths sets).
        longest: The longest reversal that happened (the largest min(length, T)).
        difference: The first difference: the element, both values, the trial and the
            lengths; None when every run was bit-identical.
        error: Why the node could not be checked alone.
        note: What the check assumed (a nested node's generated data).
    """

    name: str
    scope: str
    engine: str
    runs: int = 0
    longest: int = 0
    difference: str | None = None
    error: str | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        """Whether every run was bit-identical to the native op."""
        return self.error is None and self.difference is None

    @property
    def verdict(self) -> str:
        """OK, DIFFERENT, NOT CHECKED or INCONCLUSIVE (no reversal of 2 or more steps)."""
        if self.error is not None:
            return "NOT CHECKED"
        if self.difference is not None:
            return "DIFFERENT"
        return "OK" if self.longest >= 2 else "INCONCLUSIVE"

    def to_json(self) -> dict[str, object]:
        """The node's outcome as JSON values (``revseq check --json``)."""
        return {
            "name": self.name,
            "scope": self.scope,
            "verdict": self.verdict,
            "engine": self.engine,
            "runs": self.runs,
            "longest_reversal": self.longest,
            "difference": self.difference,
            "error": self.error,
            "note": self.note.strip() or None,
        }

    def __str__(self) -> str:
        label = f"{self.name or '(unnamed)'} in {self.scope}"
        if self.error is not None:
            return f"NOT CHECKED {label}: {self.error}"
        if self.difference is not None:
            return f"DIFFERENT {label} on {self.engine}: {self.difference}"
        verdict = "bit-identical" if self.longest >= 2 else "INCONCLUSIVE (no reversal >= 2)"
        return (
            f"OK {label} on {self.engine}: {self.runs} run(s) against the native op, "
            f"{verdict}, longest reversal {self.longest}{self.note}"
        )


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """The outcome of :func:`check`.

    Attributes:
        ok: No difference: every whole-model output and every node's decomposition
            matched (bit for bit, or within ``tolerance`` where one was given).
        trials: Input sets run.
        outputs_compared: Whole-model output tensors compared (trials x levels x outputs).
        engines: What ran each model: "onnxruntime", "onnx.reference (why)", a backend.
        optimizations: The onnxruntime optimisation levels run ("off", "on").
        counterexample: The first whole-model difference, when there is one.
        message: One line saying what happened.
        nodes: Each ReverseSequence's decomposition, run alone against the native op.
        exercised: Some reversal of two or more steps happened (else the check cannot
            tell a reversal from the identity). True for models without the op.
        tolerance: (rtol, atol) where the whole models were compared across runtimes.
        inputs: What each input was fed (given, or generated how) and the sizes of
            the symbolic dims, trial by trial.
        set_aside: Whole-model runs with optimisations on whose difference says
            nothing of the rewrite: onnxruntime's optimiser changed the reference's own
            outputs there (the candidate matched them with optimisations off).
        domain: What the candidate declares itself exact on where that is not every
            value (its ``revseq.domain``: ``finite``); the check drew its data there.
        largest: Each output's largest errors, where the whole models were compared
            across runtimes.
        runtime_differs: The whole models differ across runtimes beyond the tolerance,
            but revseq's part is exact (the candidate is the reference bit for bit in
            onnxruntime, each decomposition alone on the runtime too) and the
            difference starts at one of the model's own ops: the runtime's own.
        blame: Whose a whole-model difference across runtimes is, and where it starts
            ("" where there is none).
    """

    ok: bool
    trials: int
    outputs_compared: int
    engines: dict[str, str]
    optimizations: tuple[str, ...]
    counterexample: Counterexample | None
    message: str
    nodes: tuple[NodeReport, ...] = ()
    exercised: bool = True
    tolerance: tuple[float, float] | None = None
    inputs: tuple[str, ...] = ()
    set_aside: tuple[str, ...] = ()
    domain: str | None = None
    largest: tuple[Largest, ...] = ()
    runtime_differs: bool = False
    blame: str = ""

    @property
    def verdict(self) -> str:
        """OK, DIFFERENT, RUNTIME-DIFFERS or INCONCLUSIVE.

        RUNTIME-DIFFERS: revseq's part is exact, the runtime's own ops differ.
        INCONCLUSIVE: no difference, but no real reversal either.
        """
        if not self.ok:
            return "RUNTIME-DIFFERS" if self.runtime_differs else "DIFFERENT"
        return "OK" if self.exercised else "INCONCLUSIVE"

    def to_json(self) -> dict[str, object]:
        """The report as JSON values (``revseq check --json``)."""
        c = self.counterexample
        return {
            "verdict": self.verdict,
            "message": self.message,
            "blame": self.blame or None,
            "trials": self.trials,
            "optimizations": list(self.optimizations),
            "engines": dict(self.engines),
            "tolerance": (
                None
                if self.tolerance is None
                else {"rtol": self.tolerance[0], "atol": self.tolerance[1]}
            ),
            "outputs_compared": self.outputs_compared,
            "largest_errors": [dataclasses.asdict(each) for each in self.largest],
            "nodes": [node.to_json() for node in self.nodes],
            "first_difference": None
            if c is None
            else {
                "trial": c.trial,
                "output": c.output_name,
                "index": None if c.index is None else list(c.index),
                "reference": repr(c.reference_value),
                "candidate": repr(c.candidate_value),
                "inputs": {
                    name: {"dtype": str(v.dtype), "shape": list(v.shape)}
                    for name, v in c.inputs.items()
                },
            },
            "inputs": list(self.inputs),
            "set_aside": list(self.set_aside),
            "domain": self.domain,
        }

    def __str__(self) -> str:
        engines = ", ".join(f"{k}: {v}" for k, v in self.engines.items())
        lines = [
            f"{self.verdict}: {self.message}",
            f"  trials: {self.trials}, optimisation levels: {', '.join(self.optimizations)}, "
            f"outputs compared: {self.outputs_compared}",
            f"  engines: {engines}",
        ]
        if self.domain is not None:
            lines.append(f"  domain: {self.domain}, the candidate's own: data drawn there")
        lines.extend(f"  {line}" for line in self.inputs)
        lines.extend(f"  largest error: {each}" for each in self.largest)
        lines.extend(f"  set aside: {line}" for line in self.set_aside)
        lines.extend(f"  node {node}" for node in self.nodes)
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
class Whose:
    """Whose a whole-model difference is, said whole.

    Attributes:
        text: Where it starts and why it is whose it is.
        runtime: revseq's part is exact (bit for bit in onnxruntime, and each
            decomposition alone on the runtime), and the difference starts at one of
            the model's own ops, or in the values of a type the runtime holds narrower
            (float32 as float16), which revseq's decompositions move exactly: the
            runtime's own computation.
        alone_on: The runtime each decomposition also ran alone on, to find whose the
            difference is (its label; empty where none ran there).
    """

    text: str
    runtime: bool
    alone_on: str = ""


def verdict_message(
    whole: WholeComparison,
    nodes: Sequence[NodeReport],
    *,
    trials: int,
    levels: Sequence[str],
    tolerance: tuple[float, float] | None,
    exercised: bool,
    engine: str,
    located: str = "",
) -> str:
    """A check's one line: the first difference, or what was compared and how it held.

    ``nodes`` are those checked alone on ``engine``; ``located`` says where a
    whole-model difference across runtimes starts (``blame.first_differing_tensor``).
    """
    different = [n for n in nodes if n.difference is not None]
    if different:
        first = different[0]
        message = f"node {first.name or '(unnamed)'} in {first.scope}: {first.difference}"
        return message + (f"; whole model: {whole.where}" if whole.example is not None else "")
    if whole.example is not None:
        return whole.where + (f"; {located}" if located else "")
    if tolerance is not None:
        rtol, atol = tolerance
        return (
            f"{trials} trial(s), {whole.compared} whole-model outputs compared across "
            f"runtimes, within rtol={rtol:g}, atol={atol:g}"
        ) + ("" if exercised else f", but {_NOT_EXERCISED}")
    message = (
        f"{trials} trial(s) x {len(levels)} optimisation level(s), "
        f"{whole.compared} outputs compared"
    )
    if whole.set_aside:
        message += (
            f" ({len(whole.set_aside)} run(s) set aside: the optimiser changes the reference)"
        )
    if nodes:
        checked = f"{len(nodes)} ReverseSequence node(s) of the reference checked alone"
        message += f"; {checked} on {engine}"
    return message + (", bit-identical" if exercised else f", identical, but {_NOT_EXERCISED}")


_NOT_EXERCISED = (
    "no ReverseSequence reversed 2 or more steps: this cannot tell a reversal from the "
    "identity"
)
