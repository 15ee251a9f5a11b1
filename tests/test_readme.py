"""What the README and docs promise: their code runs, links resolve, commands exist."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shlex

import helpers
import pytest

ROOT = helpers.ROOT
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
PAGES = [README, *DOCS]


def _python_blocks() -> list[tuple[pathlib.Path, int, str]]:
    return [
        (page, i, code)
        for page in PAGES
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
    ]


@pytest.mark.parametrize(
    ("page", "index", "code"),
    _python_blocks(),
    ids=[f"{p.relative_to(ROOT)}-{i}" for p, i, _ in _python_blocks()],
)
def test_python_examples_run(page, index, code, tmp_path, monkeypatch):
    if "import torch" in code:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{page.name} example {index}", "exec"), {"__name__": "readme"})


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    text = README.read_text()
    quick_start = r"## Quick start\n\n(?:[^\n]+\n\n)?```bash\n(.*?)```"  # a line may lead
    block = re.search(quick_start, text, flags=re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == [
        "pip install . && revseq demo",
        'pip install ".[test,backends,slim]" && pytest -q -n auto --maxprocesses 4',
    ]
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def test_the_readme_is_a_manual_of_at_most_15_kb():
    assert len(README.read_bytes()) <= 15_000


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_speak_of_the_tool_not_of_its_development(page):
    text = page.read_text()
    for pattern in (
        r"\b[Ss]tops? \d",
        r"\b[Ii]ssues? \d",
        r"\bcommit\b",
        r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b",  # a commit hash
        r"/tmp\b",
        r"\bby hand\b",
        r"\bthis machine\b",
        r"\bscratch\b",
    ):
        found = re.search(pattern, text)
        assert found is None, (page.name, found.group(0))


def _links(page: pathlib.Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", page.read_text())


def _anchors(page: pathlib.Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    for link in _links(page):
        if re.match(r"[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), (page.name, link)
        if anchor:
            assert anchor in _anchors(target), (page.name, link)


def test_the_readme_links_every_page_of_docs():
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in _links(README)}
    written = {p.resolve() for p in DOCS if p.parent.name == "docs"}
    assert written - linked == set()


def _stamped_pages() -> list[tuple[pathlib.Path, str]]:
    found = []
    for page in DOCS:
        stamp = re.search(r"^Written by `([^`]+)`", page.read_text(), flags=re.M)
        if stamp:
            found.append((page, stamp.group(1)))
    return found


@pytest.mark.parametrize(
    ("page", "command"),
    _stamped_pages(),
    ids=[str(p.relative_to(ROOT)) for p, _ in _stamped_pages()],
)
def test_measured_pages_name_a_command_that_exists(page, command):
    words = shlex.split(command)
    if words[:2] == ["python", "-m"]:
        module = words[2]
        assert importlib.util.find_spec(module) is not None, (page.name, module)
    else:  # a script of the repository's own
        assert words[0] == "python" and (ROOT / words[1]).is_file(), command
    assert f"--write {page.relative_to(ROOT)}" in command or "--write" in command


def test_every_measured_page_is_stamped():
    stamped = {page for page, _ in _stamped_pages()}
    for page in DOCS:
        numbers = page.parent.name == "speed" or page.name in {
            "benchmark.md",
            "gpu.md",
            "matrix.md",
            "choices.md",
            "torch.md",
            "mutants.md",
        }
        assert not numbers or page in stamped, page.name


def test_every_install_hint_names_the_project_as_published_or_the_clone():
    import tomllib

    from revseq.backends import unavailable
    from revseq.errors import DISTRIBUTION

    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert name == DISTRIBUTION != "revseq"  # revseq on the index is another project
    sources = [*PAGES]
    for folder in ("src", "ops", "passes", "tests", "bench", ".ci"):
        sources.extend(p for p in (ROOT / folder).rglob("*") if p.suffix in {".py", ""})
    hints = []
    for path in sources:
        if not path.is_file() or path == pathlib.Path(__file__):
            continue
        for found in re.finditer(r"""pip install ["']?([\w.\-]*)\[""", path.read_text()):
            hints.append((path.name, found.group(1)))
    assert hints, "no install hint found"
    for where, project in hints:
        assert project in {name, "."}, (where, project)
    # The extras name themselves by the published name too.
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for extra, requires in extras["optional-dependencies"].items():
        for requirement in requires:
            assert not requirement.startswith("revseq["), (extra, requirement)
    message = unavailable("openvino") or ""
    if message:  # not installed here: the hint is the clone's and the index's
        assert f'pip install "{name}[openvino]"' in message
        assert 'pip install ".[openvino]"' in message
