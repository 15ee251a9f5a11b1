"""Where a time-major node's index is laid out: transposed, in place, or as a matrix.

onnxruntime's broadcasting loops over the innermost dimension, and a short one is slow:
a time-major node with a short batch computes its index as ``[B, T]`` and transposes
it, and single-element rows are gathered on the data's ``[B, T]`` transpose. Those
thresholds (``Signature.tuning``) were measured on onnxruntime (docs/choices.md); a
target whose probe timed its own output cheaper in place (``Index:in_place``) skips both.
"""

from __future__ import annotations

__all__ = ["gathers_flat", "gathers_matrix", "position", "time_inner", "transposes_data"]

from revseq.ops.signature import Signature
from revseq.ops.vocabulary import FLAT_GATHER_ELEMENTS, INDEX_IN_PLACE


def _short_batch(sig: Signature, most: int) -> bool:
    """Whether the batch is at most ``most`` long and shorter than T, or presumably so.

    A symbolic batch counts as short unless a static T is at most ``most``: sequence
    models run batches of 1 to a few dozen over longer sequences, and there the in-place
    layout costs most (a batch of 1 broadcasts element by element), while the swapped
    one costs one Transpose of the index where the batch turns out long.
    """
    batch, time_len = sig.dim(sig.batch_axis), sig.dim(sig.time_axis)
    if batch is None:
        return time_len is None or time_len > most
    if batch > most:
        return False
    return time_len is None or time_len > batch


def time_inner(sig: Signature) -> bool:
    """Whether to compute a time-major node's index with time as the inner axis."""
    if sig.lead_rank != 2 or sig.time_axis > sig.batch_axis or not sig.target_has("Transpose"):
        return False
    if sig.target_lists(INDEX_IN_PLACE):
        return False
    return _short_batch(sig, sig.tuning.time_inner_max_batch)


def transposes_data(sig: Signature) -> bool:
    """Whether to gather a rank-2 time-major node on the [B, T] transpose of its data.

    Not with constant lengths: a constant index costs nothing to compute in any layout;
    nor for static data smaller than ``transpose_data_min_elements``, where the index
    is transposed instead (one node, shared by the reversals that share the index).
    """
    if (
        sig.rank != 2
        or sig.time_axis != 0
        or sig.lens is not None
        or not sig.target_has("Transpose")
        or sig.target_lists(INDEX_IN_PLACE)
    ):
        return False
    lead = sig.lead_dims()
    if lead is not None and lead[0] * lead[1] < sig.tuning.transpose_data_min_elements:
        return False
    return _short_batch(sig, sig.tuning.transpose_data_max_batch)


def gathers_matrix(sig: Signature) -> bool:
    """Whether the node's rows are single elements that GatherElements moves as a matrix.

    As the matrix itself, or with static dims as its 1-D view, where GatherElements
    moves the data's type on 1-D data only (``gathers_flat``).
    """
    return (
        sig.index_covers_data()
        and (sig.gather_moves_data("GatherElements") or gathers_flat(sig))
        and (sig.rank == 2 or sig.target_has("Squeeze", "Unsqueeze"))
    )


def gathers_flat(sig: Signature) -> bool:
    """Whether static single-element rows are gathered by GatherElements on a 1-D view.

    The view and its index are Reshapes to a constant length, and so is the result back:
    with symbolic dims that Reshape would need ``allowzero`` (a run-time 0), which the
    backend that needs the view (``GatherElements:flat``) lacks (docs/backends.md).
    """
    return (
        sig.static_dims() is not None
        and sig.row_size() == 1
        and sig.gather_moves_data(FLAT_GATHER_ELEMENTS)
        and sig.target_has("Reshape")
    )


def position(axis: int, sig: Signature, swapped: bool) -> int:
    """Where a leading axis sits in the layout the index is computed in."""
    return sig.lead_rank - 1 - axis if swapped else axis
