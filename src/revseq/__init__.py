"""revseq: rewrite ONNX models around the ReverseSequence operator.

``inline`` replaces every ReverseSequence with standard ops, for backends that lack it;
``restore`` fuses decompositions back into the op; ``check`` compares two models bit for
bit in onnxruntime.
"""

from __future__ import annotations

__all__ = [
    "STRATEGIES",
    "TARGETS",
    "check",
    "check_nodes",
    "inline",
    "restore",
    "RevseqError",
    "InvalidNodeError",
    "UnsupportedOpsetError",
    "StrategyError",
    "ModelLoadError",
    "ModelSaveError",
    "CheckError",
    "__version__",
]

from importlib.metadata import PackageNotFoundError, version

from revseq._api import inline, restore
from revseq.equivalence import check, check_nodes
from revseq.ops.errors import (
    CheckError,
    InvalidNodeError,
    ModelLoadError,
    ModelSaveError,
    RevseqError,
    StrategyError,
    UnsupportedOpsetError,
)
from revseq.ops.targets import TARGETS
from revseq.passes import STRATEGIES

try:
    __version__ = version("revseq")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
