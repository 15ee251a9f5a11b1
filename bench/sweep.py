"""A broad random sweep: the default output and the backend's own target, on the backend.

``python -m bench.sweep NAME`` draws cases of a broad kind (every element type the
backend has, ranks 2-5, the ONNX layouts and general axes with int32 lengths, opsets
10-23, static dims, the batch dim symbolic as exporters leave it, time and batch
symbolic, every dim symbolic), inlines each with no
target or for the backend itself, runs the output there at every size (symbolic dims at
two) on lengths T, 0, 1 and 2, and compares it bit for bit with the numpy reference of
the data as the backend holds it. It prints the counts and a line per case that was
refused, failed, computed wrong values or rounded them as its profile says the backend
rounds such data; the exit code is 1 where any ran wrong or failed.

The matrix (``bench.matrix``) covers every type and form on one shape; this
covers the breadth of signatures, drawn at random (``--seed``) for the time a backend
takes to compile each.
"""

from __future__ import annotations

__all__ = ["Case", "draw_cases", "main", "rounded_as_float64", "run_case", "sizes"]

import argparse
import collections
import dataclasses
import random
import sys
import warnings
from collections.abc import Sequence

import numpy as np
import onnx
import onnx_ir as ir

import revseq
from revseq import backends
from revseq.equivalence.inputs.values import held, random_array
from revseq.equivalence.reports import first_difference
from revseq.ops.reference import reverse_sequence, reverse_sequence_model
from revseq.ops.targets import TARGETS
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import ELEMENT_TYPES, GATHERS
from revseq.passes import gather_kind

OPSETS = tuple(range(10, 24))
"""The opsets a case's model imports (10 is upgraded to 11 by inline)."""

KINDS = ("static", "batch", "time+batch", "all")
"""Which dims are symbolic: none, the batch dim, the time and batch dims, every dim."""

SIZES = ((5, 4), (3, 2))
"""(T, B) each model runs at: static dims at the first, symbolic ones at both (a static
T stays the first's)."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One drawn signature, and whether it is inlined for the backend's own target."""

    dtype: str
    rank: int
    batch_axis: int
    time_axis: int
    kind: str
    opset: int
    own: bool
    general: bool  # the revseq domain's op (any axes, int32 lengths)
    own_lens_dim: bool = True  # symbolic lengths declared with a dim of their own

    def __str__(self) -> str:
        target = "own target" if self.own else "default"
        return (
            f"{self.dtype} rank {self.rank} axes {self.batch_axis}/{self.time_axis} "
            f"{self.kind} opset {self.opset} {target}"
        )

    def model(self) -> onnx.ModelProto:
        """The one-node model of this signature."""
        b, t = self.batch_axis % self.rank, self.time_axis % self.rank
        dims: list[int | str] = [2 + i % 2 for i in range(self.rank)]
        dims[t], dims[b] = SIZES[0]
        if self.kind == "batch":
            dims[b] = "B"
        elif self.kind != "static":
            dims[t], dims[b] = "T", "B"
        if self.kind == "all":
            dims = [d if isinstance(d, str) else f"d{i}" for i, d in enumerate(dims)]
        return reverse_sequence_model(
            dims,
            ELEMENT_TYPES[self.dtype],
            batch_axis=self.batch_axis,
            time_axis=self.time_axis,
            domain="revseq" if self.general else "",
            lens_elem=onnx.TensorProto.INT32 if self.general else onnx.TensorProto.INT64,
            lens_dim="N" if self.own_lens_dim and self.kind != "static" else ...,
            opset=self.opset,
            ir_version=9,
            name="sweep",
        )


def types_of(name: str) -> list[str]:
    """The element types the backend's profile moves with some gather (all, unprofiled).

    float32 where it moves none (a runtime without gathers): its cases are then the
    default's and its own target's refusals.
    """
    profile = TARGETS.get(name)
    return [t for t in ELEMENT_TYPES if profile is None or profile.has(t)] or ["float32"]


def draw_cases(
    name: str,
    count: int,
    *,
    seed: int = 0,
    opsets: Sequence[int] = OPSETS,
    kinds: Sequence[str] = KINDS,
) -> list[Case]:
    """``count`` random cases for backend ``name``.

    Every general-axes node, and a fifth of those in the ONNX layouts, is the revseq
    domain's, each of its axes negative half the time; half the symbolic cases declare
    their lengths with a dim of their own, as exporters do.
    """
    rng = random.Random(seed)
    types = types_of(name)
    cases = []
    for _ in range(count):
        rank = rng.randint(2, 5)
        time_axis, batch_axis = rng.sample(range(rank), 2)
        general = {time_axis, batch_axis} != {0, 1} or rng.random() < 0.2
        if general:
            batch_axis -= rank * rng.randint(0, 1)
            time_axis -= rank * rng.randint(0, 1)
        cases.append(
            Case(
                dtype=rng.choice(types),
                rank=rank,
                batch_axis=batch_axis,
                time_axis=time_axis,
                kind=rng.choice(list(kinds)),
                opset=rng.choice(list(opsets)),
                own=name in TARGETS and rng.random() < 0.5,
                general=general,
                own_lens_dim=rng.random() < 0.5,
            )
        )
    return cases


def run_case(backend: backends.Backend, case: Case) -> tuple[str, str]:
    """("ok" | "refused" | "host-only" | "rounded" | "FAIL" | "WRONG", why) for one case.

    "rounded": the output differs from the truth only as the backend's profile says it
    rounds such data (``rounding``: an NPU's runtime moves int64 of rank 4 and more
    through float64), not as a reversal could go wrong.

    "host-only": the default, on a device whose gathers lack the one it takes for the
    type (the default is computed from host backends; the device's own target serves it).
    """
    try:
        inlined = revseq.inline(case.model(), target=backend.name if case.own else None)
    except revseq.RevseqError as e:
        return "refused", str(e)
    profile = TARGETS.get(backend.name)
    lacking = [] if case.own or profile is None else device_lacks(profile, inlined, case.dtype)
    if lacking:
        return "host-only", f"{backend.name}'s {', '.join(lacking)} moves no {case.dtype}"
    b, t = case.batch_axis % case.rank, case.time_axis % case.rank
    lens_type = np.int32 if case.general else np.int64
    rng = np.random.default_rng(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runner = backend.prepare(inlined)
            for time_len, batch in sizes(case.kind):
                dims = [2 + i % 2 for i in range(case.rank)]
                dims[t], dims[b] = time_len, batch
                x = random_array(rng, ELEMENT_TYPES[case.dtype], tuple(dims))
                lens = np.array(([time_len, 0, 1, 2] * batch)[:batch], lens_type)
                got = runner({"x": x, "lens": lens})[0]
                kept = held({"x": x}, backend.storage)["x"]  # as the backend holds it
                expected = reverse_sequence(kept, lens, batch_axis=b, time_axis=t)
                difference = first_difference(expected, got)
                if difference is None:
                    continue
                where = f"at T={time_len}, B={batch}"
                rounding = backend.rounding(case.dtype, case.rank)
                if rounding is not None and rounded_as_float64(expected, got):
                    return "rounded", f"{where}: {rounding}"
                return "WRONG", f"{where}: {difference}"
    except backends.BackendError as e:
        return "FAIL", f"{e.stage} failed: {e.detail}"
    return "ok", ""


def sizes(kind: str) -> list[tuple[int, int]]:
    """The (T, B) a case of ``kind`` runs at: one for static dims, a static T kept."""
    if kind == "static":
        return list(SIZES[:1])
    if kind == "batch":
        return [(SIZES[0][0], batch) for _, batch in SIZES]
    return list(SIZES)


def rounded_as_float64(expected: np.ndarray, got: np.ndarray) -> bool:
    """Whether integers ``got`` differ from ``expected`` only as float64 rounds them.

    Each differing value at least 2^53 in magnitude (below it float64 holds every
    integer) and within half a float64 step of it: what a backend that moves int64
    through float64 does (its profile's ``rounding``), not a wrong reversal.
    """
    if expected.dtype.kind not in "iu" or expected.shape != got.shape:
        return False
    differs = expected != got
    wanted = [int(v) for v in expected[differs]]
    came = [int(v) for v in got[differs]]
    return all(
        abs(w) >= 2**53 and abs(c - w) <= np.spacing(np.float64(abs(w))) / 2
        for w, c in zip(wanted, came, strict=True)
    )


def device_lacks(profile: Profile, model: onnx.ModelProto, dtype: str | None) -> list[str]:
    """The gathers of ``model``'s main graph that move no ``dtype`` on ``profile``'s device.

    None on a host backend: the default is combined from those, while on a device the
    default's gather for a type may move none of it, and the device's own target is
    what runs there.
    """
    if profile.device is None:
        return []
    graph = ir.from_proto(model).graph
    held = {gather_kind(n) for n in graph if n.op_type in GATHERS}
    return sorted(g for g in held if not profile.moves(g, dtype))


def main(argv: Sequence[str] | None = None) -> int:
    """The command: sweep one backend, print the counts and every case not ok."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.sweep",
        description="The default output and the backend's own target over random cases "
        "of every type it has, ranks 2-5, general axes, opsets and kinds of dims, bit "
        "for bit on the backend.",
    )
    parser.add_argument("backend", choices=sorted(backends.ADAPTERS), metavar="BACKEND")
    parser.add_argument("--cases", type=int, default=100, help="how many (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="which (default 0)")
    parser.add_argument(
        "--opsets",
        default=f"{OPSETS[0]}-{OPSETS[-1]}",
        help="the opsets to draw from, as FIRST-LAST (default %(default)s)",
    )
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help="the kinds of dims to draw from, comma-separated (default %(default)s)",
    )
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    if not kinds or any(k not in KINDS for k in kinds):
        parser.error(f"--kinds takes some of {', '.join(KINDS)}, got {args.kinds!r}")
    first, _, last = args.opsets.partition("-")
    try:
        opsets = range(int(first), int(last or first) + 1)
    except ValueError:
        parser.error(f"--opsets takes FIRST-LAST, got {args.opsets!r}")
    reason = backends.unavailable(args.backend)
    if reason is not None:
        print(f"sweep: {reason}", file=sys.stderr)
        return 2
    backend = backends.get(args.backend)
    counts: collections.Counter[str] = collections.Counter()
    for case in draw_cases(
        args.backend, args.cases, seed=args.seed, opsets=opsets, kinds=kinds
    ):
        verdict, why = run_case(backend, case)
        counts[verdict] += 1
        if verdict != "ok":
            print(f"{verdict}: {case}: {why.splitlines()[0] if why else ''}")
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    print(f"{backend.label}: {args.cases} cases (seed {args.seed}): {summary}")
    return 1 if counts["WRONG"] or counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
