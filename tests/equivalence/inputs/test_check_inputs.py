"""The check on models shaped like real ones, and on the inputs a user gives it."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from real_models import (
    CORPUS,
    bidirectional_ids,
    broadcast_of_two_dims,
    computed_features,
    conv_front_end,
    embedding_tagger,
    int32_ids_through_cast,
    two_time_lengths,
)

import revseq
from revseq.cli import main
from revseq.equivalence import generate_inputs
from revseq.equivalence._runners import Capturer
from revseq.equivalence.inputs import InputGenerator
from revseq.equivalence.inputs.sizes import GivenInputs
from revseq.equivalence.inputs.values import covering_lengths
from revseq.equivalence.reports import first_difference
from revseq.ops.reference import reverse_sequence_model


@pytest.fixture(scope="module")
def inlined() -> dict[str, tuple[onnx.ModelProto, onnx.ModelProto]]:
    return {name: (build(), revseq.inline(build())) for name, build in CORPUS.items()}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_check_gives_a_verdict_without_any_flag(name, inlined):
    model, candidate = inlined[name]
    report = revseq.check(model, candidate)
    assert report.ok, report
    assert report.exercised, report
    assert "ReverseSequence" not in {n.op_type for n in candidate.graph.node}
    # Each runs at sizes above 1 (grown where it needs more): none is shrunk to 1.
    assert "dims set to 1" not in str(report), report


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_command_gives_a_verdict(name, inlined, tmp_path, capsys):
    model, candidate = inlined[name]
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(candidate, tmp_path / "c.onnx")
    assert main(["check", str(tmp_path / "m.onnx"), str(tmp_path / "c.onnx"), "-q"]) == 0
    assert main(["check", str(tmp_path / "m.onnx"), "--per-node", "-q"]) == 0
    out = tmp_path / "out.onnx"
    assert main(["inline", str(tmp_path / "m.onnx"), "-o", str(out), "--check", "-q"]) == 0
    assert out.exists()
    capsys.readouterr()


def test_token_ids_stay_within_the_embedding_they_index():
    for trial in range(3):
        ids = generate_inputs(embedding_tagger(), trial, seed=0)["ids"]
        assert ids.dtype == np.int64
        assert ids.min() >= 0 and ids.max() <= 99
    report = revseq.check(embedding_tagger(), revseq.inline(embedding_tagger()))
    assert any("[0, 99]" in line and "'emb'" in line for line in report.inputs), report


def test_token_ids_span_exactly_the_rows_of_the_embedding():
    generator = InputGenerator(
        [embedding_tagger()], capture=Capturer(), given=GivenInputs(dims={"T": 64, "B": 8})
    )
    ids = generator.trial(0)["ids"]
    assert (ids.min(), ids.max()) == (0, 99)


def test_int32_ids_through_a_cast_and_a_reshape_stay_within_the_embedding():
    model = int32_ids_through_cast()
    generator = InputGenerator(
        [model], capture=Capturer(), given=GivenInputs(dims={"time": 32, "batch": 4})
    )
    ids = generator.trial(0)["ids"]
    assert ids.dtype == np.int32 and (ids.min(), ids.max()) == (0, 29)
    # A Cast between integer types moves ids unchanged: no arithmetic on the way.
    from revseq.equivalence.inputs.uses import index_uses

    (use,) = index_uses(ir.from_proto(model))["ids"]
    assert use.through is None and "through" not in use.describe()


def test_reversed_token_ids_stay_within_the_embedding():
    feeds = generate_inputs(bidirectional_ids(), 1, seed=0)
    assert feeds["ids"].max() <= 49 and feeds["ids"].min() >= 0
    assert feeds["lengths"].dtype == np.int32
    assert feeds["lengths"].shape == (feeds["ids"].shape[0],)


def test_special_floats_only_where_they_reach_a_reversal():
    feeds = generate_inputs(computed_features(), 0, seed=0)
    assert np.isfinite(feeds["features"]).all()
    assert np.isnan(feeds["skip"]).any() or feeds["skip"].size < 4
    model = computed_features()
    report = revseq.check(model, revseq.inline(model))
    assert report.ok and report.exercised


def test_a_symbolic_dim_grows_where_a_kernel_needs_it_and_the_report_says_so():
    model = conv_front_end()
    report = revseq.check(model, revseq.inline(model))
    assert report.ok and report.exercised, report
    grown = [line for line in report.inputs if line.startswith("dims grown")]
    assert grown and "samples 1 ->" in grown[0] and "Conv" in grown[0], report.inputs


def test_dims_named_apart_but_broadcast_together_are_made_equal():
    model = broadcast_of_two_dims()
    report = revseq.check(model, revseq.inline(model))
    assert report.ok and report.exercised, report
    # One dim raised to the other's size; the batch dim keeps its drawn sizes.
    assert "dim B: 1, 4, 2" in report.inputs, report.inputs
    assert "dim T1: 4, 4, 5" in report.inputs, report.inputs


def test_broadcast_of_two_symbolic_dims_is_no_full_reversal():
    """T1 = 1, T2 = 4: lengths of 1 reverse nothing; a full reversal would be wrong."""
    model = broadcast_of_two_dims()
    candidate = revseq.inline(model)
    report = revseq.check(model, candidate, dims={"T1": 1, "T2": 4})
    assert report.ok, report
    a = np.zeros((1, 2), np.float32)
    b = np.arange(8, dtype=np.float32).reshape(4, 2) * 2
    expected = onnx.reference.ReferenceEvaluator(model).run(None, {"a": a, "b": b})[0]
    got = onnx.reference.ReferenceEvaluator(candidate).run(None, {"a": a, "b": b})[0]
    assert got[:, 0].tolist() == expected[:, 0].tolist() == [0, 4, 8, 12]


def test_lengths_feeding_two_reversals_stay_within_the_shorter():
    model = two_time_lengths()
    for trial in range(3):
        feeds = generate_inputs(model, trial, seed=0)
        assert feeds["lens"].max() <= min(3, feeds["x"].shape[0])
    report = revseq.check(model, revseq.inline(model), trials=5)
    assert report.ok and report.exercised, report


def test_a_comparison_tells_element_types_apart():
    got = np.array([1, 200], np.uint8)
    assert first_difference(got, got.view(np.int8)) is not None
    assert first_difference(got, got.copy()) is None


def test_check_reports_an_output_of_another_element_type():
    reference = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]> g (uint8[N] x) => (uint8[N] y) {
        y = Identity(x) }"""
    )
    candidate = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]> g (uint8[N] x) => (int8[N] y) {
        y = Cast<to = 3>(x) }"""
    )
    report = revseq.check(reference, candidate)
    assert not report.ok
    assert "dtype" in report.message


def test_given_values_are_used_and_fix_the_sizes_of_the_rest(tmp_path):
    ids = np.arange(14, dtype=np.int64).reshape(7, 2)
    model = embedding_tagger()
    generator = InputGenerator([model], capture=Capturer(), given=GivenInputs({"ids": ids}))
    feeds = generator.trial(0)
    assert feeds["ids"] is not None and np.array_equal(feeds["ids"], ids)
    assert feeds["lens"].shape == (2,) and feeds["lens"].max() <= 7
    report = revseq.check(model, revseq.inline(model), inputs={"ids": ids})
    assert report.ok and report.exercised
    assert "input ids: given" in report.inputs
    assert "dim T: 7, 7, 7 (given)" in report.inputs


def test_every_input_given_is_one_trial():
    model = embedding_tagger()
    inputs = {"ids": np.zeros((4, 2), np.int64), "lens": np.array([4, 2], np.int64)}
    report = revseq.check(model, revseq.inline(model), inputs=inputs)
    assert report.ok and report.trials == 1
    sets = [inputs, {**inputs, "lens": np.array([0, 3], np.int64)}]
    assert revseq.check(model, revseq.inline(model), inputs=sets).trials == 2


def test_dims_input_shapes_and_value_ranges():
    model = embedding_tagger()
    generator = InputGenerator(
        [model],
        capture=Capturer(),
        given=GivenInputs(
            dims={"B": 3}, input_shapes={"ids": (6, 3)}, value_ranges={"ids": (5, 9)}
        ),
    )
    feeds = generator.trial(1)
    assert feeds["ids"].shape == (6, 3)
    assert feeds["ids"].min() >= 5 and feeds["ids"].max() <= 9
    assert feeds["lens"].shape == (3,)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"inputs": {"idz": np.zeros((2, 2), np.int64)}}, "no input named 'idz'"),
        ({"dims": {"X": 3}}, "no symbolic dim 'X'"),
        ({"input_shapes": {"ids": (2,)}}, "rank 2"),
        ({"inputs": {"ids": np.zeros((2, 2), np.int32)}}, "takes int64"),
        ({"dims": {"T": 3}, "input_shapes": {"ids": (4, 2)}}, "makes 'T' 3"),
        ({"value_ranges": {"ids": (5, 1)}}, "above high"),
    ],
)
def test_what_the_user_gives_is_checked_against_the_model(kwargs, needle):
    model = embedding_tagger()
    with pytest.raises(revseq.CheckError, match=needle):
        revseq.check(model, revseq.inline(model), **kwargs)


def test_a_reference_that_cannot_run_names_the_op_the_input_and_the_flag():
    model = embedding_tagger()
    with pytest.raises(revseq.CheckError) as caught:
        revseq.check(model, revseq.inline(model), value_ranges={"ids": (0, 500)})
    message = str(caught.value)
    assert "Gather 'embed'" in message and "'ids'" in message
    assert "--val-range ids:[LO,HI]" in message
    assert "\n" not in message


def _run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_takes_input_files_dims_shapes_and_ranges(tmp_path, capsys):
    model = embedding_tagger()
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(revseq.inline(model), tmp_path / "c.onnx")
    ids = np.arange(10, dtype=np.int64).reshape(5, 2)
    np.save(tmp_path / "ids.npy", ids)
    np.savez(tmp_path / "set.npz", ids=ids, lens=np.array([5, 3], np.int64))
    m, c = tmp_path / "m.onnx", tmp_path / "c.onnx"
    code, out, _ = _run_cli(capsys, "check", m, c, "--input", f"ids={tmp_path / 'ids.npy'}")
    assert code == 0 and "input ids: given" in out and "dim T: 5, 5, 5 (given)" in out
    code, out, _ = _run_cli(capsys, "check", m, c, "--input", tmp_path / "set.npz")
    assert code == 0 and "trials: 1" in out
    code, out, _ = _run_cli(
        capsys, "check", m, c, "--dims", "T=6,B=2", "--val-range", "ids:[3,4]"
    )
    assert code == 0 and "dim T: 6, 6, 6 (given)" in out and "[3, 4]" in out
    code, out, _ = _run_cli(capsys, "check", m, c, "--input-shapes", "ids:[8,1]", "lens:[1]")
    assert code == 0 and "dim T: 8, 8, 8 (given)" in out
    code, out, err = _run_cli(capsys, "check", m, "--per-node", "--dims", "T=9")
    assert code == 0 and "check: dim T: 9, 9, 9 (given)" in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--input", "ids=missing.npy"], "no such file"),
        (["--input", "{npy}"], "name its input"),
        (["--dims", "T"], "NAME=SIZE"),
        (["--val-range", "ids:[9,1]"], "LO <= HI"),
        (["--input-shapes", "ids"], "NAME:[D0,D1,...]"),
        (["--val-range", "ids:[0,500]"], "--val-range ids:[LO,HI]"),
    ],
)
def test_cli_bad_input_options_are_one_line(tmp_path, capsys, args, needle):
    model = embedding_tagger()
    onnx.save(model, tmp_path / "m.onnx")
    onnx.save(revseq.inline(model), tmp_path / "c.onnx")
    np.save(tmp_path / "ids.npy", np.zeros((2, 2), np.int64))
    args = [a.replace("{npy}", str(tmp_path / "ids.npy")) for a in args]
    try:
        code, _, err = _run_cli(
            capsys, "check", tmp_path / "m.onnx", tmp_path / "c.onnx", *args
        )
    except SystemExit as e:  # argparse refuses a malformed option itself
        code, err = e.code, capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if "error" in line]) == 1


def test_per_node_with_a_reversal_of_one_step_is_inconclusive(tmp_path, capsys):
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[1, B, 3] x, int64[B] lens) => (float[1, B, 3] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens) }"""
    )
    onnx.save(model, tmp_path / "m.onnx")
    code, out, err = _run_cli(capsys, "check", tmp_path / "m.onnx", "--per-node")
    assert code == 3, out  # inconclusive, as from every command that checks
    assert "inconclusive" in err and "cannot tell a reversal from the identity" in err
    assert "node(s) identical" in out


@pytest.mark.parametrize("verb", ["inline", "restore"])
def test_a_model_without_the_op_is_copied_with_a_warning(tmp_path, capsys, verb):
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]> g (float[N] x) => (float[N] y) {
        y = Relu(x) }"""
    )
    onnx.save(model, tmp_path / "m.onnx")
    out = tmp_path / "out.onnx"
    code, _, err = _run_cli(capsys, verb, tmp_path / "m.onnx", "-o", out, "-q")
    assert code == 0
    assert "warning" in err and "unchanged copy" in err
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Relu"]


def test_restore_fuses_no_lengths_of_a_type_the_op_refuses():
    """A torch-style reversal whose lengths are float, cast to int64: no fusion."""
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[5, 3, 4] x, float[3] L) => (float[5, 3, 4] y)
        <int64 zero = {0}, int64 one = {1}, int64[1] ax1 = {1}, int64[1] ax2 = {2}> {
            Li = Cast<to = 7>(L)
            sx = Shape(x)
            T = Gather<axis = 0>(sx, zero)
            ti = Range(zero, T, one)
            t = Unsqueeze(ti, ax1)
            cond = Less(t, Li)
            Lm1 = Sub(Li, one)
            rev = Sub(Lm1, t)
            idx2 = Where(cond, rev, t)
            idx3 = Unsqueeze(idx2, ax2)
            idx = Expand(idx3, sx)
            y = GatherElements<axis = 0>(x, idx)
        }"""
    )
    restored = revseq.restore(model)
    assert "ReverseSequence" not in {n.op_type for n in restored.graph.node}
    as_int32 = onnx.ModelProto()
    as_int32.CopyFrom(model)
    as_int32.graph.input[1].type.tensor_type.elem_type = onnx.TensorProto.INT32
    fused = revseq.restore(as_int32)  # the same with int32 lengths: fused
    assert "ReverseSequence" in {n.op_type for n in fused.graph.node}


def test_model_files_in_a_folder_are_left_for_real_corpora(tmp_path):
    """Every corpus model also checks when loaded from a file (as the CLI reads it)."""
    for name, build in CORPUS.items():
        path = pathlib.Path(tmp_path, f"{name}.onnx")
        onnx.save(build(), path)
        assert revseq.check(path, revseq.inline(path), trials=2).ok, name


def _whole(reference: dict, candidate: dict, levels=("off", "on")):
    """``compare_whole`` on runners that return fixed outputs per level."""
    from revseq.equivalence.whole_models import compare_whole

    feeds = {"x": np.zeros(1, np.float32)}
    whole = compare_whole(
        {level: (lambda f, v=reference[level]: [v]) for level in levels},
        {level: (lambda f, v=candidate[level]: [v]) for level in levels},
        [feeds], ["y"], levels, tolerance=None, progress=None,
    )  # fmt: skip
    return whole.compared, whole.example, whole.where, whole.set_aside


def test_a_difference_the_optimiser_makes_in_the_reference_itself_is_set_aside():
    plain, optimised, other = (np.array([v], np.float32) for v in (1.0, 1.0000001, 1.0000002))
    compared, example, _, set_aside = _whole(
        {"off": plain, "on": optimised}, {"off": plain, "on": other}
    )
    assert example is None and compared == 1
    assert len(set_aside) == 1 and "'y'" in set_aside[0], set_aside


@pytest.mark.parametrize(
    "reference, candidate",
    [
        # the candidate differs with optimisations off: always a difference
        ({"off": 1.0, "on": 2.0}, {"off": 3.0, "on": 2.0}),
        # the optimiser leaves the reference as it is: the candidate's change is its own
        ({"off": 1.0, "on": 1.0}, {"off": 1.0, "on": 2.0}),
    ],
)
def test_a_difference_the_reference_does_not_share_is_reported(reference, candidate):
    as_arrays = {k: np.array([v], np.float32) for k, v in reference.items()}
    theirs = {k: np.array([v], np.float32) for k, v in candidate.items()}
    _, example, where, set_aside = _whole(as_arrays, theirs)
    assert example is not None and not set_aside, where


def test_with_optimisations_on_only_nothing_is_set_aside():
    values = {"on": np.array([1.0], np.float32)}
    _, example, _, _ = _whole(values, {"on": np.array([2.0], np.float32)}, levels=("on",))
    assert example is not None


def test_an_id_wrapped_by_arithmetic_is_drawn_within_the_embedding():
    from real_models import negative_id_wrap

    report = revseq.check(negative_id_wrap(), revseq.inline(negative_id_wrap()))
    assert report.ok and report.exercised, report
    assert any("[0, 48]" in line and "through Mul" in line for line in report.inputs), report


def _two_embeddings() -> onnx.ModelProto:
    """Token ids into two embeddings of 50 and 100 rows, summed and reversed."""
    rng = np.random.default_rng(0)
    small = onnx.numpy_helper.from_array(rng.standard_normal((50, 4), np.float32), "small")
    large = onnx.numpy_helper.from_array(rng.standard_normal((100, 4), np.float32), "large")
    nodes = [
        onnx.helper.make_node("Gather", ["small", "ids"], ["a"], name="embed_small"),
        onnx.helper.make_node("Gather", ["large", "ids"], ["b"], name="embed_large"),
        onnx.helper.make_node("Add", ["a", "b"], ["e"]),
        onnx.helper.make_node("ReverseSequence", ["e", "lens"], ["y"]),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "two_embeddings",
        [
            onnx.helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, ["T", "B"]),
            onnx.helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, ["B"]),
        ],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["T", "B", 4])],
        [small, large],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


def test_ids_that_index_two_embeddings_stay_below_the_smaller():
    model = _two_embeddings()
    report = revseq.check(model, revseq.inline(model), trials=3)
    assert report.ok and report.exercised, report
    assert "input ids: generated in [0, 49]" in str(report), report


def _coreml_clamp_mutant(inlined: onnx.ModelProto) -> onnx.ModelProto:
    """CoreML's clamp ``l - max(l - T, 0)`` written ``l - max(T - l, 0)``."""
    floor = next(
        n.output[0] for n in inlined.graph.node if n.op_type == "Max" and n.input[0] == "lens"
    )
    sub = next(n for n in inlined.graph.node if n.op_type == "Sub" and n.input[0] == floor)
    sub.input[0], sub.input[1] = sub.input[1], sub.input[0]
    return inlined


@pytest.mark.parametrize("seed", range(4))
def test_check_with_no_flag_catches_a_clamp_wrong_only_strictly_between_1_and_t(seed):
    """Lengths 0, 1 and T come out right from the wrong clamp; 2 <= l <= T - 1 do not."""
    model = reverse_sequence_model(["T", "B", 3], onnx.TensorProto.FLOAT)
    assert revseq.check(model, revseq.inline(model, target="coreml"), seed=seed).ok
    planted = _coreml_clamp_mutant(revseq.inline(model, target="coreml"))
    report = revseq.check(model, planted, seed=seed)
    assert not report.ok, report
    assert "differs" in report.message


def test_every_trial_feeds_each_reversal_0_1_t_and_one_strictly_between():
    rng = np.random.default_rng(0)
    for time_len in (3, 4, 9):
        for batch in (1, 2, 3, 4, 7):
            vectors = covering_lengths(rng, time_len, (batch,), np.dtype(np.int64))
            fed = {int(v) for vector in vectors for v in vector}
            assert {0, 1, time_len} <= fed
            assert any(2 <= v <= time_len - 1 for v in fed)
            assert all(0 <= v <= time_len for v in fed)
            assert len(vectors) == -(-4 // batch)


def _runs_only_at_batch_1() -> onnx.ModelProto:
    """An export that baked batch 1 in: a Squeeze of axis 0 after the reversal."""
    helper = onnx.helper
    graph = helper.make_graph(
        [
            helper.make_node(
                "ReverseSequence", ["x", "lens"], ["r"], batch_axis=0, time_axis=1
            ),
            helper.make_node("Squeeze", ["r", "zero"], ["y"]),
        ],
        "batch_1",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", "seq", 3]),
            helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, ["batch"]),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["seq", 3])],
        [helper.make_tensor("zero", onnx.TensorProto.INT64, [1], [0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_model_that_runs_only_at_batch_1_is_checked_with_no_flag(tmp_path, capsys):
    model, inlined = tmp_path / "m.onnx", tmp_path / "i.onnx"
    onnx.save(_runs_only_at_batch_1(), model)
    onnx.save(revseq.inline(_runs_only_at_batch_1()), inlined)
    assert main(["check", str(model), str(inlined), "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: ") and "dim batch: 1, 1, 1" in out, out
    assert "dims set to 1: batch 3 -> 1 (trial 0; the reference ran at no larger size" in out
