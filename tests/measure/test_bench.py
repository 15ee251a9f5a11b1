"""The benchmark's helpers: what they time is what the user calls, and what they count."""

from __future__ import annotations

import itertools
import sys
import types

import numpy as np
import onnx
import pytest
from helpers import HoldsFloat16

import revseq
from bench import _ort_bench, _passes_bench, bench
from revseq import backends
from revseq.measure import _cases, _timing, floor
from revseq.ops.targets.cost import Cost


def test_time_passes_runs_the_public_api_both_ways():
    timing = _passes_bench.time_passes("chain", _passes_bench.chain_model(3))
    assert timing.nodes == 6
    assert timing.restored == 3  # the inlined chain restored by revseq.restore
    for seconds in (timing.round_trip, timing.inline_api, timing.restore_api):
        assert seconds > 0
    table = _passes_bench.format_passes([timing])
    assert table.splitlines()[2].startswith("| chain | 6 |")


def test_large_model_has_the_requested_size():
    model = _passes_bench.large_model(count=2, total=50)
    assert model.graph.num_nodes() == 50
    assert sum(n.op_type == "ReverseSequence" for n in model.graph) == 2


def test_suite_holds_the_issue_shapes_and_native_models_are_valid():
    shapes = {case.shape for case in _cases.SUITE}
    assert {(2000, 16), (1000, 8, 1)} <= shapes
    for case in _cases.SUITE[:2]:
        model = _cases.native_model(case)
        onnx.checker.check_model(model)
        inlined = revseq.inline(model)
        assert _cases.extra_bytes(inlined) >= 0


def test_shape_selects_suite_rows_and_speed_only_stops_after_the_memory_table(capsys):
    argv = ["--shape", "1000,8,1", "--speed-only", "--rounds", "5", "--budget", "0.1"]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| [")]
    assert rows and all(line.startswith("| [1000, 8, 1] ") for line in rows)
    assert "Pass speed" not in out


def test_a_shape_outside_the_suite_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--shape", "3,4"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert "no suite case of shape 3,4" in error


def test_symbolic_dims_rows_declare_what_they_say():
    case = _cases.SUITE[5]  # [128, 32, 64], time-major
    assert _cases.declared_dims(case, "static") == [128, 32, 64]
    assert _cases.declared_dims(case, "time+batch") == ["T", "B", 64]
    assert _cases.declared_dims(case, "all") == ["T", "B", "d2"]
    model = _cases.native_model(case, dims="all")
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims] == ["T", "B", "d2"]


def test_backend_rows_time_the_default_against_the_copy_floor(capsys):
    argv = ["--backend", "onnxruntime", "--shape", "2000,16", "--dims", "static,all"]
    assert bench.main([*argv, "--rounds", "3", "--budget", "0.05", "--passes", "3"]) == 0
    from bench import _backend_bench as bb

    out, bars = capsys.readouterr().out.split(bb.BAR_INTRO)
    rows = [line for line in out.splitlines() if line.startswith("| [")]
    assert [row.split(" | ")[1] for row in rows] == ["static", "all"]
    bar_rows = [line.split(" | ")[1:3] for line in bars.splitlines() if line.startswith("| [")]
    assert bar_rows == [["static", "default"], ["all", "default"]]
    for row in rows:
        default, own = row.split(" | ")[4:6]
        assert default.endswith(")") and "x (" in default and "x (" in own


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dims", "static,some"], "unknown dims 'some'"),
        (["--backend", "webgpu"], "no GPU's timing"),
        (["--backend", "onnxruntime", "--shape", "1000,8,1"], "no suite case of shape"),
        (["--passes", "0"], "not a number of passes: '0'"),
    ],
)
def test_bad_bench_arguments_are_refused_in_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


def test_a_speed_page_reads_as_reference(tmp_path):
    """Title with the backend, the set-up, the table, then the command: no goal lines."""
    from bench import _backend_bench as bb
    from bench.pages import write_measured_page

    def row(shape, default, own):
        result = {"Identity": (1e-3, 1.0), "memcpy": (1e-3, 0.5)}
        result |= {"default": (0, default), "own target": (0, own)}
        case = _cases.Case(shape, 1, 0, "float32")
        return {"case": case, "dims": "all", "result": result, "notes": {}, "nodes": {}}

    table = bb.format_backend("tract 0.23.9", [row((64, 32, 256), 1.4, 1.2)])
    assert "goal" not in table and "geomean 1.40x the floor" in table
    page = tmp_path / "tract.md"
    write_measured_page(
        page, "Speed on tract 0.23.9", "python -m bench.bench --backend tract",
        "Python 3.11", table, setup="Set-up: tract on 2 CPUs",
    )  # fmt: skip
    lines = page.read_text().splitlines()
    assert lines[0] == "# Speed on tract 0.23.9" and lines[2] == "Set-up: tract on 2 CPUs"
    assert lines[-1].startswith("Written by `python -m bench.bench --backend tract`")
    assert "shared machine" not in page.read_text()


def _bar_row(default, gather, before=None):
    result = {"Identity": (1e-3, 1.0), "memcpy": (1e-3, 0.5)}
    result |= {"default": (0, default), "gather alone": (0, gather)}
    if before is not None:
        result["default before"] = (0, before)
    case = _cases.Case((64, 32, 256), 1, 0, "float32")
    return {"case": case, "dims": "all", "result": result, "notes": {}, "nodes": {}}


def test_each_default_is_set_against_the_bar_with_its_index_arithmetic_s_part():
    """The bar is the looser of 1.2x the gather alone and 1.5x a copy; the part beyond
    the gather is the index arithmetic's; an earlier default that wrote the same model
    has no row of its own."""
    from bench import _backend_bench as bb

    rows = bb.bar_fractions([_bar_row(3.0, 2.0, before=4.0), _bar_row(1.2, 1.0, before=1.2)])
    assert rows == [
        "| [64, 32, 256] time-major float32 | all | default before | 1.67 | 50 % |",
        "| [64, 32, 256] time-major float32 | all | default | 1.25 | 33 % |",
        "| [64, 32, 256] time-major float32 | all | default | 0.80 | 17 % |",
    ]
    table = bb.format_backend("tract 0.23.9", [_bar_row(3.0, 2.0, before=4.0)])
    assert "| default before | default |" in table.splitlines()[2]
    assert bb.BAR_INTRO in table and "default before, all dims: geomean 4.00x" in table


def test_an_earlier_revseq_s_default_is_a_variant_of_its_own(monkeypatch):
    from bench import _backend_bench as bb

    case = _cases.Case((20, 4), 1, 0, "float32")
    lens = np.array([0, 1, 20, 7])
    models = bb.backend_models("onnxruntime", case, "all", lens, before=sys.executable)
    earlier, now = models[bb.DEFAULT_BEFORE], models["default"]
    assert earlier.SerializeToString() == now.SerializeToString()
    models = bb.backend_models("onnxruntime", case, "all", lens, before=sys.executable + "-no")
    assert "does not run" in models[bb.DEFAULT_BEFORE]


def test_paired_medians_start_each_round_one_variant_further_on():
    """Every variant runs at every place of the order as often (places bias times)."""
    calls: list[str] = []
    variants = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    _timing.paired_medians(variants, rounds=6, budget_s=60)
    rounds = [calls[i : i + 3] for i in range(3, len(calls), 3)]  # after the warm-up
    assert [r[0] for r in rounds] == ["a", "b", "c", "a", "b", "c"]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)


def test_placed_medians_report_each_variant_once_against_the_first():
    """Each runner of a variant is timed in its own slot; the report names the variant."""
    calls: list[str] = []
    variants = {
        "floor": [lambda: calls.append("floor 0"), lambda: calls.append("floor 1")],
        "form": [lambda: calls.append("form 0"), lambda: calls.append("form 1")],
        "memcpy": [lambda: calls.append("memcpy")],
    }
    result = _timing.placed_medians(variants, rounds=5, budget_s=60)
    assert list(result) == ["floor", "form", "memcpy"]
    assert result["floor"][1] == 1.0
    assert {c: calls.count(c) for c in set(calls)} == dict.fromkeys(calls, 6)


def test_median_of_passes_takes_each_label_over_the_passes_that_have_it():
    passes = [
        {"floor": (1e-3, 1.0), "form": (2e-3, 2.0)},
        {"floor": (3e-3, 1.0), "form": (9e-3, 3.0), "flaky": (1.0, 5.0)},
        {"floor": (2e-3, 1.0), "form": (4e-3, 2.5), "flaky": (3.0, 7.0)},
    ]
    assert _timing.median_of_passes(passes) == {
        "floor": (2e-3, 1.0),
        "form": (4e-3, 2.5),
        "flaky": (2.0, 6.0),
    }


def test_each_pass_times_sessions_made_anew(monkeypatch):
    """A pass's sessions are its own: where their buffers land is drawn again."""
    made: list[int] = []
    session = _ort_bench.session
    monkeypatch.setattr(_ort_bench, "session", lambda *a: made.append(1) or session(*a))
    case = _cases.Case((20, 4), 1, 0, "float32")

    def sessions_made(passes: int) -> int:
        made.clear()
        rows = _ort_bench.run_speed([case], (1,), 2, 0.01, ("static",), passes=passes)
        assert len(rows) == 1 and rows[0]["result"]["native"][1] == 1.0
        return len(made)

    once = sessions_made(1)
    assert once > 0 and sessions_made(3) == 3 * once


def test_probe_costs_take_each_case_s_median_over_passes_of_fresh_runners(monkeypatch):
    """``revseq probe --passes N``: every cost case is timed N times, the floor's runners
    made anew each time, and the median ratio to the floor counts (a single pass let
    forms within a few percent trade places)."""
    from revseq.measure import costs as _costs

    floors = []
    monkeypatch.setattr(
        _costs.backends, "get", lambda name: types.SimpleNamespace(name=name, storage={})
    )
    monkeypatch.setattr(
        floor, "floor_runners", lambda b, case, x: ("Identity", floors.append(case))
    )
    monkeypatch.setattr(_costs, "_emitted", lambda case, kind, form, ops, **_: f"{form} model")
    passes = itertools.cycle([1.0, 6.0, 2.0])  # x Identity; numpy's copy is 0.5x: floor 1

    def timed(backend, identities, feeds, models, *, rounds, budget_s, **_):
        ratio = next(passes)
        result = {"Identity": (1e-3, 1.0), "memcpy": (5e-4, 0.5)}
        result.update({label: (1e-3 * ratio, ratio) for label in models})
        return result, {}, {label: 7 for label in models}

    monkeypatch.setattr(floor, "time_on_floor", timed)
    forms = {"static": frozenset({"gather_rows"}), "dynamic": frozenset()}
    costs = _costs.form_costs("fake", None, forms, passes=3)
    at_each = tuple((case.nbytes, 2.0) for case in _costs.COST_CASES)
    assert costs["static"] == {"gather_rows": Cost(2.0, 7, at_each)}
    # The row form is timed on single-element rows too (its Gather of single elements).
    at_each = tuple((case.nbytes, 2.0) for case in _costs.MATRIX_CASES)
    assert costs["matrix:static"] == {"gather_rows": Cost(2.0, 7, at_each)}
    assert len(floors) == 3 * (len(_costs.COST_CASES) + len(_costs.MATRIX_CASES))
    single = _costs.form_costs("fake", None, forms)  # one pass per case: 1, 6, 2
    rows = single["static"]["gather_rows"]
    assert rows.ratio == pytest.approx(2.29, abs=0.01)
    # Each case's own ratio is kept with its size, smallest first.
    sizes = sorted(case.nbytes for case in _costs.COST_CASES)
    assert rows.by_bytes == tuple(zip(sizes, (1.0, 6.0, 2.0), strict=True))


def test_identical_models_are_timed_once_and_share_their_figures():
    """A target's chosen form is always a form column too: the same model timed twice
    measured 1.92x and 1.18x its floor as two columns of one page, so it runs once and
    both columns show its figures, in the columns' order."""

    case = _cases.Case((20, 4, 3), 1, 0, "float32")
    native = _cases.native_model(case)
    chosen = revseq.inline(native, target="onnxruntime")
    other = revseq.inline(native, strategy="gather_elements", target="onnxruntime")
    assert chosen.SerializeToString() != other.SerializeToString()
    models = {
        "default": revseq.inline(native),
        "own target": chosen,
        "gather_elements": other,
        "gather_rows": revseq.inline(native, strategy="gather_rows", target="onnxruntime"),
        "gather_nd": "refused",
    }
    distinct, repeats = _timing.distinct_models(models)
    assert repeats == {"gather_rows": "own target"}
    assert list(distinct) == ["default", "own target", "gather_elements", "gather_nd"]

    prepared: list[onnx.ModelProto] = []
    real = revseq.backends.get("onnxruntime")

    class Counting:
        resident = False

        def prepare(self, model, **kw):
            prepared.append(model)
            return real.prepare(model, **kw)

    backend = Counting()
    feeds = _cases.input_arrays(case, np.random.default_rng(0))
    _, identities = floor.floor_runners(real, case, feeds["x"])
    result, notes, nodes = floor.time_on_floor(
        backend, identities, feeds, models, rounds=3, budget_s=0.01
    )
    assert len(prepared) == _timing.PLACEMENTS * 3  # default, own target, gather_elements
    assert result["gather_rows"] == result["own target"]
    assert nodes["gather_rows"] == nodes["own target"]
    assert notes == {"gather_nd": "refused"}
    assert list(result) == ["Identity", "default", "own target", "gather_elements",
                            "gather_rows", "memcpy"]  # fmt: skip


def test_backend_pages_say_what_their_columns_hold(tmp_path):
    """A backend's page is read against its copy floor, not onnxruntime's native kernel."""
    page = tmp_path / "speed.md"
    argv = ["--backend", "onnxruntime", "--shape", "2000,16", "--dims", "static"]
    assert bench.main([*argv, "--rounds", "3", "--budget", "0.05", "--write", str(page)]) == 0
    text = page.read_text()
    assert "over the **copy floor**" in text and "`own target`" in text
    assert "ratio to the native kernel" not in text
    suite = tmp_path / "benchmark.md"
    argv = ["--quick", "--shape", "2000,16", "--dims", "static", "--speed-only"]
    assert bench.main([*argv, "--rounds", "3", "--budget", "0.05", "--write", str(suite)]) == 0
    assert "ratio to the native kernel" in suite.read_text()


@pytest.mark.parametrize(
    "backend", [lambda: backends.get("onnxruntime"), HoldsFloat16], ids=["exact", "float16"]
)
def test_a_variant_with_wrong_values_is_not_timed_and_the_page_says_so(backend):
    """RKNN's own op is wrong on rows of length 0: its time would flatter a wrong kernel.
    RKNN's page is in float32, which it holds as float16: an output exact to what it holds
    is timed (``float16``)."""
    case = _cases.Case((6, 4, 3), 1, 0, "float32")
    feeds = _cases.input_arrays(case, np.random.default_rng(0))
    feeds["lens"] = np.array([0, 6, 2, 1])
    right = revseq.inline(_cases.native_model(case))
    wrong = revseq.inline(_cases.native_model(case, np.array([3, 6, 2, 1])))
    result, notes, _ = floor.time_pass(
        backend(), case, feeds, {"default": right, "wrong": wrong}, rounds=3, budget_s=0.05
    )
    assert "default" in result and "default" not in notes
    assert notes["wrong"] == "wrong values"


class _NoIdentity:
    """A backend that refuses a model of one Identity, as pnnx does."""

    def __init__(self):

        self.real = backends.get("onnxruntime")
        self.refused = 0

    def prepare(self, model, *, repeated=False):
        from revseq.backends import BackendError

        if [n.op_type for n in model.graph.node] == ["Identity"]:
            self.refused += 1
            raise BackendError("fake", "convert", "an empty graph")
        return self.real.prepare(model, repeated=repeated)


def test_the_floor_is_the_backend_s_neg_where_it_runs_no_identity():
    from bench import _backend_bench as bb

    case = _cases.Case((6, 4, 3), 1, 0, "float32")
    x = np.random.default_rng(0).standard_normal((6, 4, 3)).astype(np.float32)
    backend = _NoIdentity()
    label, runners = floor.floor_runners(backend, case, x)
    assert label == "Neg" and backend.refused == 1 and len(runners) == _timing.PLACEMENTS
    row = {
        "case": case,
        "dims": "static",
        "result": {"Neg": (1e-3, 1.0), "memcpy": (1e-3, 0.5), "default": (0, 2.0)},
        "notes": {},
        "nodes": {"default": 7},
    }
    table = bb.format_backend("fake 1.0", [row])
    assert "(Neg)" in table and "finite target" not in table  # no finite target: no column


def test_a_page_is_in_a_type_the_backend_s_target_moves_and_cells_stay_short():
    from bench import _backend_bench as bb
    from revseq.errors import stable_line

    assert {c.dtype for c in bb.backend_suite("onnxruntime")} == {"float32"}
    assert {c.dtype for c in bb.backend_suite("rknn")} == {"float32"}  # to float16 storage
    assert {c.dtype for c in bb.backend_suite("nnapi")} == {"float32"}
    assert {c.dtype for c in bb.backend_suite("no-such-backend")} == {"float32"}
    note = "rknn: run failed: " + "x" * 300
    row = {
        "case": None,
        "dims": "static",
        "result": {},
        "notes": {"default": note},
        "nodes": {},
    }
    (cell,) = bb.ratio_cells(row, ["default"], lambda name: None)
    assert len(cell) <= 100 and cell.endswith("…")
    logged = "killed by SIGSEGV (E RKNN: [11:08:10.327] Meet unsupported tensor dtype in Mul)"
    assert (
        stable_line(logged)
        == "killed by SIGSEGV (E RKNN: Meet unsupported tensor dtype in Mul)"
    )
