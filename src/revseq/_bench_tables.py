"""The benchmark's results as text: the speed, summary and memory tables, and the page.

``python -m revseq.bench`` prints these; ``--write PATH`` keeps them as a page of
their own (docs/benchmark.md), stamped with the command that measured them.
"""

from __future__ import annotations

__all__ = ["format_memory", "format_speed", "format_summary", "page_body"]

import statistics
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from revseq.bench import Case


def format_speed(rows: list[dict[str, object]]) -> str:
    names = list(rows[0]["result"])  # type: ignore[arg-type]
    header = "| shape | threads | MiB | " + " | ".join(f"{n} (x native)" for n in names) + " |"
    lines = [header, "|" + "---|" * (3 + len(names))]
    for row in rows:
        case: Case = row["case"]  # type: ignore[assignment]
        result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
        cells = [f"{result[n][0] * 1e3:.3f} ms ({result[n][1]:.2f})" for n in names]
        lines.append(
            f"| {case.label} | {row['threads']} | {case.nbytes / 2**20:.2f} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def format_summary(rows: list[dict[str, object]]) -> str:
    names = [n for n in rows[0]["result"] if n not in ("native",)]  # type: ignore[union-attr]
    lines = [
        "| threads | " + " | ".join(f"{n} geomean x native" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for n_threads in sorted({row["threads"] for row in rows}):  # type: ignore[type-var]
        selected = [r for r in rows if r["threads"] == n_threads]
        cells = []
        for name in names:
            ratios = [r["result"][name][1] for r in selected]  # type: ignore[index]
            cells.append(f"{statistics.geometric_mean(ratios):.2f}")
        lines.append(f"| {n_threads} | " + " | ".join(cells) + " |")
    one = [r for r in rows if r["threads"] == 1]
    for name in ("portable", "auto"):
        worst = max(one, key=lambda r: r["result"][name][1])  # type: ignore[index]
        lines.append("")
        lines.append(
            f"{name}: worst shape at 1 thread {worst['case'].label} "  # type: ignore[union-attr]
            f"({worst['result'][name][1]:.2f}x native)"  # type: ignore[index]
        )
    lines.append("")
    ratios = [r["result"]["portable"][1] / r["result"]["gather alone"][1] for r in one]  # type: ignore[index]
    lines.append(
        "portable vs gather alone (the same gather, its index a constant) at 1 thread: "
        f"geomean {statistics.geometric_mean(ratios):.2f}x, worst {max(ratios):.2f}x"
    )
    big = [r for r in one if r["case"].nbytes >= 2**20]  # type: ignore[union-attr]
    lines.append("")
    for name in ("portable", "auto", "gather alone") if big else ():
        for baseline in ("memcpy", "ort copy"):
            ratios = [r["result"][name][1] / r["result"][baseline][1] for r in big]  # type: ignore[index]
            lines.append(
                f"{name} vs {baseline} on tensors >= 1 MiB at 1 thread: geomean "
                f"{statistics.geometric_mean(ratios):.2f}x, worst {max(ratios):.2f}x"
            )
    return "\n".join(lines)


def format_memory(rows: list[dict[str, object]]) -> str:
    last = [r for r in rows if "extra" in r]
    names = list(last[0]["extra"])  # type: ignore[arg-type]
    lines = [
        "| shape | data MiB | "
        + " | ".join(f"{n}: extra (% of data), nodes" for n in names)
        + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for row in last:
        case: Case = row["case"]  # type: ignore[assignment]
        extra: dict[str, int] = row["extra"]  # type: ignore[assignment]
        nodes: dict[str, int] = row["nodes"]  # type: ignore[assignment]
        cells = [
            f"{extra[n] / 2**20:.2f} MiB ({100 * extra[n] / case.nbytes:.1f}%), {nodes[n]}"
            for n in names
        ]
        lines.append(f"| {case.label} | {case.nbytes / 2**20:.2f} | {' | '.join(cells)} |")
    return "\n".join(lines)


_PAGE_INTRO = """\
Paired medians of interleaved runs in one process: each cell is the median time and, in
brackets, the median ratio to the native kernel of the same round. Lengths are given at
run time. `portable` is the default output (no target); the strategy columns are
emitted for `target="onnxruntime"` (`auto` there picks the fastest onnxruntime form).
Three floors: `gather alone` is the default output for the same lengths given as a
constant (the same gather with its index folded: what the index arithmetic adds to),
`ort copy` onnxruntime running one Identity on the data (its own copy, session overhead
included), `memcpy` numpy copying the data. Ratios move by a few hundredths between runs
on a shared machine.
"""


def page_body(tables: str) -> str:
    """The tables as the body of docs/benchmark.md: what the columns mean, then them."""
    return _PAGE_INTRO + "\n" + tables.replace("\n## ", "\n### ")
