"""``revseq probe`` on onnxruntime: what it certifies and times, what it keeps."""

from __future__ import annotations

import dataclasses
import json

import pytest

from revseq.cli import main
from revseq.ops.targets import TARGETS
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import WHERE_BROADCAST_ELSE

# The op probes trace the forms once per process: the tests that read them share one.
pytestmark = pytest.mark.xdist_group("op_probes")


@pytest.fixture(scope="module")
def probed_once():
    """The probes' findings on onnxruntime, found once for the tests that read them.

    The tests below probe the same backend through ``probe_backend`` and the command
    line: each run serves ``_Probed.run`` from here (the probes' results, not their
    timings: those tests time or keep costs themselves). Returns the names probed, in
    the order asked."""
    from revseq.probe import backend as probe_module

    run, found, asked = probe_module._Probed.run.__func__, {}, []

    def once(cls, name, backend, say):
        asked.append(name)
        if name not in found:
            found[name] = run(cls, name, backend, say)
        return found[name]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probe_module._Probed, "run", classmethod(once))
        yield asked


def test_probe_on_onnxruntime_matches_its_shipped_profile_and_times_the_forms(
    capsys, monkeypatch, probed_once
):
    """What ``revseq probe onnxruntime`` measures here is what ships (ops, types, forms),
    and each form that ran gets a cost per shape class (values are not asserted, so the
    forms are timed on small cases: the probe's own reach 16 MiB)."""
    from revseq.measure import costs as costs_module
    from revseq.measure import layouts
    from revseq.measure._cases import Case
    from revseq.probe import backend as probe_module

    def small(*shapes: tuple[int, ...]) -> tuple[Case, ...]:
        return tuple(Case(shape, 1, 0, "float32") for shape in shapes)

    monkeypatch.setattr(
        costs_module, "COST_CASES", small((20, 4, 8), (16, 8, 16), (32, 8, 16))
    )
    monkeypatch.setattr(costs_module, "MATRIX_CASES", small((200, 4), (256, 8), (512, 16)))
    monkeypatch.setattr(layouts, "LAYOUT_CASES", small((100, 1, 16), (40, 8, 16)))
    monkeypatch.setattr(layouts, "LAYOUT_MATRIX_CASES", small((800, 1), (200, 16)))
    # The probes run once: ``revseq probe --no-costs`` below reads what they found.
    asked = len(probed_once)
    probed, results = probe_module.probe_backend("onnxruntime")
    shipped = TARGETS["onnxruntime"]
    if probed.backend_version == shipped.backend_version:  # another release may differ
        # What no form emits any more is no longer probed; the shipped profile, probed
        # when it was, still lists it.
        retired = {WHERE_BROADCAST_ELSE, "ReduceProd"}
        assert (probed.static_ops, probed.dynamic_ops) == (
            shipped.static_ops - retired,
            shipped.dynamic_ops - retired,
        )
        assert probed.dtypes == shipped.dtypes and probed.forms == shipped.forms
    assert any("Index:int32" in r.certifies and not r.failure for r in results)
    assert probed.costs is not None
    assert set(probed.costs) == {"static", "time+batch", "all", "matrix", "matrix:static"}
    for kind, class_costs in probed.costs.items():
        ran = probed.forms["static" if kind.endswith("static") else "dynamic"]
        timed = ran & costs_module.MATRIX_FORMS if kind.startswith("matrix") else ran
        assert set(class_costs) == timed
        assert all(c.ratio > 0 and c.nodes > 0 for c in class_costs.values())
    # The index layout timed per class, on batches of 1 to 256 (values not asserted).
    assert set(probed.layouts or {}) <= set(probed.costs) and probed.layouts
    assert all(
        lay.swapped_ratio > 0 and lay.in_place_ratio > 0 for lay in probed.layouts.values()
    )
    assert probed.node_cost is not None and probed.node_cost >= 0  # a node, timed
    again = Profile.from_json(json.loads(json.dumps(probed.to_json())))
    assert again.costs == probed.costs and again.layouts == probed.layouts
    assert again.node_cost == probed.node_cost
    assert main(["probe", "onnxruntime", "--no-costs", "--json"]) == 0
    assert "costs" not in json.loads(capsys.readouterr().out)
    assert probed_once[asked:] == ["onnxruntime", "onnxruntime"]  # each run probed it


def test_a_gather_moves_a_type_where_it_ran_with_its_index_constant_and_at_run_time():
    """Each gather's type probe runs twice, its index a constant and an input: a backend
    may take another kernel for each (tinygrad 0.14's float16 Gather quiets a signalling
    NaN with a run-time index only), and the forms feed both."""
    from revseq.backends import get
    from revseq.probe._runs import ProbeResult, moved, run_dtype_probes

    results = run_dtype_probes(get("onnxruntime"))
    passed = {r.certifies for r in results if r.failure is None}
    assert len(results) == len(passed) + len({r.certifies for r in results})
    assert {r.name for r in results} >= {"Gather[float16]", "Gather[float16] (run-time index)"}
    ok = ProbeResult("Gather[float16]", "static", ("Gather", "float16"), None)
    quieted = dataclasses.replace(ok, name="Gather[float16] (run-time index)", failure="x")
    other = ProbeResult("GatherND[float16]", "static", ("GatherND", "float16"), None)
    assert moved([ok, quieted, other]) == {("GatherND", "float16")}


def test_probe_keeps_the_saved_costs_of_the_same_version_only(capsys, probed_once):
    """``--keep-costs`` probes what runs anew and keeps the shipped timings; a saved
    profile of another version has its costs refused, in one line."""
    from revseq.probe.backend import ProbeError, probe_backend

    shipped = TARGETS["onnxruntime"]
    asked = len(probed_once)
    assert main(["probe", "onnxruntime", "--keep-costs", "--json"]) == 0
    assert probed_once[asked:] == ["onnxruntime"]
    kept = Profile.from_json(json.loads(capsys.readouterr().out))
    assert kept.costs == shipped.costs
    assert kept.layouts == shipped.layouts  # timed on the output the kept costs choose
    assert kept.forms == shipped.forms
    assert kept.node_cost == shipped.node_cost is not None
    older = dataclasses.replace(shipped, backend_version="onnxruntime 0.1")
    with pytest.raises(ProbeError, match=r"probed with onnxruntime 0\.1"):
        probe_backend("onnxruntime", keep=older)


def test_forms_are_probed_in_a_type_the_backend_moves():
    """An NPU that stores float32 as float16 (RKNN) moves float32 (to that storage) with
    GatherND alone: the other forms are probed in int32, which their gathers move, so
    their index and ops are still certified."""
    from revseq.probe._runs import form_probe_types

    assert form_probe_types(TARGETS["onnxruntime"])[0] == "float32"
    only_int64 = dataclasses.replace(
        TARGETS["onnxruntime"], dtypes={"Gather": frozenset({"int64"})}
    )
    assert form_probe_types(only_int64) == ["int64"]
    rknn = TARGETS["rknn"]
    assert form_probe_types(rknn)[:2] == ["float32", "int32"]
    assert {"gather_rows", "gather_nd"} <= rknn.forms["static"]
