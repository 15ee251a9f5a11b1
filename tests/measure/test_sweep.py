"""The broad random sweep (``python -m bench.sweep``), on onnxruntime."""

from __future__ import annotations

import dataclasses

import numpy as np
from helpers import HoldsFloat16

from bench.sweep import KINDS, draw_cases, main, run_case, sizes
from revseq import backends
from revseq.ops.targets import TARGETS


def test_the_cases_span_the_broad_kind():
    """Types the backend has, ranks 2-5, general axes (negative too), every opset and
    kind of dims, the default and the own target."""
    cases = draw_cases("onnxruntime", 400, seed=3)
    assert {c.rank for c in cases} == {2, 3, 4, 5}
    assert {c.kind for c in cases} == set(KINDS)
    assert {c.opset for c in cases} == set(range(10, 24))
    assert {c.own for c in cases} == {False, True}
    assert any(c.general and min(c.batch_axis, c.time_axis) < 0 for c in cases)
    assert any(c.general and {c.batch_axis, c.time_axis} == {0, 2} for c in cases)
    shipped = TARGETS["onnxruntime"]
    assert "complex64" not in {c.dtype for c in cases}  # onnxruntime has none
    assert {c.dtype for c in cases} <= {
        t for t in ("float32", "uint8", "int8", "uint16", "int16", "int32", "int64",
                    "string", "bool", "float16", "float64", "uint32", "uint64")
        if shipped.moves("Gather", t) or shipped.moves("GatherND", t)
        or shipped.moves("GatherElements", t)
    }  # fmt: skip
    assert draw_cases("onnxruntime", 50, seed=3) == cases[:50]


def test_a_sweep_on_onnxruntime_runs_exactly(capsys):
    assert main(["onnxruntime", "--cases", "60", "--seed", "5"]) == 0
    assert capsys.readouterr().out.strip().endswith("60 cases (seed 5): 60 ok")


@dataclasses.dataclass
class _Identity:
    """A backend that hands the data back unchanged: every reversal shows."""

    name: str = "onnxruntime"
    label: str = "identity 0"
    storage: dict = dataclasses.field(default_factory=dict)

    def prepare(self, model, **_):
        return lambda feeds: [np.asarray(feeds["x"])]

    def rounding(self, dtype, rank):
        return None


def test_a_backend_that_computes_wrong_values_is_caught():
    case = next(c for c in draw_cases("onnxruntime", 50, seed=1) if c.dtype == "float32")
    verdict, why = run_case(_Identity(), case)  # type: ignore[arg-type]
    assert verdict == "WRONG" and "T=5" in why
    assert run_case(backends.get("onnxruntime"), case) == ("ok", "")


def test_a_backend_holding_float32_narrower_is_checked_against_what_it_holds():
    """RKNN holds float32 as float16: its output is exact to that storage, not WRONG."""
    cases = draw_cases("onnxruntime", 50, seed=1)
    case = next(c for c in cases if c.dtype == "float32" and c.kind != "static")
    assert run_case(HoldsFloat16(), case) == ("ok", "")  # type: ignore[arg-type]


def test_a_static_time_with_a_symbolic_batch_runs_at_its_own_time_length():
    """The ``batch`` kind: only the batch dim symbolic (an exporter's ``[None, 9, 3]``)."""
    cases = draw_cases("onnxruntime", 40, seed=2, kinds=["batch"])
    assert {c.kind for c in cases} == {"batch"}
    case = cases[0]
    dims = case.model().graph.input[0].type.tensor_type.shape.dim
    symbolic = [i for i, d in enumerate(dims) if d.dim_param]
    assert symbolic == [case.batch_axis % case.rank]
    assert {t for t, _ in sizes("batch")} == {dims[case.time_axis % case.rank].dim_value}
    assert len({b for _, b in sizes("batch")}) == 2


def test_bad_arguments_are_one_line(capsys):
    import pytest

    for argv, said in (
        (["--opsets", "ten"], "--opsets takes FIRST-LAST"),
        (["--kinds", "batch,odd"], "--kinds takes some of static, batch"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["onnxruntime", *argv])
        assert exit_.value.code == 2
        assert said in capsys.readouterr().err


def test_a_backend_whose_gathers_move_nothing_is_swept_in_float32():
    """ncnn runs no gather with a run-time index: its cases are float32, and each
    is the default's or its own target's verdict, not an empty draw."""
    assert not any(TARGETS["ncnn"].has(t) for t in ("float32", "int32", "int64"))
    cases = draw_cases("ncnn", 20, seed=1)
    assert {c.dtype for c in cases} == {"float32"}


def test_float64_rounding_of_large_integers_is_told_from_a_wrong_value():
    from bench.sweep import rounded_as_float64

    big = np.array([2**62 + 1, 2**53 + 1413, -(2**62) - 3, 7], np.int64)
    through = big.astype(np.float64).astype(np.int64)
    assert rounded_as_float64(big, through)
    assert rounded_as_float64(big, big)
    off_by_one = big.copy()
    off_by_one[3] += 1  # below 2^53 float64 holds it: a wrong value
    assert not rounded_as_float64(big, off_by_one)
    far = through.copy()
    far[0] += 4096  # beyond half a float64 step at 2^62
    assert not rounded_as_float64(big, far)
    assert not rounded_as_float64(big.astype(np.float64), through.astype(np.float64))


@dataclasses.dataclass
class _RoundsInt64:
    """A backend that moves int64 through float64, as its profile says (or not)."""

    states_it: bool
    name: str = "onnxruntime"
    label: str = "rounding 0"
    storage: dict = dataclasses.field(default_factory=dict)

    def prepare(self, model, **_):
        runner = backends.get("onnxruntime").prepare(model)
        return lambda feeds: [
            out.astype(np.float64).astype(np.int64) if out.dtype == np.int64 else out
            for out in runner(feeds)
        ]

    def rounding(self, dtype, rank):
        return "int64 moved through float64" if self.states_it and dtype == "int64" else None


def test_a_backend_s_stated_rounding_is_told_apart_from_a_wrong_reversal():
    case = next(c for c in draw_cases("onnxruntime", 200, seed=1) if c.dtype == "int64")
    verdict, why = run_case(_RoundsInt64(states_it=True), case)  # type: ignore[arg-type]
    assert (verdict, why.split(": ")[-1]) == ("rounded", "int64 moved through float64")
    assert run_case(_RoundsInt64(states_it=False), case)[0] == "WRONG"  # type: ignore[arg-type]
