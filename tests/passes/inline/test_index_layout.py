"""The index layout a profile measured: transposed or in place, per class of node."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import all_op_types, run_ort
from profile_cases import one_node

import revseq
from revseq.measure.layouts import laid_out, measured_layout
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import TARGETS, combine
from revseq.ops.targets.profile import Layout, Profile


def _laid_out(profile: Profile, layouts: dict[str, bool], name: str | None = None) -> Profile:
    """``profile`` as if its probe had chosen ``layouts`` (in place or not, per class)."""
    return dataclasses.replace(
        profile,
        name=name or profile.name,
        layouts={
            cls: Layout(chosen, 2.0, 1.5 if chosen else 3.0) for cls, chosen in layouts.items()
        },
    )


LAYOUT_CASES = {  # a time-major node of each class, and its data's shape to run
    "matrix": (["T", "B"], (9, 3)),
    "matrix:static": ([400, 3], (400, 3)),  # beyond the table (its Transpose stays)
    "time+batch": (["T", "B", 4], (9, 3, 4)),
    "all": (["T", "B", "F"], (9, 3, 4)),
}


@pytest.mark.parametrize("cls", LAYOUT_CASES)
def test_a_probed_layout_decides_whether_the_index_is_transposed(cls):
    """The swapped layout (a Transpose of the index, or of single-element data) is
    onnxruntime's for short batches; a profile whose probe timed the index cheaper in
    place for the class gets it in place, exactly, and only for that class."""
    dims, shape = LAYOUT_CASES[cls]
    model = one_node(dims)
    base = dataclasses.replace(TARGETS["onnxruntime"], layouts=None)
    swapped = revseq.inline(model, target=base)
    in_place = revseq.inline(model, target=_laid_out(base, {cls: True}))
    assert "Transpose" in all_op_types(swapped)
    assert "Transpose" not in all_op_types(in_place)
    other = next(c for c in LAYOUT_CASES if c != cls)
    elsewhere = revseq.inline(model, target=_laid_out(base, {other: True, cls: False}))
    assert elsewhere.SerializeToString() == swapped.SerializeToString()
    # The probe forces each way over whatever layout the profile holds (a kept one).
    chosen = _laid_out(base, {cls: True})
    forced = revseq.inline(model, target=laid_out(chosen, cls, in_place=False))
    assert forced.SerializeToString() == swapped.SerializeToString()
    forced = revseq.inline(model, target=laid_out(base, cls, in_place=True))
    assert forced.SerializeToString() == in_place.SerializeToString()
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    time_len = shape[0]
    lens = np.resize(np.array([time_len, 0, 1, 2], np.int64), shape[1])
    expected = reverse_sequence(x, lens).tobytes()
    for optimize in (False, True):
        got = run_ort(in_place, {"x": x, "lens": lens}, optimize=optimize)[0]
        assert got.tobytes() == expected


def test_the_default_computes_in_place_only_where_every_member_chose_it():
    alpha = dataclasses.replace(TARGETS["onnxruntime"], name="alpha", layouts=None)
    model = one_node(["T", "B"])
    agree = combine(
        [_laid_out(alpha, {"matrix": True}), _laid_out(alpha, {"matrix": True}, "beta")]
    )
    differ = combine(
        [_laid_out(alpha, {"matrix": True}), _laid_out(alpha, {"matrix": False}, "beta")]
    )
    untimed = combine(
        [_laid_out(alpha, {"matrix": True}), dataclasses.replace(alpha, name="beta")]
    )
    assert "Transpose" not in all_op_types(revseq.inline(model, target=agree))
    assert "Transpose" in all_op_types(revseq.inline(model, target=differ))
    assert "Transpose" not in all_op_types(revseq.inline(model, target=untimed))


def test_a_layout_is_chosen_in_place_only_where_no_case_loses_beyond_the_tie():
    assert measured_layout([2.0, 4.0], [2.1, 3.0], exact=True).in_place
    assert not measured_layout([2.0, 4.0], [2.1, 3.0], exact=False).in_place
    # Cheaper on average, but one batch size took it 1.5x: swapped.
    lost = measured_layout([2.0, 4.0, 4.0], [3.0, 2.0, 2.0], exact=True)
    assert not lost.in_place and lost.in_place_ratio < lost.swapped_ratio
    round_trip = Profile.from_json(_laid_out(TARGETS["tvm"], {"matrix": True}).to_json())
    assert round_trip.layouts == {"matrix": Layout(True, 2.0, 1.5)}
