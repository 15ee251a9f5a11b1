"""The copy floor a form is timed against on a backend, and one timed pass over it.

revseq's output runs where ReverseSequence is missing, so there is no native kernel to
compare with: the floor is a copy of the data, the slower of numpy's copy and the
backend's own Identity of the same tensor (its per-run overhead included). Each variant
runs interleaved with the floor in one process, and ratios are paired medians. The
probe's costs (``costs.py``) and the speed pages (``bench/``) both time this way.
"""

from __future__ import annotations

__all__ = ["FLOORS", "floor_ratio", "floor_runners", "time_on_floor", "time_pass"]

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx

from revseq import backends
from revseq.equivalence.inputs.values import held
from revseq.errors import one_line, stable_line
from revseq.measure._cases import Case, copy_model, fed, numpy_copy
from revseq.measure._timing import PLACEMENTS, Models, Timed, Unusable, time_variants
from revseq.ops.reference import reverse_sequence

FLOORS = ("Identity", "Neg")
"""The backend's own pass over the data, by the op it runs: its Identity, or where it
cannot run one (a converter may remove it, then fail on the empty graph), a Neg."""


def floor_runners(
    backend: backends.Backend, case: Case, x: np.ndarray
) -> tuple[str, list[backends.Runner]]:
    """The backend's own copy of ``x`` (``FLOORS``), one runner per placement, warmed up.

    Raises:
        BackendError: The backend runs neither.
    """
    failure: backends.BackendError | None = None
    for op in FLOORS:
        try:
            runners = [
                backend.prepare(copy_model(case, op), repeated=True) for _ in range(PLACEMENTS)
            ]
            for runner in runners:
                runner({"x": x})
        except backends.BackendError as e:
            failure = failure or e
            continue
        return op, runners
    assert failure is not None
    raise failure


def time_pass(
    backend: backends.Backend,
    case: Case,
    feeds: dict[str, np.ndarray],
    models: Models,
    *,
    rounds: int,
    budget_s: float,
    reversals: bool = True,
) -> Timed:
    """One pass of ``time_on_floor`` with runners made anew, the floor's too.

    With ``reversals``, each output must be the reversal of the data as the backend
    holds it (``Backend.storage``): float32 held as float16 is exact to that storage.
    Without, the models compute something else (``node_cost.py``) and are not checked.
    """
    label, identities = floor_runners(backend, case, feeds["x"])
    want = None
    if reversals:
        held_x = held({"x": feeds["x"]}, backend.storage)["x"]  # float32 as float16 on an NPU
        want = reverse_sequence(
            held_x, feeds["lens"], batch_axis=case.batch_axis, time_axis=case.time_axis
        )
    return time_on_floor(
        backend,
        identities,
        feeds,
        models,
        rounds=rounds,
        budget_s=budget_s,
        want=want,
        floor=label,
    )


def time_on_floor(
    backend: backends.Backend,
    identities: Sequence[backends.Runner],
    feeds: dict[str, np.ndarray],
    models: Models,
    *,
    rounds: int,
    budget_s: float,
    want: np.ndarray | None = None,
    floor: str = "Identity",
) -> Timed:
    """Time ``models`` on ``backend`` interleaved with the floor's two copies of the data.

    ``identities`` run the backend's own Identity of ``feeds["x"]`` (``floor_runners``);
    each model gets ``PLACEMENTS`` runners, warmed up once; a model whose warm-up output
    is not ``want`` byte for byte is not timed ("wrong values": a runtime's own op on
    rows of length 0). ``floor`` names the identities' op (``FLOORS``). Ratios are over the
    faster identity's; ``memcpy`` is numpy's copy (not on a backend whose data lives on a
    device). See :func:`revseq.measure._timing.time_variants`.
    """
    data = {"x": feeds["x"]}

    def prepare(model: onnx.ModelProto) -> list[Callable[[], object]]:
        its_feeds = fed(model, feeds)
        try:
            runners = [backend.prepare(model, repeated=True) for _ in range(PLACEMENTS)]
            outputs = [runner(its_feeds)[0] for runner in runners]
        except backends.BackendError as e:
            raise Unusable(stable_line(one_line(e))) from e
        if want is not None and any(
            o.dtype != want.dtype or o.tobytes() != want.tobytes() for o in outputs
        ):
            raise Unusable("wrong values")
        return [lambda r=runner, f=its_feeds: r(f) for runner in runners]

    after = {} if backend.resident else {"memcpy": [numpy_copy(feeds["x"])]}
    return time_variants(
        {floor: [lambda r=identity: r(data) for identity in identities]},
        models,
        prepare,
        rounds=rounds,
        budget_s=budget_s,
        after=after,
    )


def floor_ratio(result: Mapping[str, tuple[float, float]]) -> float:
    """The copy floor as a ratio to the backend's Identity: the slower of it and numpy's.

    The Identity alone where numpy's copy was not timed (data resident on a device).
    """
    return max(1.0, result["memcpy"][1]) if "memcpy" in result else 1.0
