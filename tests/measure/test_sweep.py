"""The broad random sweep (``python -m bench.sweep``), on onnxruntime."""

from __future__ import annotations

import dataclasses

import numpy as np
from helpers import HoldsFloat16

from bench.sweep import KINDS, draw_cases, main, run_case
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


def test_bad_arguments_are_one_line(capsys):
    import pytest

    with pytest.raises(SystemExit) as exit_:
        main(["onnxruntime", "--opsets", "ten"])
    assert exit_.value.code == 2
    assert "--opsets takes FIRST-LAST" in capsys.readouterr().err
