"""``revseq check`` as the proof it promises: wrong decompositions fail, right ones pass,
on onnxruntime and on every installed backend, node by node, whatever feeds the node."""

from __future__ import annotations

import helpers
import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import assert_one_line_error, revseq, time_shorter_than_lengths_model

import revseq as api
from revseq import backends
from revseq.models import FOLDER as MODELS

TP = onnx.TensorProto
BACKENDS = ["onnx2torch", "tvm", "tinygrad", "tract"]


def _backend_or_skip(name: str) -> None:
    reason = backends.unavailable(name)
    if reason is not None:
        pytest.skip(reason)


def _matmul_model(decomposition: list[onnx.NodeProto] | None) -> onnx.ModelProto:
    """x[T,B,8] -> MatMul -> Relu -> ReverseSequence (or ``decomposition``) -> Add."""
    rng = np.random.default_rng(0)
    inits = [
        onnx.numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w"),
        onnx.numpy_helper.from_array(np.ones(8, np.float32), "b"),
    ]
    nodes = [oh.make_node("MatMul", ["x", "w"], ["mm"]), oh.make_node("Relu", ["mm"], ["act"])]
    if decomposition is None:
        nodes.append(oh.make_node("ReverseSequence", ["act", "lens"], ["rev"], name="rs"))
    else:
        nodes += decomposition
        for name, value in {"one": [1], "zero": [0], "ax1": [1], "ax2": [2]}.items():
            shape = [] if name in ("one", "zero") else [1]
            inits.append(oh.make_tensor(name, TP.INT64, shape, value))
    nodes.append(oh.make_node("Add", ["rev", "b"], ["y"]))
    graph = oh.make_graph(
        nodes,
        "g",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, ["T", "B", 8]),
            oh.make_tensor_value_info("lens", TP.INT64, ["B"]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, ["T", "B", 8])],
        inits,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _one_step_too_few() -> onnx.ModelProto:
    """Model W: L' = lens - 1, where(t < L', L' - 1 - t, t), GatherElements."""
    return _matmul_model(
        [
            oh.make_node("Sub", ["lens", "one"], ["short"]),
            oh.make_node("Shape", ["act"], ["shape"]),
            oh.make_node("Gather", ["shape", "zero"], ["T"], axis=0),
            oh.make_node("Range", ["zero", "T", "one"], ["t"]),
            oh.make_node("Unsqueeze", ["t", "ax1"], ["t2"]),
            oh.make_node("Less", ["t2", "short"], ["inside"]),
            oh.make_node("Sub", ["short", "one"], ["last"]),
            oh.make_node("Sub", ["last", "t2"], ["mirror"]),
            oh.make_node("Where", ["inside", "mirror", "t2"], ["step"]),
            oh.make_node("Unsqueeze", ["step", "ax2"], ["step3"]),
            oh.make_node("Expand", ["step3", "shape"], ["index"]),
            oh.make_node("GatherElements", ["act", "index"], ["rev"], axis=0),
        ]
    )


def _planted_off_by_one(model: onnx.ModelProto) -> onnx.ModelProto:
    """revseq's default output with every decomposition reading ``lengths - 1``."""
    inlined = api.inline(model)
    lengths = {n.input[1] for n in model.graph.node if n.op_type == "ReverseSequence"}
    for node in inlined.graph.node:
        for i, name in enumerate(node.input):
            if name in lengths:
                node.input[i] = f"{name}_planted"
    for name in lengths:
        inlined.graph.node.insert(
            0, oh.make_node("Sub", [name, "planted_one"], [f"{name}_planted"])
        )
    inlined.graph.initializer.append(oh.make_tensor("planted_one", TP.INT64, [], [1]))
    return inlined


def test_a_decomposition_one_step_short_behind_a_matmul_fails_in_onnxruntime():
    report = api.check(_matmul_model(None), _one_step_too_few())
    assert not report.ok and report.verdict == "DIFFERENT"
    (node,) = report.nodes
    assert node.name == "rs" and node.difference is not None
    assert "native" in node.difference and "candidate" in node.difference
    assert "node rs in main" in report.message


@pytest.mark.backend
@pytest.mark.parametrize("name", BACKENDS)
def test_a_decomposition_one_step_short_fails_on_the_backend(name):
    _backend_or_skip(name)
    report = api.check(_matmul_model(None), _one_step_too_few(), backend=name)
    assert not report.ok
    assert report.nodes[0].difference is not None
    assert report.engines["decompositions"] == backends.get(name).label


def test_lengths_span_the_time_length_the_node_sees_not_one():
    """The data is a MatMul's output without a declared shape: T is read from a run."""
    report = api.check(_matmul_model(None), api.inline(_matmul_model(None)), trials=3)
    assert report.ok and report.exercised
    assert report.nodes[0].longest >= 2


def _static_time(time_len: int) -> onnx.ModelProto:
    graph = oh.make_graph(
        [oh.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rs")],
        "g",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, [time_len, "B", 2]),
            oh.make_tensor_value_info("lens", TP.INT64, ["B"]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, [time_len, "B", 2])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _identity_of(model: onnx.ModelProto) -> onnx.ModelProto:
    """A model of the same inputs and outputs whose output is its data, unchanged."""
    graph = oh.make_graph(
        [oh.make_node("Identity", ["x"], ["y"], name="rs")],
        "g",
        list(model.graph.input),
        list(model.graph.output),
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_a_check_that_cannot_tell_a_reversal_from_the_identity_says_so(tmp_path):
    model = _static_time(1)
    identity = _identity_of(model)
    report = api.check(model, identity)
    assert report.ok and not report.exercised and report.verdict == "INCONCLUSIVE"
    assert "bit-identical" not in str(report)
    onnx.save(model, tmp_path / "ref.onnx")
    onnx.save(identity, tmp_path / "cand.onnx")
    result = revseq("check", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "-q")
    assert result.returncode == 3, result.stderr  # inconclusive, from every command
    assert "inconclusive" in result.stderr and "cannot tell a reversal" in result.stderr
    assert "INCONCLUSIVE" in result.stdout and "bit-identical" not in result.stdout
    result = revseq(
        "inline", tmp_path / "ref.onnx", "-o", tmp_path / "out.onnx", "--check", "-q"
    )
    assert result.returncode == 3 and "inconclusive" in result.stderr, result.stderr


@pytest.mark.backend
@pytest.mark.parametrize("model", sorted(p.name for p in MODELS.glob("*.onnx")))
@pytest.mark.parametrize("name", BACKENDS)
def test_bundled_models_check_on_the_backend(name, model):
    """Through the API, in this process: the command line's ``--backend`` is run on each
    backend by the planted off-by-one below."""
    _backend_or_skip(name)
    original = onnx.load(MODELS / model)
    report = api.check(original, api.inline(original), backend=name, trials=2)
    assert report.ok and report.verdict == "OK", str(report)
    assert "bit-identical" in str(report) and backends.get(name).label in str(report)


@pytest.mark.backend
@pytest.mark.parametrize("name", BACKENDS)
def test_a_planted_off_by_one_fails_on_the_backend_naming_the_node(name, tmp_path):
    _backend_or_skip(name)
    model = onnx.load(MODELS / "bidirectional_rnn.onnx")
    onnx.save(_planted_off_by_one(model), tmp_path / "planted.onnx")
    result = revseq("check", MODELS / "bidirectional_rnn.onnx", tmp_path / "planted.onnx",
                    "--backend", name, "-q")  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    first_node = next(n.name for n in model.graph.node if n.op_type == "ReverseSequence")
    assert f"DIFFERENT: node {first_node} in main" in result.stdout


@pytest.mark.backend
def test_a_backend_crash_is_one_line_and_exit_2(tmp_path):
    """tract panics (SIGABRT) on the RNN's undetermined batch symbol."""
    _backend_or_skip("tract")
    inlined = tmp_path / "inlined.onnx"
    assert revseq("inline", MODELS / "bidirectional_rnn.onnx", "-o", inlined).returncode == 0
    result = revseq("check", MODELS / "bidirectional_rnn.onnx", inlined, "--backend", "tract",
                    "--whole-model", "--rtol", "1e-5")  # fmt: skip
    assert_one_line_error(result, "tract", "SIGABRT")


@pytest.mark.backend
def test_whole_model_across_runtimes_is_reported_within_a_tolerance(tmp_path):
    _backend_or_skip("onnx2torch")
    inlined = tmp_path / "inlined.onnx"
    assert revseq("inline", MODELS / "batch_major.onnx", "-o", inlined).returncode == 0
    result = revseq("check", MODELS / "batch_major.onnx", inlined, "--backend", "onnx2torch",
                    "--whole-model", "-q")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    verdict = result.stdout.splitlines()[0]
    assert "within rtol=1e-05, atol=1e-06" in verdict  # float32's last digits
    assert "bit-identical" not in verdict  # only each decomposition alone, in onnxruntime:
    assert "node OK" in result.stdout and "on onnxruntime" in result.stdout


@pytest.mark.backend
def test_per_node_runs_on_the_backend():
    _backend_or_skip("onnx2torch")
    result = revseq("check", MODELS / "bidirectional_rnn.onnx", "--per-node",
                    "--backend", "onnx2torch", "-q")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(backends.get("onnx2torch").label) == 2
    assert "rank unknown" not in result.stdout


def test_constant_lengths_of_the_op_only_in_one_model_say_whether_it_reversed(tmp_path):
    """Restore fuses a constant index with its lengths read back as a Constant, and a
    restored model checked against the inlined one has no lengths input to tell a
    reversal by: the constant lengths tell it (``revseq restore --check``)."""
    from revseq.ops.reference import reverse_sequence_model

    model = reverse_sequence_model([6, 4, 3], TP.FLOAT, lens=np.array([6, 0, 2, 3]))
    inlined = api.inline(model)
    restored = api.restore(inlined)
    assert [n.op_type for n in restored.graph.node] == ["Constant", "ReverseSequence"]
    report = api.check(inlined, restored)
    assert report.ok and report.exercised and report.verdict == "OK"
    onnx.save(inlined, tmp_path / "inlined.onnx")
    result = revseq(
        "restore", tmp_path / "inlined.onnx", "-o", tmp_path / "out.onnx", "--check"
    )
    assert result.returncode == 0 and "cannot tell a reversal" not in result.stderr
    # Constant lengths of at most 1 move nothing: against an identity, inconclusive.
    still = reverse_sequence_model([6, 4, 3], TP.FLOAT, lens=np.array([1, 0, 1, 1]))
    report = api.check(_identity_of(still), still)
    assert report.ok and not report.exercised and report.verdict == "INCONCLUSIVE"


def test_a_symbolic_time_dim_holds_the_longest_constant_length():
    """Constant lengths up to 6 along a symbolic T: every trial draws T >= 6 (smaller
    ones made the native op refuse the lengths, and the check stop)."""
    from revseq.ops.reference import reverse_sequence_model

    model = reverse_sequence_model(["T", 4, 3], TP.FLOAT, lens=np.array([6, 0, 2, 3]))
    report = api.check(model, api.inline(model), trials=5)
    assert report.ok and report.exercised and report.verdict == "OK"
    assert report.nodes[0].longest == 6


@pytest.mark.parametrize(
    ("step", "longest"),
    [(1, 6), (2, 6), (4, 5)],
    ids=["slice-1", "every-2nd", "every-4th"],
)
def test_a_computed_time_dim_grows_to_hold_the_longest_constant_length(step, longest):
    """The data of a node with constant lengths is a Slice of the input (T - 1 steps,
    or every 2nd or 4th of them): only a run tells its time length, so trials grow the
    symbolic dims until it holds the lengths (it stopped the check with the native op's
    "Invalid sequence length" before)."""
    from onnx import helper as h
    from onnx import numpy_helper as nh

    inits = [
        nh.from_array(np.array([longest, 1, 0], np.int64), "lens"),
        nh.from_array(np.array([1], np.int64), "start"),
        nh.from_array(np.array([2**62], np.int64), "end"),
        nh.from_array(np.array([0], np.int64), "axis"),
        nh.from_array(np.array([step], np.int64), "step"),
    ]
    nodes = [
        h.make_node("Slice", ["x", "start", "end", "axis", "step"], ["sliced"]),
        h.make_node("ReverseSequence", ["sliced", "lens"], ["y"], batch_axis=1, time_axis=0),
    ]
    graph = h.make_graph(
        nodes,
        "computed_time",
        [h.make_tensor_value_info("x", TP.FLOAT, ["T", 3, "F"])],
        [h.make_tensor_value_info("y", TP.FLOAT, ["U", 3, "F"])],
        initializer=inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    report = api.check(model, api.inline(model), trials=3)
    assert report.ok and report.exercised and report.verdict == "OK"
    assert report.nodes[0].longest == longest


def test_a_time_dim_no_input_sizes_still_fails_with_the_backends_word():
    """A constant time dim of 2 under lengths of 6 is an invalid model, not a short
    draw: growing the symbolic dims changes nothing, and the check says why it failed."""
    model = time_shorter_than_lengths_model()
    with pytest.raises(api.RevseqError, match="Invalid sequence length"):
        api.check(model, api.inline(model), trials=1)


FIXTURES = helpers.FIXTURES


@pytest.mark.backend
@pytest.mark.parametrize("per_node", [False, True], ids=["inlined", "per_node"])
@pytest.mark.parametrize(
    "name",
    # torch.export cannot trace onnx2torch's conversion of symbolic dims (Range, Squeeze
    # read values): ExecuTorch takes the op itself (test_executorch.py). RKNN and
    # x2paddle run static dims only (test_foreign_backends.py), ncnn no gather; LiteRT
    # takes its own target there (litert/test_litert.py).
    sorted(
        set(backends.ADAPTERS)
        - {"onnx2torch-cuda", "executorch", "executorch-portable", "rknn", "x2paddle", "ncnn"}
        - {"litert"}
    ),
)
def test_tf2onnx_s_reverse_sequence_checks_on_the_backend(name, per_node):
    """tf2onnx's export of ``tf.reverse_sequence``: int32 lengths declared with a symbol
    of their own, cast to int64. The check gives them the data's batch size whatever
    dim they are declared with (onnxruntime refuses others), and the default runs on
    every backend: node by node from the command line, its output through the API."""
    _backend_or_skip(name)
    model = FIXTURES / "tf_reverse_sequence_opset13.onnx"
    if per_node:
        result = revseq("check", model, "--per-node", "--backend", name)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "bit-identical" in result.stdout
        return
    original = onnx.load(model)
    report = api.check(original, api.inline(original), backend=name)
    assert report.ok and report.verdict == "OK", str(report)
    assert "bit-identical" in str(report)


@pytest.mark.backend
def test_mnn_takes_bool_through_int32_and_checks_the_masked_gru_node_by_node():
    """MNN's Python API takes no bool: the adapter feeds and reads it as int32 through a
    Cast in the model (a masked Keras GRU reverses its bool mask)."""
    _backend_or_skip("mnn")
    model = FIXTURES / "tf_masked_bigru_opset13.onnx"
    result = revseq("check", model, "--per-node", "--backend", "mnn")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 of 3 node(s) identical" in result.stdout


def test_a_type_the_backend_moves_wrong_is_said_even_where_these_values_survive():
    """OpenCV keeps int64 data in 32 bits: token ids below 2^31 come back right, and the
    report says that this proves nothing of larger values."""
    _backend_or_skip("opencv")
    from real_models import bidirectional_ids

    model = bidirectional_ids()  # the ids (int64) are what its ReverseSequence reverses
    report = api.check(model, api.inline(model), backend="opencv", trials=1)
    assert report.ok, report
    (node,) = report.nodes
    assert "opencv's profile moves no int64 exactly" in str(node)
    float_model = _matmul_model(None)
    plain = api.check(float_model, api.inline(float_model), backend="opencv", trials=1)
    assert "moves no" not in str(plain.nodes[0])
