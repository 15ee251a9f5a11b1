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
        ("docs/backends.md", "python -m revseq.backends.matrix --write docs/backends.md"),
        ("docs/benchmark.md", "python -m revseq.bench"),
    ):
        stamp = (README.parent / page).read_text().split("\n\n")[1]
        assert stamp.startswith(f"Written by `{command}"), (page, stamp)
