"""The error a check raises when it cannot be run (not: when it found a difference)."""

from __future__ import annotations

__all__ = ["CheckError"]

from revseq.errors import RevseqError


class CheckError(RevseqError):
    """An equivalence check could not be run (not: it found a difference)."""
