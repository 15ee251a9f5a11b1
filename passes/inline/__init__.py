"""The inline pass: every ReverseSequence replaced by a decomposition into standard ops.

``inline`` is the pass; ``planner`` chooses a form per node from the target's profile
(``ranking`` orders the candidates by measured cost, ``templates`` records a form once
per signature and says which ops it uses); ``simplify`` replaces trivial nodes first.
"""

from __future__ import annotations

__all__ = [
    "STRATEGIES",
    "InlineReverseSequencePass",
    "SimplifyReverseSequencePass",
    "gather_kind",
]

from revseq.passes.inline.inline import InlineReverseSequencePass
from revseq.passes.inline.planner import STRATEGIES
from revseq.passes.inline.simplify import SimplifyReverseSequencePass
from revseq.passes.inline.templates import gather_kind
