"""What a form knows about one ReverseSequence node, and what it emits through."""

from __future__ import annotations

__all__ = ["MAX_FOLDED_ELEMENTS", "OpBuilder", "Signature", "source_index_numpy"]

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import onnx_ir as ir

from revseq.ops.targets.profile import DEFAULT_TUNING, Tuning
from revseq.ops.vocabulary import data_variant

MAX_FOLDED_ELEMENTS = 1 << 16
"""The most elements a constant revseq writes into a model may have (512 KiB of int64):
larger values are computed at run time, so a static shape never bloats the file. The
forms' constants and the builder's folded results alike."""


class OpBuilder(Protocol):
    """What a form needs from a builder: ``op.<OpType>(*inputs, **attributes)``.

    ``op.lacking(reason)`` is how a form says it cannot be written for its target: the
    builder gathers the reasons, and the value returned stands for what the form could
    not compute, so that it emits on and shows the rest of what it does.
    """

    def lacking(self, reason: str) -> ir.Value:
        """Note why the form cannot be written; a value for what it could not make."""
        ...

    def __getattr__(self, op_type: str) -> Callable[..., ir.Value]: ...


@dataclasses.dataclass(frozen=True)
class Signature:
    """What is known about one ReverseSequence node when it is rewritten.

    Attributes:
        batch_axis: Batch axis, normalised to be non-negative when the rank is known.
        time_axis: Time axis, normalised likewise.
        rank: Rank of the data input, or None when unknown.
        dims: Static size of each data dimension (None where symbolic or unknown);
            None when the rank is unknown.
        dtype: Element type of the data, if known.
        lens_dtype: Element type of ``sequence_lens`` (INT64 or INT32), None if unknown.
        lens: The lengths when they are a constant (a tuple, so signatures hash), else None.
        opset: Version of the default ONNX domain the emitted nodes must belong to.
        allowed: Op types the target accepts, or None for any standard op. A gather's
            variant ``<gather>:data`` says it moves this node's element type there.
        tuning: The thresholds the forms choose a layout and an index type by.
        lens_own_dim: Whether the lengths are declared with a dim not provably the
            data's batch dim (exporters give them a symbol of their own): the forms then
            build no value that a backend must prove shaped alike from both.
    """

    batch_axis: int
    time_axis: int
    rank: int | None
    dims: tuple[int | None, ...] | None
    dtype: ir.DataType | None
    lens_dtype: ir.DataType | None
    lens: tuple[int, ...] | None
    opset: int
    allowed: frozenset[str] | None = None
    tuning: Tuning = DEFAULT_TUNING
    lens_own_dim: bool = False

    @property
    def lead_rank(self) -> int:
        """Number of leading axes that hold both the batch and the time axis."""
        return max(self.batch_axis, self.time_axis) + 1

    def dim(self, axis: int) -> int | None:
        """The static size of ``axis``, or None."""
        if self.dims is None:
            return None
        return self.dims[axis]

    def lead_dims(self) -> tuple[int, ...] | None:
        """Static sizes of all leading axes, or None if any is not static."""
        return None if self.dims is None else _all_static(self.dims[: self.lead_rank])

    def static_dims(self) -> tuple[int, ...] | None:
        """Static sizes of every axis, or None if any is not static."""
        return None if self.dims is None else _all_static(self.dims)

    def row_size(self) -> int | None:
        """Elements per row of the axes after the leading ones, when static."""
        if self.dims is None or any(d is None for d in self.dims[self.lead_rank :]):
            return None
        return int(np.prod([d for d in self.dims[self.lead_rank :] if d is not None]))

    def index_covers_data(self) -> bool:
        """Whether the [T, B] source index already has the data's shape (rows of 1)."""
        return self.lead_rank == 2 and self.row_size() == 1

    def target_has(self, *op_types: str) -> bool:
        """Whether the target accepts every one of ``op_types``."""
        return self.allowed is None or all(t in self.allowed for t in op_types)

    def target_lists(self, variant: str) -> bool:
        """Whether the target's profile lists ``variant``, an option not a need.

        For the lean index (``LEAN_VARIANTS``), which only a backend's own timings choose:
        never for a target without a list (``any``).
        """
        return self.allowed is not None and variant in self.allowed

    def gather_moves_data(self, gather: str) -> bool:
        """Whether the target has ``gather`` and it moves this node's data exactly.

        ``gather`` may be a variant (``GatherElements:flat``): its op type must be allowed.
        """
        return self.target_has(gather.partition(":")[0], data_variant(gather))


def _all_static(dims: Sequence[int | None]) -> tuple[int, ...] | None:
    if any(d is None for d in dims):
        return None
    return tuple(d for d in dims if d is not None)


def source_index_numpy(lens: np.ndarray, time_len: int) -> np.ndarray:
    """The source index as a [T, B] int64 array: row t, column i reads time step src."""
    clamped = np.clip(lens.astype(np.int64), 0, time_len)
    steps = np.arange(time_len, dtype=np.int64)[:, None]
    return np.where(steps < clamped[None, :], clamped[None, :] - 1 - steps, steps)
