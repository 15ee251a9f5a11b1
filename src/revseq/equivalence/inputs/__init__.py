"""The inputs a check runs on: given by the user, or generated to exercise the reversal.

``generator`` makes each trial's inputs (:class:`InputGenerator`); ``sizes`` holds what
the user gives and learns the sizes of symbolic dims the model runs with; ``uses`` reads
from the graph what each input is for (token ids, a reversal's data, its lengths);
``values`` draws the values, the lengths among them (0, 1, T and between), and says
what each was drawn as.
"""

from __future__ import annotations

__all__ = ["Capture", "InputGenerator", "Inputs"]

from revseq.equivalence.inputs.generator import Capture, InputGenerator, Inputs
