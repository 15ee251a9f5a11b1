"""revseq: rewrite ONNX models around the ReverseSequence operator.

``inline`` replaces every ReverseSequence with standard ops, for backends that lack it.
"""

from __future__ import annotations

__all__ = [
    "STRATEGIES",
    "TARGETS",
    "inline",
    "RevseqError",
    "InvalidNodeError",
    "UnsupportedOpsetError",
    "StrategyError",
    "ModelLoadError",
    "ModelSaveError",
    "CheckError",
]

from revseq._api import inline
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
