"""What a form costs on a backend, as its probe timed it, and how the planner reads it.

A cost is a ratio to the backend's copy floor, timed at several sizes of data: what a
form costs depends on the size (fixed costs weigh on small data and vanish on large),
so the planner reads it at the node's size where that is known.
"""

from __future__ import annotations

__all__ = ["COST_TIE", "NODE_COST_BYTES", "Cost"]

import itertools
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from revseq.errors import ProfileError

COST_TIE = 1.1
"""Costs within this factor of each other are a tie: paired medians of one probe move
about that much between runs (docs/profiles.md)."""


NODE_COST_BYTES = 200 * 16 * 8 * 4
"""The data a node's cost is weighed against (``Profile.node_cost``): the smallest case
the forms are timed on, 0.1 MiB (``revseq.measure.costs.COST_CASES``)."""


class Cost(NamedTuple):
    """A form's cost on one backend: x its copy floor, and the nodes it emitted.

    The ratio is the geometric mean over the probe's cases of paired medians;
    ``by_bytes`` holds each case's own, (its data's bytes, the ratio), smallest first.
    A form's cost is not one number: a backend's fixed costs weigh on 0.1 MiB and vanish
    on 16 MiB, so two forms may trade places between them (:meth:`at`).
    """

    ratio: float
    nodes: int
    by_bytes: tuple[tuple[int, float], ...] = ()

    def at(self, nbytes: int | None) -> float:
        """The ratio for data of ``nbytes``: None (a size unknown until run time) the mean.

        Between two timed sizes, interpolated on the log of the size; beyond them,
        the nearest one's. A cost timed without sizes has its mean only.
        """
        points = self.by_bytes
        if nbytes is None or not points:
            return self.ratio
        if nbytes <= points[0][0]:
            return points[0][1]
        for (low, below), (high, above) in itertools.pairwise(points):
            if nbytes <= high:
                share = math.log(nbytes / low) / math.log(high / low)
                return below + (above - below) * share
        return points[-1][1]

    def to_json(self) -> dict[str, Any]:
        """The cost as a profile file holds it (``by_bytes`` where timed)."""
        data: dict[str, Any] = {"ratio": self.ratio, "nodes": self.nodes}
        if self.by_bytes:
            data["by_bytes"] = [list(point) for point in self.by_bytes]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cost:
        """The inverse of :meth:`to_json`.

        Raises:
            ProfileError: A key is unknown or missing, or ``by_bytes`` is not pairs of
                distinct positive sizes and their ratios.
        """
        unknown = set(data) - set(cls._fields)
        missing = {"ratio", "nodes"} - set(data)
        if unknown or missing:
            what = f"unknown key {sorted(unknown)[0]!r}" if unknown else "no ratio or nodes"
            raise ProfileError(f"a cost has {what}")
        bad = ProfileError(
            "a cost's by_bytes is not [bytes, ratio] pairs of distinct positive sizes"
        )
        try:
            points = sorted((int(b), float(r)) for b, r in data.get("by_bytes", ()))
        except (TypeError, ValueError):
            raise bad from None
        sizes = [nbytes for nbytes, _ in points]
        if any(nbytes <= 0 for nbytes in sizes) or len(set(sizes)) < len(sizes):
            raise bad
        return cls(float(data["ratio"]), int(data["nodes"]), tuple(points))
