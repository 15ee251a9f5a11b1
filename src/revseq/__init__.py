"""revseq: rewrite ONNX models around the ReverseSequence operator.

``inline`` replaces every ReverseSequence with standard ops, for backends that lack it;
``restore`` fuses decompositions back into the op; ``check`` proves two models compute
the same, bit for bit, in onnxruntime and on the backend you deploy to.
"""

__all__ = [
    "STRATEGIES",
    "TARGETS",
    "BackendError",
    "CheckError",
    "InvalidNodeError",
    "ModelLoadError",
    "ModelSaveError",
    "RevseqError",
    "StrategyError",
    "UnsupportedOpsetError",
    "__version__",
    "check",
    "check_nodes",
    "inline",
    "restore",
]

import importlib.metadata as _metadata

from revseq._api import inline, restore
from revseq.backends import BackendError
from revseq.equivalence import CheckError, check, check_nodes
from revseq.errors import (
    DISTRIBUTION,
    InvalidNodeError,
    RevseqError,
    StrategyError,
    UnsupportedOpsetError,
)
from revseq.files import ModelLoadError, ModelSaveError
from revseq.ops.targets import TARGETS
from revseq.passes import STRATEGIES

try:
    __version__ = _metadata.version(DISTRIBUTION)
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
