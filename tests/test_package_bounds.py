"""What the installed package holds: the page writers (``bench/``) stay in the checkout.

revseq's wheel is what users run: the rewriting, the check, the adapters and ``revseq
probe``. The pages under ``docs/`` are written by ``bench/``, which builds on the
package; the package never imports it, and the wheel does not carry it.
"""

from __future__ import annotations

import ast
import pathlib

import helpers
import pytest

ROOT = helpers.ROOT
PACKAGE = [
    p for folder in ("src", "ops", "passes", "models") for p in (ROOT / folder).rglob("*.py")
]


def _imported(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_the_package_never_imports_the_page_writers():
    importing = [
        str(p.relative_to(ROOT))
        for p in PACKAGE
        if any(n == "bench" or n.startswith("bench.") for n in _imported(p))
    ]
    assert importing == []


def test_the_wheel_does_not_carry_the_page_writers():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert not any(p == "bench" or p.startswith("bench.") for p in setup["packages"])
    assert "bench" not in setup["package-dir"]
    assert all(
        (ROOT / folder).resolve() != (ROOT / "bench").resolve()
        for folder in setup["package-dir"].values()
    )


def test_the_map_counts_the_installed_modules():
    """docs/architecture.md's map says how many modules the package has: it stays true."""
    import re

    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    said = re.search(r"The installed package is (\d+) modules \((\d+) besides", page)
    assert said is not None
    inits = [p for p in PACKAGE if p.name == "__init__.py"]
    assert (int(said.group(1)), int(said.group(2))) == (
        len(PACKAGE),
        len(PACKAGE) - len(inits),
    )
