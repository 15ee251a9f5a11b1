"""A form's cost read at a size: each timed case's ratio, and the mean where the size is
unknown (``Cost.at``), kept in a profile file as timed."""

from __future__ import annotations

import math

import pytest

from revseq.errors import ProfileError
from revseq.ops.targets.cost import Cost

MIB = 1 << 20
TIMED = Cost(2.0, 9, ((MIB // 10, 4.0), (2 * MIB, 2.0), (16 * MIB, 1.0)))


def test_a_timed_size_reads_its_own_ratio_and_the_ends_hold_beyond_them():
    assert TIMED.at(MIB // 10) == 4.0
    assert TIMED.at(2 * MIB) == 2.0
    assert TIMED.at(16 * MIB) == 1.0
    assert TIMED.at(1) == 4.0  # smaller than the smallest timed: its ratio
    assert TIMED.at(1 << 40) == 1.0  # larger than the largest: its ratio


def test_between_two_sizes_the_ratio_is_interpolated_on_the_log_of_the_size():
    """Halfway between 2 and 16 MiB on a log scale (about 5.7 MiB): halfway 2.0 to 1.0."""
    assert TIMED.at(round(math.sqrt(2 * 16) * MIB)) == pytest.approx(1.5, abs=1e-6)
    assert TIMED.at(4 * MIB) == pytest.approx(2.0 - 1 / 3)
    assert 2.0 < TIMED.at(MIB) < 4.0


def test_an_unknown_size_or_a_cost_timed_without_sizes_reads_the_mean():
    assert TIMED.at(None) == 2.0
    assert Cost(3.5, 4).at(16 * MIB) == 3.5


def test_a_profile_file_keeps_each_size_and_a_file_without_them_still_loads():
    data = TIMED.to_json()
    assert data == {
        "ratio": 2.0,
        "nodes": 9,
        "by_bytes": [[MIB // 10, 4.0], [2 * MIB, 2.0], [16 * MIB, 1.0]],
    }
    assert Cost.from_json(data) == TIMED
    shuffled = {**data, "by_bytes": data["by_bytes"][::-1]}
    assert Cost.from_json(shuffled) == TIMED  # smallest first whatever the file's order
    assert Cost.from_json({"ratio": 1.5, "nodes": 3}) == Cost(1.5, 3)
    assert "by_bytes" not in Cost(1.5, 3).to_json()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"ratio": 1.0, "nodes": 2, "sizes": []}, "unknown key 'sizes'"),
        ({"ratio": 1.0}, "no ratio or nodes"),
        ({"ratio": 1.0, "nodes": 2, "by_bytes": [[8, 1.0], [8, 2.0]]}, "distinct positive"),
        ({"ratio": 1.0, "nodes": 2, "by_bytes": [[0, 1.0]]}, "distinct positive"),
        ({"ratio": 1.0, "nodes": 2, "by_bytes": [[8, 1.0, 3]]}, "distinct positive"),
        ({"ratio": 1.0, "nodes": 2, "by_bytes": [["big", 1.0]]}, "distinct positive"),
    ],
)
def test_a_cost_with_an_unknown_or_missing_key_or_bad_sizes_is_refused(data, says):
    with pytest.raises(ProfileError, match=says):
        Cost.from_json(data)
