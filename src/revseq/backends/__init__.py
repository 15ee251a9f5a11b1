"""Backend adapters: run an ONNX model on a real runtime, to prove a rewrite works there.

revseq's output is for backends that lack ReverseSequence, and backends compute wrong
values without raising. An adapter does three things for one backend: convert or load an
``onnx.ModelProto``, run it on numpy inputs, and report the backend's version. Probing,
checking and the backend matrix are written once over adapters.

Each adapter is a module of this package, imported only when asked for, and each backend
is an optional extra (``pip install "revseq[tvm]"``); ``[backends]`` installs the light ones.
"""

from __future__ import annotations

__all__ = [
    "ADAPTERS",
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "Runner",
    "UNTIMED",
    "get",
    "input_names",
    "installed",
    "unavailable",
]

from revseq.backends._adapter import (
    ADAPTERS,
    UNTIMED,
    Backend,
    BackendError,
    BackendUnavailableError,
    Runner,
    get,
    input_names,
    installed,
    unavailable,
)
