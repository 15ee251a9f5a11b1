"""Backend adapters: run an ONNX model on a real runtime, to prove a rewrite works there.

revseq's output is for backends that lack ReverseSequence, and backends compute wrong
values without raising. An adapter does three things for one backend: convert or load an
``onnx.ModelProto``, run it on numpy inputs, and report the backend's version. Checking
(``revseq.equivalence``), probing (``revseq.probe``) and timing (``revseq.measure``)
are written once over adapters; a backend that may crash runs in a worker process
(:func:`isolated`).

Each runtime is one room, a package of this one: its adapter (the room's
``__init__.py`` declares an :class:`Adapter`, the protocol: how to prepare a model, and
what revseq may assume of the backend), its probed profile (``NAME.json``, where its
declared quirks are stated: :func:`quirks_of`) and, where it runs in an environment of
its own, the ``runner.py`` served there; one row of the registry (``ADAPTERS``)
names it, imported only when asked for; each backend is an optional extra
(``pip install "onnx-revseq[NAME]"``), ``[backends]`` installs the light ones.
"""

from __future__ import annotations

__all__ = [
    "ADAPTERS",
    "SETUPS",
    "CPU",
    "Placement",
    "Adapter",
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "IsolatedBackend",
    "MeasuredOutputs",
    "Runner",
    "adapter",
    "get",
    "input_names",
    "installed",
    "isolated",
    "node_key",
    "quirks_of",
    "set_up",
    "unavailable",
    "write_model",
]

from revseq.backends._adapter import (
    ADAPTERS,
    CPU,
    SETUPS,
    Adapter,
    Backend,
    BackendError,
    BackendUnavailableError,
    MeasuredOutputs,
    Placement,
    Runner,
    adapter,
    get,
    input_names,
    installed,
    node_key,
    quirks_of,
    set_up,
    unavailable,
    write_model,
)
from revseq.backends._isolated import IsolatedBackend, isolated
