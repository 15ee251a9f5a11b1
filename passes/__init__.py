"""Passes that inline ReverseSequence into standard ops and fuse it back."""

from __future__ import annotations

__all__ = ["InlineReverseSequencePass", "STRATEGIES"]

from revseq.passes._strategy import STRATEGIES
from revseq.passes.inline import InlineReverseSequencePass
