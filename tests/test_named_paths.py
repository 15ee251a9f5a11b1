"""Every file and module the prose names exists: docstrings, comments, README, docs.

Files move and modules split; the sentences that point at them are not moved with
them. A path of this repository (``ops/forms/_rows.py``, ``docs/checking.md``), a bare
file name in backticks (``_check.py``), a Markdown link to a local page and a dotted
``revseq`` module or attribute (``revseq.passes.restore.rules``) must each resolve
(``revseq.domain`` is the metadata key a finite target's output carries).
"""

from __future__ import annotations

import ast
import importlib
import io
import pathlib
import re
import tokenize

import helpers
import pytest

from revseq.ops.vocabulary import DOMAIN_KEY

ROOT = helpers.ROOT
SOURCES = sorted(
    p for folder in ("src", "ops", "passes", "bench") for p in (ROOT / folder).rglob("*.py")
)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FOLDERS = r"(?:src/revseq|ops|passes|tests|docs|models|bench|\.ci)"
_PATH = re.compile(rf"(?<![\w/.-]){_FOLDERS}/[\w./-]*\w")
_BARE_FILE = re.compile(r"`([\w-]+\.(?:py|md|json|mjs|toml))`")
_MODULE = re.compile(r"(?<![\w.])revseq(?:\.\w+)+")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
_PLACEHOLDER = re.compile(r"NAME|ROOM|\*")

_FILES = {p.name for p in ROOT.rglob("*") if ".venv" not in p.parts and ".git" not in p.parts}


def _prose(path: pathlib.Path) -> str:
    """A source file's docstrings and comments; a page's whole text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return text
    tree = ast.parse(text)
    said = [
        ast.get_docstring(node, clean=False) or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    said += [s.value.value for s in ast.walk(tree) if _is_attribute_docstring(s)]
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    said += [t.string for t in tokens if t.type == tokenize.COMMENT]
    return "\n".join(said)


def _is_attribute_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or an attribute reached from one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def _missing(path: pathlib.Path) -> list[str]:
    text = _prose(path)
    missing = []
    for found in _PATH.finditer(text):
        named = found.group(0).rstrip(".")
        if not _PLACEHOLDER.search(named) and not (ROOT / named).exists():
            missing.append(named)
    for found in _BARE_FILE.finditer(text):
        if found.group(1) not in _FILES and not _PLACEHOLDER.search(found.group(1)):
            missing.append(found.group(1))
    for found in _MODULE.finditer(text):
        if found.group(0) != DOMAIN_KEY and not _resolves(found.group(0)):
            missing.append(found.group(0))
    if path.suffix == ".md":
        for found in _LINK.finditer(text):
            target = found.group(1)
            if "://" not in target and not (path.parent / target).exists():
                missing.append(target)
    return list(dict.fromkeys(missing))


@pytest.mark.parametrize("path", SOURCES + PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_and_module_named_exists(path):
    assert _missing(path) == []
