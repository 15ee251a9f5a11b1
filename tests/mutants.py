"""``python tests/mutants.py --write docs/mutants.md``: hand-made mutants of revseq.

Each mutant changes one thing a reader could get wrong (a comparison, an off-by-one, a
check left out) in a copy of the source tree; the copy is installed into a folder of its
own and the tests of the rewriting (``_TESTS``: inline, simplify, restore and the check,
no backend) run against it, stopping at the first failure.
A mutant the tests pass is a survivor: a gap in the tests, or a change that computes the
same (the page says which, where known). Each anchor must occur exactly once in its
file, so a mutant that no longer applies fails the run instead of passing unseen.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
_TREE = (
    "ops", "passes", "src", "models", "tests", "docs", "pyproject.toml", "README.md",
    "LICENSE",
)  # fmt: skip
_TESTS = (
    "test_inline", "test_simplify", "test_restore", "test_restore_forms", "test_exports",
    "test_function", "test_layouts", "test_shapes", "test_carriers", "test_equivalence",
    "test_fuzz", "test_models", "test_bad_inputs", "test_check_inputs", "test_planner",
    "test_fixed_shapes", "test_finite_target", "test_foreign_backends", "test_cli",
    "test_cli_usage", "test_bench",
)  # fmt: skip
_PYTEST = [
    "-x", "-q", "-m", "not backend", "-p", "no:randomly", "-p", "no:cacheprovider",
    *(f"tests/{name}.py" for name in _TESTS),
]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One change: ``old`` (occurring once in ``path``) becomes ``new``."""

    name: str
    path: str
    old: str
    new: str
    equivalent: str = ""  # why it computes the same, where it does
    aimed: str = ""  # a test outside ``_TESTS`` aimed at it, run too (path::name)


MUTANTS = (
    Mutant(
        "forms: CoreML's clamp by Max and Sub without its floor at 0",
        "ops/forms/_emit.py",
        "        floor = op.Max(lens, zero)",
        "        floor = lens",
    ),
    Mutant(
        "converter: the gather exported too",
        "src/revseq/onnx2torch_converter.py",
        "        fused = torch.compiler.is_compiling() and not torch.compiler.is_exporting()",
        "        fused = torch.compiler.is_compiling()",
        aimed="tests/test_onnx2torch_converter.py::"
        "test_rows_are_taken_whole_except_where_inductor_fuses_the_gather",
    ),
    Mutant(
        "inline: a symbolic-dims refusal gives the first form's reason",
        "passes/inline/refusal.py",
        "        reasons = _symbolic_blockers(profile) or reasons",
        "        reasons = reasons or _symbolic_blockers(profile)",
    ),
    Mutant(
        "check: the sizes CAND fixed ignored",
        "src/revseq/equivalence/_check.py",
        "    input_shapes = {**_fixed_by(cand, ref), **(input_shapes or {})}",
        "    input_shapes = dict(input_shapes or {})",
    ),
    Mutant(
        "check: CAND fed REF's input types",
        "src/revseq/equivalence/_check.py",
        "        cand_runners = {k: fed_as_declared(cand, r) for k, r in cand_runners.items()}"
        "\n",
        "\n",
    ),
    Mutant(
        "CLI: inline --check silent on the domain it checked on",
        "src/revseq/cli/_commands.py",
        '    on = f" on {report.domain}" if report.domain else ""',
        '    on = ""',
    ),
    Mutant(
        "bench: a variant with wrong values timed",
        "src/revseq/measure/_backend_bench.py",
        "        if want is not None and any(",
        "        if False and any(",
    ),
    Mutant(
        "a run in another environment timed with the pipe",
        "src/revseq/measure/_timing.py",
        "    return result.seconds if isinstance(result, MeasuredOutputs) else elapsed",
        "    return elapsed",
    ),
    Mutant(
        "one_hot: lengths not clamped",
        "ops/forms/_one_hot.py",
        "    column = unsqueeze(op, op.Clip(floats, zero, top), [1], sig)",
        "    column = unsqueeze(op, floats, [1], sig)",
    ),
    Mutant(
        "one_hot: source step L - t, not L - 1 - t",
        "ops/forms/_one_hot.py",
        "    span = op.Sub(op.Sub(column, one), const(op, 2 * steps, np.float32))",
        "    span = op.Sub(column, const(op, 2 * steps, np.float32))",
    ),
    Mutant(
        "check ignores the candidate's finite domain",
        "src/revseq/equivalence/_check.py",
        "    specials = not whole_model and domain is None",
        "    specials = not whole_model",
    ),
    Mutant(
        "finite lengths not read through their int32 Cast",
        "passes/inline/inline.py",
        "        return int32_source(lens) or lens",
        "        return lens",
    ),
    Mutant(
        "a lengths input another node reads made float32",
        "passes/inline/inline.py",
        "        return bool(uses) and all(",
        "        return bool(uses) and any(",
    ),
    Mutant(
        "reversed steps off by one",
        "ops/forms/_emit.py",
        "    next_step = op.Add(steps, one)\n    bias = next_step",
        "    next_step = op.Add(steps, one)\n    bias = steps",
    ),
    Mutant(
        "select at t <= L",
        "ops/forms/_emit.py",
        "return op.Where(op.Less(lens, next_step), forward, backward)",
        "return op.Where(op.Less(lens, steps), forward, backward)",
    ),
    Mutant(
        "lengths not clamped at T",
        "ops/forms/_emit.py",
        "        return op.Where(op.Less(top, lens), top, lens)",
        "        return lens",
    ),
    Mutant(
        "negative lengths not clamped at 0",
        "ops/forms/_emit.py",
        "        return op.Where(op.Less(lens, zero), zero, lens)",
        "        return lens",
    ),
    Mutant(
        "full reversal from T, not T-1",
        "ops/forms/__init__.py",
        "    last = op.Sub(time_len, const(op, [1]))",
        "    last = time_len",
    ),
    Mutant(
        "static index off by one",
        "ops/signature.py",
        "clamped[None, :] - 1 - steps",
        "clamped[None, :] - steps",
    ),
    Mutant(
        "lengths of 2 taken as trivial",
        "passes/inline/simplify.py",
        "all(v <= 1 for v in sig.lens)",
        "all(v <= 2 for v in sig.lens)",
    ),
    Mutant(
        "lengths of T-1 taken as a full reversal",
        "passes/inline/simplify.py",
        "all(v >= time_len for v in sig.lens)",
        "all(v >= time_len - 1 for v in sig.lens)",
    ),
    Mutant(
        "int32 lengths fused into ONNX's op",
        "passes/restore/fusion.py",
        '    if fused_domain(match) != "" or lengths.dtype != ir.DataType.INT32:',
        "    if True:",
    ),
    Mutant(
        "the Slice at rank 4 and more without its probe",
        "ops/forms/_slices.py",
        "        return frozenset({REVERSING_SLICE, REVERSING_SLICE_HIGH_RANK})",
        "        return frozenset({REVERSING_SLICE})",
    ),
    Mutant(
        "lengths of another size than the batch accepted",
        "passes/graph/reverse_sequence.py",
        "    if batch is not None and lens_size is not None and batch != lens_size:",
        "    if False:",
    ),
    Mutant(
        "int16 lengths read through a Cast as int32",
        "passes/graph/reverse_sequence.py",
        "return source if source is not None and source.dtype == ir.DataType.INT32 else None",
        "return source",
    ),
    Mutant(
        "any Cast to int64 looked through",
        "passes/graph/reverse_sequence.py",
        '        or cast.attributes.get_int("to") != ir.DataType.INT64\n',
        "",
        equivalent="the same values: ONNX's lengths are int64, so a Cast that makes "
        "them casts to int64",
    ),
    Mutant(
        "not a whole-axis Slice restored as a reversal",
        "passes/restore/full_reversals.py",
        "    if start != -1 or end != _INT64_MIN or step != -1 or axis is None:",
        "    if step != -1 or axis is None:",
    ),
    Mutant(
        "restore fuses lengths of any element type",
        "passes/restore/match.py",
        "        if lengths.dtype is not None and lengths.dtype not in LENGTH_TYPES:",
        "        if False:",
    ),
    Mutant(
        "a broadcast of two different dims taken as the first",
        "passes/graph/shapes.py",
        "    return rest.pop() if len(rest) == 1 else None",
        "    return rest.pop() if len(rest) == 1 else keys[0]",
    ),
    # The check.
    Mutant(
        "shared lengths span the longer T",
        "src/revseq/equivalence/inputs.py",
        "                    min(shape[t % len(shape)] for shape, t, _ in observed),",
        "                    max(shape[t % len(shape)] for shape, t, _ in observed),",
    ),
    Mutant(
        "outputs compared without their element type",
        "src/revseq/equivalence/compare.py",
        "    if expected.shape != got.shape or expected.dtype != got.dtype:",
        "    if expected.shape != got.shape:",
    ),
    Mutant(
        "token ids up to the embedding's size, not below it",
        "src/revseq/equivalence/inputs.py",
        "                top = max(bounds[name] - 1, 0)",
        "                top = max(bounds[name], 0)",
    ),
    Mutant(
        "an index through a Cast not followed",
        "src/revseq/equivalence/input_uses.py",
        '        return integer and node.attributes.get_int("to", 0) in _INTEGER_TYPES',
        "        return False",
    ),
    Mutant(
        "special floats in every input",
        "src/revseq/equivalence/inputs.py",
        "                specials = self.specials and name in self._reversed",
        "                specials = self.specials",
    ),
    Mutant(
        "symbolic dims never grown",
        "src/revseq/equivalence/inputs.py",
        "            if runs >= MAX_FIT_RUNS:",
        "            if runs >= 0:",
    ),
    Mutant(
        "dims named apart never made equal",
        "src/revseq/equivalence/_fitting.py",
        "        for size in sorted({sizes[k] for k in free if sizes[k] > sizes[key]}):",
        "        for size in ():",
    ),
    Mutant(
        "given values replaced by generated ones",
        "src/revseq/equivalence/inputs.py",
        "                feeds[name] = np.asarray(given.values[name])\n"
        "                continue\n"
        "            if name in self.lengths:",
        "                pass\n            if name in self.lengths:",
    ),
    Mutant(
        "given values' sizes not pinned",
        "src/revseq/equivalence/given.py",
        "                    pin(dim, size, source)",
        "                    pass",
    ),
    # The command line and the file writer.
    Mutant(
        "a one-step per-node run taken as conclusive",
        "src/revseq/cli/_commands.py",
        "        if not any(r.longest >= 2 for r in reports):",
        "        if not any(r.longest >= 1 for r in reports):",
    ),
    Mutant(
        "--dims not passed to the check",
        "src/revseq/cli/_commands.py",
        "        dims.update(each)",
        "        pass",
    ),
    Mutant(
        "no warning for a model without the op",
        "src/revseq/cli/_commands.py",
        '    if verb == "inline" and not before[0]:',
        "    if False:",
    ),
    Mutant(
        "the model file written in place",
        "src/revseq/files.py",
        "            with _temporary_next_to(path) as temporary:\n"
        "                temporary.write_bytes(proto.SerializeToString())\n"
        "                _fsync(temporary)\n"
        "                os.replace(temporary, path)",
        "            path.write_bytes(proto.SerializeToString())",
    ),
    Mutant(
        "ids not followed through arithmetic to their gather",
        "src/revseq/equivalence/input_uses.py",
        'elif arithmetic and node.domain in ("", "ai.onnx") and node.op_type in _ARITHMETIC:',
        "elif False:",
    ),
    Mutant(
        "an optimised run set aside though the reference's outputs did not move",
        "src/revseq/equivalence/whole_models.py",
        'if tolerance is None and level != "off" and moved is not None:',
        'if tolerance is None and level != "off" and plain is not None:',
    ),
    Mutant(
        "one symbol fixed at two sizes",
        "passes/graph/fixed_shapes.py",
        "if symbol is not None and symbols.setdefault(symbol, size) != size:",
        "if symbol is not None and symbols.setdefault(symbol, size) != size and False:",
    ),
    Mutant(
        "the rest of a sliced run read from one step early",
        "ops/forms/_slices.py",
        "rest = op.Slice(part, const(op, [length]), const(op, [_LAST]), axis)",
        "rest = op.Slice(part, const(op, [length - 1]), const(op, [_LAST]), axis)",
    ),
    Mutant(
        "a form's declared gathers out of step with what it emits",
        "ops/forms/_rows.py",
        '        return frozenset({"GatherND"})\n    return frozenset({"Gather"})',
        '        return frozenset({"Gather"})\n    return frozenset({"Gather"})',
    ),
)


def _apply(tree: pathlib.Path, mutant: Mutant) -> None:
    path = tree / mutant.path
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise SystemExit(f"{mutant.name}: its anchor occurs {count} times in {mutant.path}")
    path.write_text(text.replace(mutant.old, mutant.new))


def _copy(destination: pathlib.Path) -> None:
    for name in _TREE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, destination / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        elif source.exists():
            shutil.copy2(source, destination / name)


def _aimed(mutant: Mutant | None) -> list[str]:
    return [mutant.aimed] if mutant is not None and mutant.aimed else []


def run(mutant: Mutant | None, timeout: float) -> tuple[str, float]:
    """The first failing test's id ("" if the tests pass), and the seconds it took."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        tree, site = pathlib.Path(scratch, "tree"), pathlib.Path(scratch, "site")
        tree.mkdir()
        _copy(tree)
        if mutant is not None:
            _apply(tree, mutant)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps",
             "--no-build-isolation", "--target", str(site), str(tree)],
            check=True, capture_output=True,
        )  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(site)}
        tests = subprocess.run(
            [sys.executable, "-m", "pytest", *_PYTEST, *_aimed(mutant)],
            cwd=tree, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    seconds = time.monotonic() - started
    if tests.returncode == 0:
        return "", seconds
    failed = re.search(r"^(?:FAILED|ERROR) (\S+)", tests.stdout, re.MULTILINE)
    return (failed.group(1) if failed else f"exit {tests.returncode}"), seconds


def main(argv: list[str] | None = None) -> int:
    """Run every mutant (and the unmutated tree first); print or write the page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="PAGE", help="write the page (docs/mutants.md)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    args = parser.parse_args(argv)
    caught, seconds = run(None, args.timeout)
    if caught:
        print(f"the unmutated tree fails {caught}: fix that first", file=sys.stderr)
        return 1
    rows = [f"| (none) | | passes, {seconds:.0f} s |"]
    survivors = []
    for mutant in MUTANTS:
        caught, seconds = run(mutant, args.timeout)
        verdict = f"caught by `{caught}`" if caught else "**survived**"
        if not caught:
            survivors.append(mutant)
        print(f"{mutant.name}: {verdict} ({seconds:.0f} s)", flush=True)
        rows.append(f"| {mutant.name} | `{mutant.path}` | {verdict} |")
    body = (
        "Hand-made mutants of `ops/`, `passes/`, the check, the command line, the file "
        "writer and the measuring (`tests/mutants.py` lists each change): "
        "each runs the tests of the rewriting ("
        + ", ".join(f"`{t}`" for t in _TESTS)
        + "; not those marked `backend`), and the test aimed at it where that is "
        "elsewhere, on a copy of the source with that one change, stopping at the first "
        "failure.\n\n"
        "| mutant | file | result |\n|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"{len(MUTANTS) - len(survivors)} of {len(MUTANTS)} caught."
    )
    if survivors:
        body += " Survivors: " + "; ".join(
            f"{m.name} ({m.equivalent or 'a gap in the tests'})" for m in survivors
        )
    print(body)
    if args.write:
        from revseq.measure.pages import write_measured_page

        command = "python tests/mutants.py --write " + args.write
        context = f"Python {sys.version.split()[0]}"
        write_measured_page(args.write, "Mutants", command, context, body + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
