"""The backends with a probed profile, and revseq's output run on them against the truth.

webgpu (an execution provider whose verdict includes where each node ran) has tests of
its own, and so do the ExecuTorch backends, which take the op through revseq's
converter, the backends in an environment of their own (static dims, the types they
move; LiteRT's conversions take seconds each), and ncnn, which runs no gather.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from helpers import assert_identical, model_of

import revseq
from bench.sweep import device_lacks, types_of
from revseq import backends
from revseq.equivalence.inputs.values import random_array
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import TARGETS
from revseq.ops.vocabulary import ELEMENT_TYPES

BACKENDS = sorted(
    set(backends.ADAPTERS)
    - {"webgpu", "executorch", "executorch-portable", "rknn", "x2paddle", "litert", "ncnn"}
)


# (T, B) sizes a model runs at: static shapes at the first, symbolic dims at both.
SIZES = ((5, 4), (3, 2))


LAYOUTS = {"time_major": (1, 0), "batch_major": (0, 1)}


def backend_or_skip(name: str) -> backends.Backend:
    reason = backends.unavailable(name)
    if reason is not None:
        pytest.skip(reason)
    if backends.adapter(name).own_process:
        return backends.isolated(name)  # type: ignore[return-value]
    return backends.get(name)


def dims_for(rank: int, batch_axis: int, time_axis: int, dynamic: bool, size) -> tuple:
    time_len, batch = size
    dims = [2 + (i % 2) for i in range(rank)]
    dims[time_axis % rank], dims[batch_axis % rank] = time_len, batch
    if dynamic:
        dims[time_axis % rank], dims[batch_axis % rank] = "T", "B"
        if rank > 3:
            dims[-1] = "D"
    return tuple(dims)


def form_of(model: onnx.ModelProto) -> str:
    """Which form an inlined model holds, by its gather."""
    ops = {n.op_type for n in model.graph.node}
    if "GatherElements" in ops:
        return "gather_elements"
    return "gather_rows" if "Gather" in ops or "Flatten" in ops else "gather_nd"


def clamps(name: str, form: str, dynamic: bool) -> bool:
    """Whether the backend's probe saw ``form`` exact on invalid lengths (-1, T+2).

    ONNX defines only lengths in [0, T]; revseq's forms clamp the others, and the
    probes record where a backend cannot run that (tract with symbolic dims).
    """
    profile = TARGETS.get(name)
    kind = "dynamic" if dynamic else "static"
    failed = f"{form} (invalid lengths) ({kind})"
    return profile is None or not any(f.startswith(failed) for f in profile.failures)


def run_and_compare(
    backend: backends.Backend,
    model: onnx.ModelProto,
    *,
    rank: int,
    dtype: str,
    batch_axis: int,
    time_axis: int,
    dynamic: bool,
    lens_dtype=np.int64,
) -> None:
    """Run ``model`` at every size on valid lengths (T, 0, 1, 2), then on invalid ones
    (T+3, -1): clamped where the probe saw the backend clamp them; else it must raise
    there or clamp."""
    rng = np.random.default_rng(0)
    patterns = {"valid": [None, 0, 1, 2], "invalid": [3, -1, 0, 1]}  # None: T; 3: T+3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner = backend.prepare(model)
        for size in SIZES if dynamic else SIZES[:1]:
            dims = dims_for(rank, batch_axis, time_axis, False, size)
            time_len, batch = size
            x = random_array(rng, ELEMENT_TYPES[dtype], dims)
            for kind, pattern in patterns.items():
                values = [
                    time_len
                    if v is None
                    else time_len + 3
                    if v == 3 and kind == "invalid"
                    else v
                    for v in pattern
                ]
                lens = np.array((values * batch)[:batch], lens_dtype)
                expected = reverse_sequence(
                    x, lens, batch_axis=batch_axis, time_axis=time_axis
                )
                if kind == "invalid" and not clamps(backend.name, form_of(model), dynamic):
                    # The probe saw this form fail there on invalid lengths (in its int64
                    # arithmetic): it may raise, or clamp, never give other values.
                    try:
                        got = runner({"x": x, "lens": lens})
                    except backends.BackendError:
                        continue
                    assert_identical(got[0], expected)
                    continue
                assert_identical(runner({"x": x, "lens": lens})[0], expected)


def default_not_for(name: str, inlined: onnx.ModelProto, dtype: str) -> str | None:
    """Why the default need not run on ``name`` for ``dtype``, or None: it must.

    The default is computed from host backends (``load_profiles``); on a device, the
    gather it takes for a type may move none of it there (torch's CUDA indexing has no
    uint16, uint32 or uint64), which the device's own target avoids.
    """
    profile = TARGETS.get(name)
    lacking = [] if profile is None else device_lacks(profile, inlined, dtype)
    if not lacking:
        return None
    return (
        f"the default is for host backends: {name}'s {', '.join(lacking)} moves no "
        f"{dtype} (its profile); target={name!r} does"
    )


def check_default(
    name: str,
    rank: int,
    dtype: str,
    layout: str,
    dynamic: bool,
    *,
    own_lens_dim: bool = False,
    **inline_options,
) -> None:
    backend = backend_or_skip(name)
    if dtype not in types_of(name):
        pytest.skip(f"{name} moves no {dtype} with any gather (its profile)")
    if "target" not in inline_options and TARGETS[name].yields:
        # Kept out of the default (OpenCV): its own target is what serves it.
        inline_options = {**inline_options, "target": name}
    batch_axis, time_axis = LAYOUTS[layout]
    dims = dims_for(rank, batch_axis, time_axis, dynamic, SIZES[0])
    model = model_of(dims, dtype, batch_axis, time_axis, own_lens_dim=own_lens_dim)
    inlined = revseq.inline(model, **inline_options)
    reason = None if "target" in inline_options else default_not_for(name, inlined, dtype)
    if reason is not None:
        pytest.skip(reason)
    run_and_compare(
        backend,
        inlined,
        rank=rank,
        dtype=dtype,
        batch_axis=batch_axis,
        time_axis=time_axis,
        dynamic=dynamic,
    )
