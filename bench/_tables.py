"""The benchmark's results as text: the speed, summary and memory tables, and the page.

``python -m bench.bench`` prints these; ``--write PATH`` keeps them as a page of
their own (docs/benchmark.md), stamped with the command that measured them.
"""

from __future__ import annotations

__all__ = ["format_memory", "format_nodes", "format_speed", "format_summary", "page_body"]

import statistics
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from revseq.measure._cases import Case


def format_speed(rows: list[dict[str, object]]) -> str:
    names = list(rows[0]["result"])  # type: ignore[arg-type]
    header = (
        "| shape | dims | threads | MiB | "
        + " | ".join(f"{n} (x native)" for n in names)
        + " |"
    )
    lines = [header, "|" + "---|" * (4 + len(names))]
    for row in rows:
        case: Case = row["case"]  # type: ignore[assignment]
        result: dict[str, tuple[float, float]] = row["result"]  # type: ignore[assignment]
        cells = [f"{result[n][0] * 1e3:.3f} ms ({result[n][1]:.2f})" for n in names]
        lines.append(
            f"| {case.label} | {row['dims']} | {row['threads']} | "
            f"{case.nbytes / 2**20:.2f} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def _geomean(rows: list[dict[str, object]], name: str, over: str = "native") -> float:
    """Geomean over ``rows`` of ``name``'s paired ratio, divided by ``over``'s."""
    return statistics.geometric_mean(
        r["result"][name][1] / r["result"][over][1]  # type: ignore[index]
        for r in rows
    )


def format_summary(rows: list[dict[str, object]]) -> str:
    """Geomeans per dims and thread count, then the worst shapes and the floors."""
    names = [n for n in rows[0]["result"] if n not in ("native",)]  # type: ignore[union-attr]
    lines = [
        "| dims | threads | " + " | ".join(f"{n} geomean x native" for n in names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    kinds = list(dict.fromkeys(r["dims"] for r in rows))
    for dims in kinds:
        for n_threads in sorted({r["threads"] for r in rows}):  # type: ignore[type-var]
            selected = [r for r in rows if r["threads"] == n_threads and r["dims"] == dims]
            cells = [f"{_geomean(selected, name):.2f}" for name in names]
            lines.append(f"| {dims} | {n_threads} | " + " | ".join(cells) + " |")
    for dims in kinds:
        one = [r for r in rows if r["threads"] == 1 and r["dims"] == dims]
        lines.append("")
        for name in ("portable", "auto"):
            worst = max(one, key=lambda r: r["result"][name][1])  # type: ignore[index]
            lines.append(
                f"{name}, {dims} dims: worst shape at 1 thread "
                f"{worst['case'].label} ({worst['result'][name][1]:.2f}x native)  "  # type: ignore[union-attr,index]
            )
        lines.append(
            f"portable, {dims} dims, vs gather alone (the same gather, its index a "
            f"constant) at 1 thread: geomean {_geomean(one, 'portable', 'gather alone'):.2f}x"
        )
        big = [r for r in one if r["case"].nbytes >= 2**20]  # type: ignore[union-attr]
        for name in ("portable", "auto") if big else ():
            worst = max(
                r["result"][name][1] / r["result"]["memcpy"][1]  # type: ignore[index]
                for r in big
            )
            lines.append(
                f"{name}, {dims} dims, vs memcpy on tensors >= 1 MiB at 1 thread: "
                f"geomean {_geomean(big, name, 'memcpy'):.2f}x, worst {worst:.2f}x  "
            )
    return "\n".join(lines)


def format_memory(rows: list[dict[str, object]]) -> str:
    """Extra bytes (static dims: what shape inference can count) and node counts."""
    last = [r for r in rows if "extra" in r]
    if not last:
        return "(static dims were not run: shape inference counts bytes of those only)"
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


def format_nodes(rows: list[dict[str, object]]) -> str:
    """Nodes (constants aside) of each model, per dims: what a per-node backend pays."""
    counted = [r for r in rows if "nodes" in r]
    names = list(counted[0]["nodes"])  # type: ignore[arg-type]
    lines = [
        "| shape | dims | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for row in counted:
        nodes: dict[str, int] = row["nodes"]  # type: ignore[assignment]
        cells = " | ".join(str(nodes[n]) for n in names)
        lines.append(f"| {row['case'].label} | {row['dims']} | {cells} |")  # type: ignore[union-attr]
    return "\n".join(lines)


_PAGE_INTRO = """\
Paired medians of interleaved runs in one process: each cell is the median time and, in
brackets, the median ratio to the native kernel of the same round. Lengths are given at
run time. Each shape runs with its dims declared (`static`), with the time and batch
dims symbolic (`time+batch`, as exporters write sequence models) and with every dim
symbolic (`all`). `portable` is the default output (no target); the strategy columns are
emitted for `target="onnxruntime"` (`auto` there picks the fastest onnxruntime form).
Three floors: `gather alone` is the default output for the same lengths given as a
constant, static dims (the same gather with its index folded: what the index arithmetic
adds to), `ort copy` onnxruntime running one Identity on the data (its own copy, session
overhead included), `memcpy` numpy copying the data. Identical models (`auto` is always
one of the strategy columns) are timed once and show the same figures. Ratios move by a
few hundredths between runs.
"""


def page_body(tables: str, intro: str | None = None) -> str:
    """The tables as a page's body: them, then what the columns mean (``intro``).

    Without ``intro``, docs/benchmark.md's (onnxruntime against its native kernel).
    """
    tables = tables.replace("\n## ", "\n### ").strip()
    return f"{tables}\n\n### What the columns mean\n\n{intro or _PAGE_INTRO}"
