"""The README's examples run as written; its commands name what exists."""

from __future__ import annotations

import pathlib
import re

import pytest

README = pathlib.Path(__file__).parent.parent / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_examples_run(index, tmp_path, monkeypatch):
    code = _python_blocks()[index]
    if "import torch" in code:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md example {index}", "exec"), {"__name__": "readme"})


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    text = README.read_text()
    block = re.search(r"## Quick start\n\n```bash\n(.*?)```", text, flags=re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == [
        "pip install . && revseq demo",
        'pip install ".[test,backends,slim]" && pytest -q',
    ]
    ci = (README.parent / ".ci" / "run").read_text()
    assert commands[1] in ci


def test_readme_links_name_pages_that_exist_and_measured_pages_say_how_they_were_made():
    text = README.read_text()
    linked = set(re.findall(r"\]\((docs/[^)#]+)\)", text))
    assert {"docs/backends.md", "docs/benchmark.md", "docs/restore.md"} <= linked
    for page in linked:
        assert (README.parent / page).is_file(), page
    for page, command in (
        ("docs/backends.md", "python -m revseq.measure.matrix --write docs/backends.md"),
        ("docs/benchmark.md", "python -m revseq.measure.bench"),
    ):
        stamp = (README.parent / page).read_text().split("\n\n")[1]
        assert stamp.startswith(f"Written by `{command}"), (page, stamp)


def _page_summary(page: pathlib.Path) -> list[str]:
    """The README row a speed page implies: geomeans by dims, then the goal counts."""
    text = page.read_text()
    geomean = dict(
        (m.group(1, 2), m.group(3))
        for m in re.finditer(r"(default|own target), (\S+) dims: geomean ([\d.]+)x", text)
    )
    goal = dict(re.findall(r"(default|own target), goal .*?met in (\d+ of \d+)", text))
    return [
        *(
            " / ".join(f"{geomean[name, dims]}x" for dims in ("static", "time+batch", "all"))
            for name in ("default", "own target")
        ),
        goal["default"],
        goal["own target"],
    ]


def test_readme_backend_speed_table_matches_the_pages():
    """The table is copied from the pages by hand: it must say what they say."""
    rows = re.findall(
        r"^\| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| "
        r"\[speed/\w+\.md\]\((docs/speed/\w+\.md)\) \|$",
        README.read_text(),
        flags=re.M,
    )
    pages = sorted((README.parent / "docs" / "speed").glob("*.md"))
    assert sorted(row[-1] for row in rows) == [f"docs/speed/{p.name}" for p in pages]
    for version, *cells, page in rows:
        assert [c.strip() for c in cells] == _page_summary(README.parent / page), page
        assert f"\n\n{version.strip()}: median ms" in (README.parent / page).read_text()


def test_readme_onnxruntime_summary_matches_the_benchmark_page():
    """The README's geomeans x native are the page's 1-thread row, without `ort copy`."""
    page = (README.parent / "docs" / "benchmark.md").read_text()
    header = re.search(r"^\| dims \| threads \| (.*) \|$", page, flags=re.M).group(1)
    columns = [c.removesuffix(" geomean x native") for c in header.split(" | ")]
    text = README.read_text()
    shown = re.search(r"^\| dims \| (.*) \|$", text, flags=re.M).group(1).split(" | ")
    for dims in ("static", "time+batch", "all"):
        values = re.search(rf"^\| {re.escape(dims)} \| 1 \| (.*) \|$", page, flags=re.M)
        by_column = dict(zip(columns, values.group(1).split(" | "), strict=True))
        readme = re.search(rf"^\| {re.escape(dims)} \| ([\d. |]*) \|$", text, flags=re.M)
        assert readme.group(1).split(" | ") == [by_column[c] for c in shown], dims
