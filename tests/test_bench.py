"""The benchmark's helpers: what they time is what the user calls, and what they count."""

from __future__ import annotations

import onnx
import pytest

import revseq
from revseq import bench


def test_time_passes_runs_the_public_api_both_ways():
    timing = bench.time_passes("chain", bench.chain_model(3))
    assert timing.nodes == 6
    assert timing.restored == 3  # the inlined chain restored by revseq.restore
    for seconds in (timing.round_trip, timing.inline_api, timing.restore_api):
        assert seconds > 0
    table = bench.format_passes([timing])
    assert table.splitlines()[2].startswith("| chain | 6 |")


def test_large_model_has_the_requested_size():
    model = bench.large_model(count=2, total=50)
    assert model.graph.num_nodes() == 50
    assert sum(n.op_type == "ReverseSequence" for n in model.graph) == 2


def test_suite_holds_the_issue_shapes_and_native_models_are_valid():
    shapes = {case.shape for case in bench.SUITE}
    assert {(2000, 16), (1000, 8, 1)} <= shapes
    for case in bench.SUITE[:2]:
        model = bench.native_model(case)
        onnx.checker.check_model(model)
        inlined = revseq.inline(model)
        assert bench.extra_bytes(inlined) >= 0


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
