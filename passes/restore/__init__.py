"""The restore pass: decompositions of ReverseSequence fused back into the op.

``restore`` is the pass and ``rules`` the same fusions as an onnxscript rule set;
``match`` finds candidate gathers and judges them, reading what each reads through
``backward_slice``; ``proof`` evaluates a candidate against the op; ``full_reversals``
reads back the flips inline wrote; ``fusion`` writes the fused node.
"""

from __future__ import annotations

__all__ = ["RestorePassResult", "RestoreReverseSequencePass"]

from revseq.passes.restore.restore import RestorePassResult, RestoreReverseSequencePass
