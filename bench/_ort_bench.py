"""onnxruntime's page: the native kernel against each decomposition and a copy."""

from __future__ import annotations

__all__ = ["run_speed", "session"]

from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnxruntime as ort

import revseq
from revseq.measure._cases import (
    DIMS,
    Case,
    copy_model,
    extra_bytes,
    fed,
    input_arrays,
    native_model,
    node_count,
    numpy_copy,
)
from revseq.measure._timing import (
    PLACEMENTS,
    distinct_models,
    median_of_passes,
    placed_medians,
    with_repeats,
)
from revseq.ops.vocabulary import STATIC


def session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _variants(
    models: dict[str, onnx.ModelProto], feeds: dict[str, np.ndarray], threads: int
) -> dict[str, list[Callable[[], object]]]:
    """``PLACEMENTS`` sessions per model (fed the inputs it has), and numpy's copy."""
    variants: dict[str, list[Callable[[], object]]] = {}
    for name, model in models.items():
        its_feeds = fed(model, feeds)
        sessions = [session(model, threads) for _ in range(PLACEMENTS)]
        variants[name] = [lambda s=s, f=its_feeds: s.run(None, f) for s in sessions]
    variants["memcpy"] = [numpy_copy(feeds["x"])]
    return variants


def run_speed(
    cases: Sequence[Case],
    threads: Sequence[int],
    rounds: int,
    budget_s: float,
    dims_kinds: Sequence[str] = DIMS,
    *,
    passes: int = 1,
) -> list[dict[str, object]]:
    """Time every case at every thread count; one row per (case, dims, threads).

    Each row is ``passes`` passes of fresh sessions, the median counting.
    """
    rng = np.random.default_rng(0)
    strategies = list(revseq.STRATEGIES)
    rows = []
    for case in cases:
        feeds = input_arrays(case, rng)
        for dims in dims_kinds:
            native = native_model(case, dims=dims)
            # "portable": the default output (runs on every probed backend); then each
            # strategy as emitted for onnxruntime ("auto" is the fastest form there).
            models = {"native": native, "portable": revseq.inline(native)}
            models.update(
                {
                    s: revseq.inline(native, strategy=s, target="onnxruntime")
                    for s in strategies
                }
            )
            # The same lengths as a constant, static dims: one gather with a constant
            # index, the floor the index arithmetic adds to.
            models["gather alone"] = revseq.inline(native_model(case, feeds["lens"]))
            distinct, repeats = distinct_models(models)
            for n in threads:
                timed = {**distinct, "ort copy": copy_model(case)}
                result = median_of_passes(
                    [
                        placed_medians(
                            _variants(timed, feeds, n), rounds=rounds, budget_s=budget_s
                        )
                        for _ in range(passes)
                    ]
                )
                result = with_repeats(result, repeats, [*models, "ort copy"])
                rows.append({"case": case, "dims": dims, "threads": n, "result": result})
            # Bytes from shape inference: known for static dims only.
            if dims == STATIC:
                rows[-1]["extra"] = {name: extra_bytes(m) for name, m in models.items()}
            rows[-1]["nodes"] = {name: node_count(m) for name, m in models.items()}
    return rows
