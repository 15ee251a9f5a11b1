"""The thresholds the forms choose a layout and an index type by, as data.

Each was set by timing both sides of it in onnxruntime (docs/choices.md, which
``python -m bench.choices --write docs/choices.md`` writes). They travel in a
node's :class:`~revseq.ops.signature.Signature`; a profile may carry its own (the
measuring command forces each side so).
"""

from __future__ import annotations

__all__ = ["DEFAULT_TUNING", "Tuning"]

import dataclasses


@dataclasses.dataclass(frozen=True)
class Tuning:
    """Where the forms switch layout or index type.

    Attributes:
        time_inner_max_batch: Time-major nodes with rows of several elements and at most
            this many batch entries compute their index as ``[B, T]`` and transpose it
            (onnxruntime broadcasts slowly over a short innermost dim).
        transpose_data_max_batch: Time-major single-element rows with at most this many
            batch entries are gathered on the data's ``[B, T]`` transpose.
        int32_min_elements: Static indexes of at least this many elements are computed
            in int32 where every value provably fits; below it the Cast costs more than
            the narrower arithmetic saves.
    """

    time_inner_max_batch: int = 16
    transpose_data_max_batch: int = 32
    int32_min_elements: int = 1 << 12


DEFAULT_TUNING = Tuning()
"""The thresholds every target uses unless its profile carries others."""
