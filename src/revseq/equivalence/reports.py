"""What a check reports: per model, per node, the first difference."""

from __future__ import annotations

__all__ = ["CheckReport", "Counterexample", "NodeReport", "WholeComparison", "verdict_message"]

import dataclasses
from collections.abc import Sequence

from revseq.equivalence.compare import Largest
from revseq.equivalence.inputs import Inputs


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
