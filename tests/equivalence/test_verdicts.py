"""Verdicts a user can trust, on models like the ones people have.

The fixtures (``tests/fixtures/make_verdict_models.py``) model tf2onnx exports: two
full-length flips of 300 steps whose lengths are ``Shape(x)[time]``, a time-major
export with its batch baked to 1, a model whose output holds NaN, an image model. Every
way a user can inline them checks OK (or is refused in one line), restore after inline
is proven (never called inconclusive), a fault planted in one reversal is named on
every runtime, and a runtime that rounds differently is told apart from a wrong rewrite.
"""

from __future__ import annotations

import json

import helpers
import numpy as np
import onnx
import pytest
from helpers import installed_or_skip

import revseq
from revseq.cli import main

FIXTURES = helpers.FIXTURES
MODELS = [
    "verdict_full_flips",
    "verdict_time_major_batch1",
    "verdict_nan_output",
    "verdict_image_reader",
]
# And every tf2onnx export the other tests run on (tests/fixtures/make_tf_models.py).
EXPORTS = [*MODELS, *sorted(p.stem for p in FIXTURES.glob("tf_*.onnx"))]
WAYS = [("strategy", s) for s in revseq.STRATEGIES] + [("target", t) for t in revseq.TARGETS]
RUNTIMES = [
    "onnxruntime",
    *(
        pytest.param(name, marks=pytest.mark.backend)
        for name in (
            "tract",
            "opencv",
            "ncnn",
            "onnx2torch",
            "tvm",
            "openvino",
            "rknn",
            "webgpu",
        )
    ),
]


def _load(name: str) -> onnx.ModelProto:
    return onnx.load(FIXTURES / f"{name}.onnx")


def _reversal_outputs(model: onnx.ModelProto) -> list[str]:
    return [n.output[0] for n in model.graph.node if n.op_type == "ReverseSequence"]


def planted(reference: onnx.ModelProto, inlined: onnx.ModelProto) -> onnx.ModelProto:
    """``inlined`` with its last reversal wrong, its shapes kept.

    A flip by a constant index (a step -1 Slice, a Gather of a constant) becomes an
    Identity; a decomposition by run-time lengths gets the first Sub of its index with
    its inputs swapped.
    """
    bad = onnx.ModelProto()
    bad.CopyFrom(inlined)
    output = _reversal_outputs(reference)[-1]
    name = next(n.name for n in reference.graph.node if n.output[0] == output)
    constants = {i.name for i in bad.graph.initializer}
    constants |= {o for n in bad.graph.node if n.op_type == "Constant" for o in n.output}
    node = next(n for n in bad.graph.node if n.output[0] == output)
    if node.op_type == "Slice" or (node.op_type == "Gather" and node.input[1] in constants):
        data = node.input[0]
        node.op_type = "Identity"
        del node.input[:], node.attribute[:]
        node.input.append(data)
        return bad
    sub = next(n for n in bad.graph.node if n.op_type == "Sub" and n.name.startswith(name))
    sub.input[0], sub.input[1] = sub.input[1], sub.input[0]
    return bad


@pytest.mark.parametrize("name", EXPORTS)
def test_every_way_to_inline_checks_ok_or_is_refused_in_one_line(name):
    """Each strategy and each target (one test per model: they share its checks' cost)."""
    model = _load(name)
    for kind, value in WAYS:
        try:
            inlined = revseq.inline(model, **{kind: value})
        except revseq.StrategyError as e:
            assert kind == "target" and len(str(e).splitlines()) == 1
            continue
        report = revseq.check(model, inlined)
        assert report.verdict == "OK", (kind, value, report)


@pytest.mark.parametrize("name", EXPORTS)
def test_a_decomposition_as_a_function_is_fed_only_the_lengths_its_model_gives(name):
    """A full flip's function ignores its lengths: the model's are always T."""
    model = _load(name)
    inlined = revseq.inline(model, as_function=True)
    report = revseq.check(model, inlined)
    assert report.verdict == "OK", report
    assert all(node.longest >= 2 for node in report.nodes), report


@pytest.mark.parametrize("name", EXPORTS)
def test_restore_after_inline_is_proven_by_the_restored_nodes_own_reversals(name):
    model = _load(name)
    inlined = revseq.inline(model)
    restored = revseq.restore(inlined)
    assert len(_reversal_outputs(restored)) == len(_reversal_outputs(model))
    report = revseq.check(inlined, restored)
    assert report.verdict == "OK" and report.exercised, report


def test_the_cli_proves_a_restore_of_300_step_flips(tmp_path, capsys):
    model = _load("verdict_full_flips")
    onnx.save(revseq.inline(model), tmp_path / "inlined.onnx")
    code = main(["restore", str(tmp_path / "inlined.onnx"), "-o", str(tmp_path / "r.onnx"),
                 "--check", "-q"])  # fmt: skip
    assert code == 0, capsys.readouterr()
    code = main(["check", str(tmp_path / "inlined.onnx"), str(tmp_path / "r.onnx"), "-q"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("OK:") and "bit-identical" in out, out


def test_a_time_major_export_with_its_batch_baked_to_1_is_checked_at_full_length():
    """Its Squeeze runs at batch 1 only: the batch is set to 1, the time dim is not."""
    model = _load("verdict_time_major_batch1")
    report = revseq.check(model, revseq.inline(model))
    assert report.verdict == "OK", report
    ones = [line for line in report.inputs if line.startswith("dims set to 1")]
    assert ones and all("batch" in line and "steps" not in line for line in ones), ones
    assert report.nodes[0].longest >= 2


def test_nan_in_both_outputs_is_no_difference_across_runtimes():
    model = _load("verdict_nan_output")
    report = revseq.check(model, revseq.inline(model), backend="onnxruntime", whole_model=True)
    assert report.verdict == "OK", report
    assert report.largest and report.largest[0].absolute == 0.0


def test_floats_are_drawn_in_0_1_across_runtimes_unless_a_range_is_given():
    model = _load("verdict_image_reader")
    inlined = revseq.inline(model)
    report = revseq.check(model, inlined, backend="onnxruntime", whole_model=True)
    assert report.verdict == "OK", report
    said = next(line for line in report.inputs if line.startswith("input image"))
    assert "generated in [0, 1]" in said and "--val-range image:[LO,HI]" in said
    report = revseq.check(
        model, inlined, backend="onnxruntime", whole_model=True, value_ranges={"image": (2, 3)}
    )
    assert any("[2, 3] (value range given)" in line for line in report.inputs)


# What each runtime makes of each fixture's default output, whole: "ok", or the words of
# its verdict or one-line error (whose op it is). The default is not meant for ncnn (its
# own target at fixed shapes is) nor RKNN's int32 arithmetic (its target is int64).
WHOLE = {
    "verdict_full_flips": {
        "ncnn": "every reversal made an Identity: revseq's",
        "rknn": "RUNTIME-DIFFERS: ",  # its float16 MatMul, beyond even float16's tolerance
    },
    "verdict_time_major_batch1": {
        "tract": "Squeeze 'model/rnn/Squeeze' (the model's own)",
        "tvm": "the model's own ops, first at Squeeze 'model/rnn/Squeeze'",
        "ncnn": "revseq's decomposition of node model/rnn/ReverseV2 in main differs alone "
        "on ncnn",
    },
    "verdict_nan_output": {
        "ncnn": "the runtime names Gather (written by revseq)",
        "rknn": "RKNN's build crashes on int32 Less",
    },
    "verdict_image_reader": {},
}


# Each decomposition alone on each runtime (check --backend): "ok", or the words of its
# verdict or error. ncnn's pnnx drops a batch of 1 at symbolic dims: its own target at
# fixed shapes is what runs there.
ALONE = {
    "verdict_full_flips": {"ncnn": "differs in dtype/shape"},
    "verdict_time_major_batch1": {"ncnn": "differs in dtype/shape"},
    "verdict_nan_output": {
        "ncnn": "pnnx wrote layers ncnn lacks",
        "rknn": "RKNN's build crashes on int32 Less",
    },
    "verdict_image_reader": {},
}


@pytest.mark.parametrize("whole", [False, True], ids=["alone", "whole"])
@pytest.mark.parametrize(
    "runtime", [*RUNTIMES, pytest.param("x2paddle", marks=pytest.mark.backend)]
)
@pytest.mark.parametrize("name", MODELS)
def test_each_runtime_gets_the_true_verdict(name, runtime, whole):
    """``check --backend`` (each decomposition alone) and ``--whole-model``, per runtime."""
    installed_or_skip(runtime)
    model = _load(name)
    expected = (WHOLE if whole else ALONE)[name].get(runtime, "ok")
    options = {"whole_model": True} if whole else {"trials": 2}
    if whole and runtime == "rknn":
        options.update(rtol=1e-2, atol=1e-3)  # it holds float32 as float16
    try:
        report = revseq.check(model, revseq.inline(model), backend=runtime, **options)
    except revseq.RevseqError as e:
        assert expected in str(e) and len(str(e).splitlines()) == 1, e
        return
    said = f"{report.verdict}: {report.message}"
    if expected != "ok":
        assert expected in said, report
        return
    assert said.startswith("OK: "), report
    assert whole or all(n.longest >= 2 for n in report.nodes), report


@pytest.mark.parametrize(
    "runtime", [*RUNTIMES, pytest.param("x2paddle", marks=pytest.mark.backend)]
)
@pytest.mark.parametrize("name", ["verdict_full_flips", "verdict_nan_output"])
def test_a_fault_planted_in_one_reversal_is_named_on_every_runtime(name, runtime):
    installed_or_skip(runtime)
    model = _load(name)
    bad = planted(model, revseq.inline(model))
    report = revseq.check(model, bad, backend=runtime, whole_model=True)
    assert report.verdict == "DIFFERENT", report
    node = next(n.name for n in model.graph.node if n.op_type == "ReverseSequence" and
                n.output[0] == _reversal_outputs(model)[-1])  # fmt: skip
    assert node in report.message and "differs" in report.message, report


def test_check_json_is_one_document_a_script_can_gate_on(tmp_path, capsys):
    model = _load("verdict_full_flips")
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(revseq.inline(model), tmp_path / "good.onnx")
    onnx.save(planted(model, revseq.inline(model)), tmp_path / "bad.onnx")
    for cand, verdict, code in (("good", "OK", 0), ("bad", "DIFFERENT", 1)):
        got = main(["check", str(tmp_path / "m.onnx"), str(tmp_path / f"{cand}.onnx"),
                    "--json", "-q", "--trials", "1"])  # fmt: skip
        document = json.loads(capsys.readouterr().out)
        assert got == code == document["exit_code"] and document["verdict"] == verdict
        assert document["exit_meaning"] and document["versions"]["revseq"]
        assert {"nodes", "inputs", "largest_errors", "first_difference", "blame"} <= set(
            document
        )
    assert document["first_difference"]["output"] == "tags"
    got = main(["inline", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx"),
                "--check", "--json", "-q", "--trials", "1"])  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert got == 0 and document["verdict"] == "OK"
    assert document["written"] == str(tmp_path / "o.onnx")
    assert [n["verdict"] for n in document["nodes"]] == ["OK", "OK"]
    got = main(["check", str(tmp_path / "m.onnx"), str(tmp_path / "missing.onnx"), "--json"])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert got == 2 and document["verdict"] == "ERROR" and "missing.onnx" in document["error"]
    assert len([line for line in captured.err.splitlines() if "error" in line]) == 1


def test_every_whole_model_report_says_its_largest_errors():
    model = _load("verdict_image_reader")
    report = revseq.check(model, revseq.inline(model), backend="onnxruntime", whole_model=True)
    assert "largest error: 'chars': largest absolute error 0" in str(report), report


@pytest.mark.backend
def test_a_runtime_that_rounds_otherwise_is_told_apart_from_a_wrong_rewrite(tmp_path, capsys):
    """tract's MatMul rounds its last bit otherwise: with no tolerance, that is tract's."""
    installed_or_skip("tract")
    model = onnx.load(FIXTURES / "tf_crnn_reader.onnx")
    shapes = {"image": [1, 40, 16, 1]}
    report = revseq.check(model, revseq.inline(model), backend="tract", whole_model=True,
                          input_shapes=shapes, rtol=0, atol=0)  # fmt: skip
    assert report.verdict == "RUNTIME-DIFFERS", report
    assert (
        "revseq's part is exact" in report.message and "the model's own ops" in report.message
    )
    assert report.largest and 0 < report.largest[0].absolute < 1e-5
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(revseq.inline(model), tmp_path / "i.onnx")
    code = main(["check", str(tmp_path / "m.onnx"), str(tmp_path / "i.onnx"), "-q",
                 "--backend", "tract", "--whole-model", "--input-shapes", "image:[1,40,16,1]",
                 "--rtol", "0", "--atol", "0"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 4 and out.startswith("RUNTIME-DIFFERS"), out
    # Within the default tolerance, the same check is OK and says its largest errors.
    code = main(
        [
            "check",
            str(tmp_path / "m.onnx"),
            str(tmp_path / "i.onnx"),
            "-q",
            "--backend",
            "tract",
            "--whole-model",
            "--input-shapes",
            "image:[1,40,16,1]",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "largest error: 'dense_1'" in out, out


def test_the_largest_errors_count_nan_against_nan_as_none():
    from revseq.equivalence.reports import first_difference_beyond, largest

    a = np.array([1.0, np.nan, np.inf, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.inf, 2.5], np.float32)
    measured = largest("y", a, b)
    assert measured.absolute == 0.5 and measured.relative == 0.25
    assert first_difference_beyond(a[:3], b[:3], rtol=0, atol=0) is None
    assert largest("y", a, np.array([1.0, 0.0, np.inf, 2.0], np.float32)).absolute == np.inf


def test_input_options_without_check_are_refused_naming_the_fix(tmp_path, capsys):
    onnx.save(_load("verdict_full_flips"), tmp_path / "m.onnx")
    code = main(["inline", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx"),
                 "--input-shapes", "ids:[2,300]"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "o.onnx").exists()
    assert "--overwrite-input-shape ids:[2,300]" in err and len(err.splitlines()) == 1, err
    code = main(["restore", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx"),
                 "--dims", "batch=2"])  # fmt: skip
    assert code == 2 and "add --check" in capsys.readouterr().err


def test_info_describes_a_model_onnx_s_checker_fails_and_warns(tmp_path, capsys):
    """A tf2onnx export may hold an op of another framework (CudnnRNN)."""
    model = _load("verdict_time_major_batch1")
    model.graph.node.append(onnx.helper.make_node("CudnnRNN", ["y"], ["z"]))
    onnx.save(model, tmp_path / "m.onnx")
    code = main(["info", str(tmp_path / "m.onnx")])
    captured = capsys.readouterr()
    assert code == 0 and "ReverseSequence nodes: 1" in captured.out, captured
    assert "warning" in captured.err and "CudnnRNN" in captured.err


def test_int32_lengths_tensorflows_flavour_inline_into_valid_onnx(tmp_path, capsys):
    from revseq.ops.reference import reverse_sequence_model

    model = reverse_sequence_model(
        ["T", "B", 3], onnx.TensorProto.FLOAT, lens_elem=onnx.TensorProto.INT32
    )
    inlined = revseq.inline(model)
    onnx.checker.check_model(inlined, full_check=True)
    report = revseq.check(model, inlined)
    assert report.verdict == "OK", report
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["info", str(tmp_path / "m.onnx")]) == 0
    assert "TensorFlow's flavour" in capsys.readouterr().out
    assert main(["check", str(tmp_path / "m.onnx"), "--per-node", "-q"]) == 0


def test_ncnn_s_target_refuses_a_flip_whose_batch_of_1_pnnx_may_drop_unproven():
    """pnnx converts at fixed sizes and drops a batch of 1: a symbolic batch is refused."""
    model = onnx.load(FIXTURES / "tf_go_backwards.onnx")
    with pytest.raises(revseq.StrategyError, match=r"--overwrite-input-shape"):
        revseq.inline(model, target="ncnn")
    fixed = revseq.inline(model, target="ncnn", input_shapes={"x": [1, 10, 4]})
    flips = [n.op_type for n in fixed.graph.node if "ReverseV2" in n.name]
    assert flips == ["Transpose", "Slice", "Transpose"], flips


def test_whole_models_that_agree_where_nothing_reversed_2_steps_are_inconclusive(tmp_path):
    """Across runtimes too: an identity agrees with a reversal of 1 step."""
    from revseq.ops.reference import reverse_sequence_model

    model = reverse_sequence_model([1, "B", 3], onnx.TensorProto.FLOAT)
    report = revseq.check(model, revseq.inline(model), backend="onnxruntime", whole_model=True)
    assert report.verdict == "INCONCLUSIVE" and "cannot tell a reversal" in report.message
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(revseq.inline(model), tmp_path / "i.onnx")
    code = main(["check", str(tmp_path / "m.onnx"), str(tmp_path / "i.onnx"), "-q",
                 "--backend", "onnxruntime", "--whole-model"])  # fmt: skip
    assert code == 3


def test_lengths_an_exporter_cast_from_int32_are_varied_where_the_form_reads_them():
    """tf2onnx casts TensorFlow's int32 lengths; the form reads the int32 input itself."""
    model = _load("tf_reverse_sequence_opset13")
    report = revseq.check(model, revseq.inline(model), trials=2)
    assert report.verdict == "OK", report
    assert report.nodes[0].runs > 2 and report.nodes[0].longest >= 2, report


def test_the_inputs_of_a_difference_are_saved_and_fed_back(tmp_path, capsys):
    model = _load("verdict_full_flips")
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(planted(model, revseq.inline(model)), tmp_path / "bad.onnx")
    saved = tmp_path / "inputs.npz"
    code = main(["check", str(tmp_path / "m.onnx"), str(tmp_path / "bad.onnx"),
                 "--save-inputs", str(saved)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and f"--input {saved} feeds them back" in err, err
    with np.load(saved, allow_pickle=False) as arrays:
        assert set(arrays.files) == {"ids"} and arrays["ids"].shape[1] == 300
    code = main(["check", str(tmp_path / "m.onnx"), str(tmp_path / "bad.onnx"), "-q",
                 "--input", str(saved)])  # fmt: skip
    assert code == 1 and "trials: 1" in capsys.readouterr().out
    good = tmp_path / "good.onnx"
    onnx.save(revseq.inline(model), good)
    code = main(["check", str(tmp_path / "m.onnx"), str(good), "--trials", "1",
                 "--save-inputs", str(tmp_path / "none.npz")])  # fmt: skip
    assert code == 0 and not (tmp_path / "none.npz").exists()
    assert "nothing written" in capsys.readouterr().err


def test_a_difference_only_a_decomposition_alone_shows_saves_no_inputs(tmp_path, capsys):
    """Its lengths of 2 or more come from the node check, not from the whole model's."""
    model = _load("verdict_nan_output")
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(planted(model, revseq.inline(model)), tmp_path / "bad.onnx")
    code = main(["check", str(tmp_path / "m.onnx"), str(tmp_path / "bad.onnx"),
                 "--save-inputs", str(tmp_path / "in.npz")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1 and captured.out.startswith("DIFFERENT: node ReverseSequence"), captured
    assert "the difference is in a decomposition run alone" in captured.err
    assert not (tmp_path / "in.npz").exists()
