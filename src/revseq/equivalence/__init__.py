"""Equivalence checking: is the candidate the reference, bit for bit, where it will run?

:func:`check` answers two questions on the same generated inputs: the whole models in
onnxruntime (graph optimisations off and on), and each decomposition alone on a backend
against the native op. :func:`check_nodes` checks each node of one model against
revseq's decomposition of it. A model fed as it declares its inputs
(:func:`as_declared`, :func:`declared_types`: a ``-finite`` target's float32 lengths)
is run so by the probe and the measuring too.
"""

from __future__ import annotations

__all__ = [
    "CheckError",
    "CheckReport",
    "Counterexample",
    "NodeReport",
    "WHOLE_MODEL_ATOL",
    "WHOLE_MODEL_RTOL",
    "as_declared",
    "check",
    "check_nodes",
    "declared_types",
    "generate_inputs",
]

from revseq.equivalence._check import WHOLE_MODEL_ATOL, WHOLE_MODEL_RTOL, check
from revseq.equivalence._per_node import check_nodes, generate_inputs
from revseq.equivalence._runners import as_declared, declared_types
from revseq.equivalence.reports import CheckReport, Counterexample, NodeReport
from revseq.errors import CheckError
