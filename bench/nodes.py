"""``python -m bench.nodes``: how many nodes revseq writes for one reversal, and for two.

Every runtime pays a fixed cost per node (docs/share.md), so the nodes a reversal is
written in are most of what it costs a small model. For each target (the default
first), each case is a float32 ReverseSequence with its lengths given at run time,
ranks 2 to 4, time-major and batch-major, static dims ([9, 3] leading) and symbolic
ones ([T, B]); ``revseq.inline`` writes it, and the page counts the nodes it wrote
(Constants aside: every runtime takes them as weights). Then the same model with two
reversals by the same lengths, of two tensors of the same shape, as a bidirectional
RNN's two flips: the nodes of both over the nodes of one (what they share is written
once, ``passes/graph/index_sharing.py``).
"""

from __future__ import annotations

__all__ = [
    "CASES",
    "EXPORTED_CASES",
    "NodeCase",
    "STATIC_TIME_CASES",
    "count_nodes",
    "earlier_counts",
    "main",
    "nodes_table",
]

import argparse
import dataclasses
import io
import json
import logging
import pathlib
import platform
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence

import onnx
from onnx import TensorProto, helper

import revseq
from bench.earlier import add_before_options
from bench.pages import stamped_command, write_measured_page
from revseq.errors import RevseqError
from revseq.ops.targets import TARGETS

MOST_NODES = 12
"""The nodes one reversal by run-time lengths should take at most."""

MOST_SHARED = 1.35
"""What two reversals by the same lengths should take at most, over one."""


@dataclasses.dataclass(frozen=True)
class NodeCase:
    """One reversal's data: its rank, its layout, static or symbolic leading dims."""

    rank: int
    time_major: bool
    static: bool
    own_lengths: bool = False
    """The lengths int32 with a dim of their own, as tf2onnx declares them (else int64,
    the data's batch dim)."""
    static_time: bool = False
    """Symbolic dims but a static T (9), as Keras exports a fixed sequence length:
    ``[None, 9, 3]``."""

    @property
    def dims(self) -> list[int | str]:
        """The data's dims: two leading ones, then the rank's trailing 4 and 5."""
        lead: list[int | str] = [9, 3] if self.static else ["T", "B"]
        if self.static_time:
            lead = [9, "B"]
        if not self.time_major:
            lead.reverse()
        return [*lead, *(4, 5)[: self.rank - 2]]

    @property
    def axes(self) -> tuple[int, int]:
        """(time axis, batch axis)."""
        return (0, 1) if self.time_major else (1, 0)

    def label(self) -> str:
        """The dims as the column says them: ``[T,B,4]``, ``[3,9]``."""
        return "[" + ",".join(str(d) for d in self.dims) + "]"


CASES: tuple[NodeCase, ...] = tuple(
    NodeCase(rank, time_major, static)
    for static in (False, True)
    for rank in (2, 3, 4)
    for time_major in (True, False)
)
"""Every case the page counts: symbolic dims first."""

EXPORTED_CASES: tuple[NodeCase, ...] = tuple(
    dataclasses.replace(case, own_lengths=True) for case in CASES if not case.static
)
"""The symbolic cases again, their lengths declared as tf2onnx declares them."""

STATIC_TIME_CASES: tuple[NodeCase, ...] = tuple(
    dataclasses.replace(case, static_time=True) for case in EXPORTED_CASES
)
"""The exported cases again with a static T: a Keras model of fixed sequence length."""


def reversals_model(case: NodeCase, count: int) -> onnx.ModelProto:
    """``count`` reversals by the lengths ``lens``, each of a tensor of its own.

    As a bidirectional RNN reverses its input and its output: two tensors of the same
    dims, each here a Neg of ``x`` (not counted). Lengths declared as tf2onnx declares
    them are cast to int64 by the model, as tf2onnx writes it (counted where it stays).
    """
    time_axis, batch_axis = case.axes
    dims = case.dims
    nodes, outputs, lengths = [], [], "lens"
    if case.own_lengths:  # as tf2onnx writes it: int32 lengths cast for the op
        lengths = "lens64"
        nodes.append(helper.make_node("Cast", ["lens"], [lengths], to=TensorProto.INT64))
    for i in range(count):
        nodes.append(helper.make_node("Neg", ["x"], [f"x{i}"]))
        nodes.append(
            helper.make_node(
                "ReverseSequence", [f"x{i}", lengths], [f"y{i}"],
                time_axis=time_axis, batch_axis=batch_axis,
            )
        )  # fmt: skip
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, dims))
    lens_type, lens_dim = TensorProto.INT64, dims[batch_axis]
    if case.own_lengths:
        lens_type, lens_dim = TensorProto.INT32, "L"
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, dims),
        helper.make_tensor_value_info("lens", lens_type, [lens_dim]),
    ]
    graph = helper.make_graph(nodes, "reversals", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def count_nodes(model: onnx.ModelProto, target: str | None) -> int | str:
    """The nodes ``revseq.inline`` writes for the model's reversals, or why it writes none.

    Constants and the model's own Negs are not counted.
    """
    quiet = logging.getLogger("revseq")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # a target that retypes the lengths says so each time
    try:
        inlined = revseq.inline(model, target=target)
    except RevseqError as e:
        return f"refused: {str(e).splitlines()[0]}"
    finally:
        quiet.setLevel(level)
    return sum(1 for n in inlined.graph.node if n.op_type not in ("Constant", "Neg"))


def _targets() -> list[tuple[str, str | None]]:
    """(column label, target): the default, then each target by name."""
    return [("default", None), *((name, name) for name in TARGETS)]


Counts = Mapping[tuple[NodeCase, int, str | None], "int | str | None"]
"""Nodes by (case, reversals, target), as an earlier revseq wrote them (``--before``);
None where it had no such target."""


def nodes_table(
    targets: Sequence[tuple[str, str | None]],
    cases: Sequence[NodeCase] | None = None,
    *,
    before: Counts | None = None,
) -> tuple[str, str]:
    """Markdown tables, a row per target and a column per case: one reversal's nodes; two.

    ``cases``: :data:`CASES` unless given. With ``before``, a cell whose count moved
    says the earlier one first (``30 → 26``).
    """
    cases = CASES if cases is None else cases
    header = "| target | " + " | ".join(case.label() for case in cases) + " |"
    rule = "|---|" + "---|" * len(cases)
    one_rows, two_rows = [header, rule], [header, rule]
    for label, target in targets:
        one_cells, two_cells = [], []
        for case in cases:
            one = count_nodes(reversals_model(case, 1), target)
            two = count_nodes(reversals_model(case, 2), target)
            was = "" if before is None else _was(before[case, 1, target], one)
            if isinstance(one, str) or isinstance(two, str):
                one_cells.append(was + ("refused" if isinstance(one, str) else str(one)))
                two_cells.append("refused")
                continue
            one_cells.append(was + (f"**{one}**" if one > MOST_NODES else str(one)))
            ratio = two / one
            cell = f"{two} ({ratio:.2f})"
            was = "" if before is None else _was(before[case, 2, target], two)
            two_cells.append(was + (f"**{cell}**" if ratio > MOST_SHARED else cell))
        one_rows.append(f"| {label} | " + " | ".join(one_cells) + " |")
        two_rows.append(f"| {label} | " + " | ".join(two_cells) + " |")
    return "\n".join(one_rows), "\n".join(two_rows)


def _was(earlier: int | str | None, now: int | str) -> str:
    """The earlier count and an arrow, where it differs from ``now``.

    None: the target is newer than the earlier revseq, which has no count to show.
    """
    both_refused = isinstance(earlier, str) and isinstance(now, str)
    if earlier is None or earlier == now or both_refused:
        return ""
    return ("refused" if isinstance(earlier, str) else str(earlier)) + " → "


_COUNT_EARLIER = """\
import json, logging, sys
import onnx, revseq
logging.getLogger("revseq").setLevel(logging.ERROR)
counts = []
for path, target in json.load(sys.stdin):
    try:
        inlined = revseq.inline(onnx.load(path), target=target)
    except Exception as e:  # a refusal, whatever that version raised it as
        counts.append(None if "unknown target" in str(e) else f"refused: {e}")
        continue
    counts.append(sum(n.op_type not in ("Constant", "Neg") for n in inlined.graph.node))
print(json.dumps(counts))
"""
"""What an earlier revseq runs for ``--before``: ``count_nodes`` of each model given."""


def earlier_counts(
    python: str, targets: Sequence[tuple[str, str | None]], cases: Sequence[NodeCase]
) -> dict[tuple[NodeCase, int, str | None], int | str | None]:
    """Each case's nodes, one and two reversals, as the revseq of ``python`` writes them.

    None for a target it does not have.
    """
    keys = [(case, count, t) for _, t in targets for case in cases for count in (1, 2)]
    with tempfile.TemporaryDirectory() as folder:
        jobs = []
        for i, (case, count, target) in enumerate(keys):
            path = pathlib.Path(folder, f"{i}.onnx")
            onnx.save(reversals_model(case, count), path)
            jobs.append([str(path), target])
        done = subprocess.run(
            [python, "-c", _COUNT_EARLIER], input=json.dumps(jobs), capture_output=True,
            text=True, check=True,
        )  # fmt: skip
    return dict(zip(keys, json.loads(done.stdout), strict=True))


_INTRO = f"""\
Each case is a float32 ReverseSequence whose int64 lengths are given at run time, written
by `revseq.inline` for each target (`default`: no target given). A cell counts the nodes
written, Constants aside; **bold** marks one reversal over {MOST_NODES} nodes, or two
reversals by the same lengths over {MOST_SHARED} times one. `refused`: the target has no
form for the case (`revseq inline` says why)."""

_STATIC_TIME = """\
## One reversal, exported with a fixed sequence length: nodes

The exported cases again with T static (9) and the batch symbolic, as tf2onnx exports a
Keras model of fixed sequence length (`[None, 9, 3]`). The index of each length is then
known before the model runs: one Gather of a constant table of rows per length, where a
target clamps the lengths in one Clip."""

_EXPORTED = """\
## One reversal, lengths as exporters declare them: nodes

tf2onnx declares the lengths int32, with a dim of their own (`L`, not the data's `B`),
and casts them to int64 for the op: the symbolic cases again, written so (the Cast
counted where it stays). A decomposition that counts the batch first gathers the
lengths at the data's batch steps and reads those; one that does not reads the lengths
as declared."""


def main(argv: Sequence[str] | None = None) -> int:
    """Count each case's nodes for each target; print the tables, and write them as a page."""
    prog = "python -m bench.nodes"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--target", action="append", metavar="NAME", help="only these targets (repeatable)"
    )
    parser.add_argument("--write", metavar="PATH", help="also write the tables as a page")
    add_before_options(parser, "its counts beside")
    args = parser.parse_args(argv)
    targets = _targets()
    if args.target:
        unknown = sorted(set(args.target) - {label for label, _ in targets})
        if unknown:
            parser.exit(2, f"{prog}: error: no target named {', '.join(unknown)}\n")
        targets = [(label, t) for label, t in targets if label in args.target]
    before = None
    if args.before:
        before = earlier_counts(
            args.before, targets, (*CASES, *EXPORTED_CASES, *STATIC_TIME_CASES)
        )
    one, two = nodes_table(targets, before=before)
    exported, _ = nodes_table(targets, EXPORTED_CASES, before=before)
    static_time, _ = nodes_table(targets, STATIC_TIME_CASES, before=before)
    out = io.StringIO()
    out.write(f"## One reversal: nodes\n\n{one}\n\n")
    out.write(f"## Two reversals by the same lengths: nodes (over one)\n\n{two}\n\n")
    out.write(f"{_EXPORTED}\n\n{exported}\n\n")
    out.write(f"{_STATIC_TIME}\n\n{static_time}\n")
    sys.stdout.write(out.getvalue())
    if args.write:
        given = sys.argv[1:] if argv is None else argv
        command = stamped_command(prog, given, placeholders=["--before"])
        context = f"onnx {onnx.__version__}, Python {platform.python_version()}"
        earlier = (
            f" Where a count moved, the count {args.before_label} wrote comes first "
            "(`30 → 26`; a target it did not have, its count alone; `PYTHON` in the command "
            "below: an interpreter with it installed)."
            if args.before
            else ""
        )
        body = f"{_INTRO}{earlier}\n\n{out.getvalue()}"
        write_measured_page(args.write, "Nodes per reversal", command, context, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
