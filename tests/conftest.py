"""Each test that runs a runtime carries that runtime's marker: ``pytest -m tract``.

A test is marked with a runtime where a parameter of it names one (``backend="tract"``),
where its name does (``test_rknn_s_own_target_...``), or where its module is named
after one (``webgpu/test_webgpu.py``).
The marker is the name ``--backend`` takes, ``-`` written ``_`` (``onnx2torch_cuda``).
"""

from __future__ import annotations

import pytest

from revseq.backends import ADAPTERS


def _marker(name: str) -> str:
    return name.replace("-", "_")


def pytest_configure(config: pytest.Config) -> None:
    for name, what in ADAPTERS.items():
        config.addinivalue_line("markers", f"{_marker(name)}: tests of revseq on {what}")


def runtimes_named(item: pytest.Item) -> set[str]:
    """The runtimes a collected test runs on, by its parameters and its module's name."""
    callspec = getattr(item, "callspec", None)
    values = callspec.params.values() if callspec is not None else ()
    named = {v for v in values if isinstance(v, str) and v in ADAPTERS}
    stem = item.path.stem.removeprefix("test_")
    if stem in ADAPTERS:
        named.add(stem)
    words = f"_{getattr(item, 'originalname', item.name)}_"
    named.update(n for n in ADAPTERS if f"_{_marker(n)}_" in words)
    return named


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for name in runtimes_named(item):
            item.add_marker(_marker(name))
