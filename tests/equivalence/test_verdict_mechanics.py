"""The parts a verdict rests on, each held exactly where a reader could get it wrong.

The bisection that names the node a runtime fails at, the truth of a backend that holds
float32 as float16, the rank RKNN's int64 rounding starts at, and the readers that let
ncnn's batch-leading view be written.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh

import revseq
from revseq.backends import adapter
from revseq.backends._adapter import Backend
from revseq.equivalence.blame import _first_failing_node
from revseq.equivalence.inputs.values import held


class _Refusing:
    """An engine standing in for a runtime that fails on one op type."""

    def __init__(self, refused: str) -> None:
        self.refused = refused
        self.label = self.name = "fake"

    def prepare(self, model: onnx.ModelProto):
        if any(n.op_type == self.refused for n in model.graph.node):
            raise RuntimeError(f"no {self.refused}")
        return lambda feeds: []


def _chain(ops: list[str]) -> onnx.ModelProto:
    nodes, value = [], "x"
    for i, op in enumerate(ops):
        nodes.append(oh.make_node(op, [value], [f"v{i}"], name=f"n{i}"))
        value = f"v{i}"
    graph = oh.make_graph(
        nodes,
        "chain",
        [oh.make_tensor_value_info("x", TP.FLOAT, [2])],
        [oh.make_tensor_value_info(value, TP.FLOAT, [2])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


@pytest.mark.parametrize("at", range(7))
def test_the_bisection_names_the_very_node_the_runtime_fails_at(at):
    ops = ["Relu", "Neg", "Abs", "Exp", "Tanh", "Sqrt", "Sigmoid"]
    failing = ops[at]
    node = _first_failing_node(_chain(ops), _Refusing(failing), None)
    assert node is not None and node.name == f"n{at}" and node.op_type == failing


def test_nothing_is_named_where_the_last_cut_runs():
    assert _first_failing_node(_chain(["Relu", "Neg"]), _Refusing("Sigmoid"), None) is None


def test_float32_held_as_float16_rounds_to_nearest_even_not_by_truncation():
    """1 + 2^-11 + 2^-23 rounds up; 1 + 3 * 2^-11 is a tie that rounds to the even."""
    bits = [0x3F801001, 0x3F803000, 0x3F801000, 0xBF8017FF, 0x477FE000]
    x = np.array(bits, np.uint32).view(np.float32)
    got = held({"x": x}, {"float32": "float16"})["x"]
    assert [hex(v) for v in got.view(np.uint32)] == [
        "0x3f802000", "0x3f804000", "0x3f800000", "0xbf802000", "0x477fe000"
    ]  # fmt: skip
    assert got.tobytes() == x.astype(np.float16).astype(np.float32).tobytes()


def test_rknn_s_int64_rounding_starts_at_rank_4_exactly():
    rknn = Backend("rknn", adapter("rknn"))
    assert rknn.rounding("int64", 4) is not None
    assert rknn.rounding("int64", 5) is not None
    assert rknn.rounding("int64", 3) is None
    assert rknn.rounding("int32", 4) is None


def _time_major_flip_read_by(reader: str) -> onnx.ModelProto:
    """A batch-1 time-major full flip (tf2onnx's) whose output ``reader`` reads."""
    reads = {
        "Unsqueeze": oh.make_node("Unsqueeze", ["r", "axis"], ["y"], name="reader"),
        "Transpose": oh.make_node("Transpose", ["r"], ["y"], name="reader", perm=[1, 0, 2]),
    }
    graph = oh.make_graph(
        [
            oh.make_node("Relu", ["x"], ["a"], name="pre"),
            oh.make_node(
                "ReverseSequence", ["a", "lens"], ["r"], name="flip", batch_axis=1, time_axis=0
            ),
            reads[reader],
        ],
        "flip",
        [oh.make_tensor_value_info("x", TP.FLOAT, [6, 1, 4])],
        [oh.make_tensor_value_info("y", TP.FLOAT, None)],
        [
            onnx.numpy_helper.from_array(np.array([6], np.int64), "lens"),
            onnx.numpy_helper.from_array(np.array([0], np.int64), "axis"),
        ],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])


@pytest.mark.parametrize(("reader", "view"), [("Transpose", True), ("Unsqueeze", False)])
def test_ncnn_s_batch_leading_view_is_written_only_for_readers_pnnx_drops_the_batch_of(
    reader, view
):
    """A flip read by an Unsqueeze over the view crashed ncnn: it keeps the plain Slice."""
    model = _time_major_flip_read_by(reader)
    inlined = revseq.inline(model, target="ncnn")
    written = [n.op_type for n in inlined.graph.node if n.name.startswith("flip")]
    assert ("Transpose" in written) == view, written
    assert revseq.check(model, inlined).ok


_FEEDS = {"x": np.arange(30, dtype=np.float32).reshape(5, 2, 3), "lens": np.array([5, 3])}


def _around_a_reversal(*nodes: onnx.NodeProto) -> onnx.ModelProto:
    """``nodes`` as a model of ``x`` [5, 2, 3] and ``lens`` [2] to ``y``, a reversal inside."""
    inputs = [
        oh.make_tensor_value_info("x", TP.FLOAT, [5, 2, 3]),
        oh.make_tensor_value_info("lens", TP.INT64, [2]),
    ]
    output = oh.make_tensor_value_info("y", TP.FLOAT, [5, 2, 3])
    graph = oh.make_graph(list(nodes), "g", inputs, [output])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _index_unturned(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` inlined, with the gather writing ``r`` reading its index unturned."""
    bad = revseq.inline(model)
    gather = next(n for n in bad.graph.node if n.output[0] == "r")
    turned = next(n for n in bad.graph.node if n.output[0] == gather.input[1])
    gather.input[1] = turned.input[0]
    return bad


class _Forgetful:
    """An engine standing in for a runtime that gives one tensor back as an empty object."""

    def __init__(self, forgets: str) -> None:
        self.storage: dict[str, str] = {}
        self.forgets = forgets
        self.label = self.name = "forgetful"

    def prepare(self, model: onnx.ModelProto):
        import onnxruntime

        session = onnxruntime.InferenceSession(model.SerializeToString())
        names = [o.name for o in session.get_outputs()]

        def run(feeds):
            outputs = session.run(None, feeds)
            empty = np.array([], dtype=object)
            return [
                empty if n == self.forgets else o for n, o in zip(names, outputs, strict=True)
            ]

        return run


def test_a_tensor_the_runtime_does_not_give_back_is_skipped_not_blamed():
    """OpenCV gives some tensors back as ``object []``: no difference, and said so."""
    from revseq.equivalence.blame import REVSEQ, first_differing_tensor

    model = _around_a_reversal(
        oh.make_node("Relu", ["x"], ["a"], name="pre"),
        oh.make_node("ReverseSequence", ["a", "lens"], ["r"], name="rs"),
        oh.make_node("Neg", ["r"], ["y"], name="post"),
    )
    bad = _index_unturned(model)
    located = first_differing_tensor(model, bad, _FEEDS, _Forgetful("a"), (1e-5, 1e-6))
    assert located.writer == REVSEQ, located
    assert "first differing tensor 'r'" in located.text, located
    assert "not given back by forgetful" in located.text and "'a' first" in located.text


class _NoInt8OfRank4(_Forgetful):
    """An engine standing in for RKNN 2.5, whose build crashes on any int8 input of rank 4
    (an Identity's too), and for a runtime that refuses a Gather (``gathers``: False)."""

    def __init__(self, *, gathers: bool = True) -> None:
        super().__init__(forgets="")
        self.label = self.name = "no-int8-of-rank-4"
        self.gathers = gathers

    def prepare(self, model: onnx.ModelProto):
        from revseq.backends import BackendError

        for value in model.graph.input:
            tensor = value.type.tensor_type
            if tensor.elem_type == TP.INT8 and len(tensor.shape.dim) == 4:
                raise BackendError(self.name, "run", "killed by SIGSEGV (building ...)")
        if not self.gathers and any(n.op_type.startswith("Gather") for n in model.graph.node):
            raise BackendError(self.name, "convert", "no Gather")
        return super().prepare(model)


@pytest.mark.parametrize("dtype", ["int8", "int32"])
def test_a_decomposition_failing_where_the_runtime_takes_no_such_data_says_whose(dtype):
    """The decomposition alone fails on the runtime; where an Identity of the same data
    fails there too, that is said beside it."""
    from helpers import model_of

    from revseq.equivalence._decompositions_alone import nodes_report
    from revseq.errors import CheckError

    model = model_of([5, 4, 2, 3], dtype, 1, 0)
    feeds = {
        "x": np.arange(120).astype(dtype).reshape(5, 4, 2, 3),
        "lens": np.array([5, 0, 1, 2]),
    }
    engine = _NoInt8OfRank4(gathers=dtype == "int8")
    with pytest.raises(CheckError) as failure:
        nodes_report(model, revseq.inline(model), [feeds], engine, seed=0, progress=None)
    said = str(failure.value)
    theirs = f"only hands the node's {dtype} [5, 4, 2, 3] data back (one Identity)"
    assert (theirs in said) == (dtype == "int8"), said
    assert said.count("killed by SIGSEGV") == (dtype == "int8")  # the same failure once


class _Altering(_Forgetful):
    """An engine standing in for a runtime that gives back what onnxruntime computes,
    altered (``alter``: what it makes of a model's outputs)."""

    def __init__(self, name: str) -> None:
        super().__init__(forgets="")
        self.label = self.name = name

    def prepare(self, model: onnx.ModelProto):
        run, alter = super().prepare(model), self.alter(model)
        return lambda feeds: alter(run(feeds))

    def alter(self, model: onnx.ModelProto):
        raise NotImplementedError


class _Narrowing(_Altering):
    """An engine standing in for LiteRT, whose Shape gives int32: every int64 narrowed."""

    def __init__(self) -> None:
        super().__init__("narrowing")

    def alter(self, model: onnx.ModelProto):
        return lambda outputs: [
            o.astype(np.int32) if o.dtype == np.int64 else o for o in outputs
        ]


def test_integers_given_back_in_a_narrower_type_are_not_where_a_difference_starts():
    """LiteRT gives a Shape's int64 back as int32: the same values, so the blame goes
    on to the tensor that differs (a planted fault in the gather's index)."""
    from revseq.equivalence.blame import REVSEQ, first_differing_tensor

    model = _around_a_reversal(
        oh.make_node("Shape", ["x"], ["s"], name="shape"),
        oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs"),
        oh.make_node("Reshape", ["r", "s"], ["y"], name="post"),
    )
    bad = _index_unturned(model)
    located = first_differing_tensor(model, bad, _FEEDS, _Narrowing(), (1e-5, 1e-6))
    assert located.writer == REVSEQ, located
    assert "first differing tensor 'r'" in located.text, located


class _WrongInContext(_Altering):
    """An engine standing in for a runtime with the op that gets a whole model holding a
    reversal wrong, native or inlined, but not with its tensors marked as outputs."""

    def __init__(self) -> None:
        super().__init__("wrong-in-context")

    def alter(self, model: onnx.ModelProto):
        reversal = any("lens" in node.input for node in model.graph.node)
        whole = len(model.graph.output) == 1
        return lambda outputs: [o + 1 for o in outputs] if reversal and whole else outputs


def test_a_runtime_that_gets_the_reference_itself_wrong_is_blamed_not_revseq():
    from revseq.equivalence.blame import OWN, first_differing_tensor

    model = _around_a_reversal(
        oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs"),
        oh.make_node("Neg", ["r"], ["y"], name="post"),
    )
    located = first_differing_tensor(
        model, revseq.inline(model), _FEEDS, _WrongInContext(), (1e-5, 1e-6)
    )
    assert located.writer == OWN, located
    assert "the reference itself, its ReverseSequence kept, differs there too" in str(located)


class _OwnOpOff(_Altering):
    """An engine standing in for a runtime whose own Neg is off by one: revseq's exact."""

    def __init__(self) -> None:
        super().__init__("own-op-off")

    def alter(self, model: onnx.ModelProto):
        negates = {n.output[0] for n in model.graph.node if n.op_type == "Neg"}
        names = [o.name for o in model.graph.output]
        return lambda outputs: [
            o + 1 if n in negates else o for n, o in zip(names, outputs, strict=True)
        ]


def test_the_engines_line_names_the_runtime_the_decompositions_also_ran_alone_on():
    """The blame runs each decomposition alone on the runtime: the engines say so, beside
    onnxruntime, where each ran against the native op."""
    from revseq.equivalence.across import across_runtimes

    model = _around_a_reversal(
        oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs"),
        oh.make_node("Neg", ["r"], ["y"], name="post"),
    )
    _, engines, nodes, whose = across_runtimes(
        model, revseq.inline(model), _OwnOpOff(), [_FEEDS], (1e-5, 1e-6),
        seed=0, specials=False, progress=None,
    )  # fmt: skip
    assert whose.runtime and "own-op-off's own computation" in whose.text, whose
    assert nodes and whose.alone_on == "own-op-off"
    assert engines["decompositions"] == (
        "onnxruntime (against the native op), own-op-off (each alone)"
    )


def test_where_no_larger_size_runs_each_symbolic_dim_is_tried_at_1_alone():
    """A time-major export with its batch baked to 1: its batch is the second dim."""
    from revseq.equivalence.inputs.sizes import sizes_of_one

    tried = list(sizes_of_one({"steps": 4, "batch": 3, "fixed": 1}, ["steps", "batch"]))
    assert tried == [
        {"steps": 1, "batch": 3, "fixed": 1},
        {"steps": 4, "batch": 1, "fixed": 1},
        {"steps": 1, "batch": 1, "fixed": 1},
    ]


def test_a_long_stage_says_it_started_that_it_still_runs_and_how_long_it_took():
    import time

    from revseq.equivalence.reports import stage

    said: list[str] = []
    with stage(said.append, "converting on slow", every=0.05):
        time.sleep(0.3)
    assert said[0] == "check: converting on slow ..."
    assert any("still running" in line for line in said[1:-1]), said
    with stage(None, "nothing said"):
        pass  # no progress callback: nothing to say, nothing waits


def test_the_whole_model_check_says_each_stage_while_it_runs():
    from revseq.ops.reference import reverse_sequence_model

    model = reverse_sequence_model(["T", "B", 3], TP.FLOAT)
    said: list[str] = []
    revseq.check(model, revseq.inline(model), backend="onnxruntime", whole_model=True,
                 progress=said.append)  # fmt: skip
    assert any(line.startswith("check: preparing the candidate whole on") for line in said)
    assert any(line.startswith("check: trial 1: running the candidate on") for line in said)
    assert said.index(next(x for x in said if "trial 1/3" in x)) > said.index(
        next(x for x in said if x.startswith("check: trial 1: running"))
    )


class _Misnaming:
    """A runtime that fails on ``refused`` but names another op in its message."""

    def __init__(self, refused: str, named: str) -> None:
        self.refused, self.named = refused, named
        self.label = self.name = "misnaming"
        self.storage: dict[str, str] = {}

    def prepare(self, model: onnx.ModelProto):
        from revseq.errors import RevseqError

        if any(n.op_type == self.refused for n in model.graph.node):
            raise RevseqError(f"misnaming: convert failed: while converting {self.named}")
        return lambda feeds: []


def test_a_runtime_naming_the_model_s_own_op_is_checked_against_the_model_alone():
    """x2paddle failed in revseq's Range and named the model's LSTM: the model without its
    reversals runs there, so the failure is revseq's decompositions'."""
    from revseq.equivalence.whole_models import prepared_whole

    model = _chain(["Relu"])
    model.graph.node.append(oh.make_node("ReverseSequence", ["v0", "lens"], ["r"], name="rs"))
    model.graph.input.append(oh.make_tensor_value_info("lens", TP.INT64, [2]))
    model.graph.input[0].type.tensor_type.shape.dim.insert(
        0, onnx.TensorShapeProto.Dimension()
    )
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "T"
    del model.graph.output[:]
    model.graph.output.append(oh.make_tensor_value_info("r", TP.FLOAT, None))
    inlined = revseq.inline(model, strategy="gather_elements")
    with pytest.raises(revseq.RevseqError) as caught:
        prepared_whole(_Misnaming("Range", "Relu"), model, inlined)
    said = str(caught.value)
    assert "the runtime names Relu (the model's own)" in said, said
    assert "it runs the model with every reversal made an Identity: revseq's" in said, said


def test_int32_lengths_two_flips_share_are_cast_once_and_read_where_they_are_computed():
    from onnx import helper

    shared = helper.make_graph(
        [
            helper.make_node("Cast", ["n"], ["lens"], to=TP.INT32),
            helper.make_node(
                "ReverseSequence", ["x", "lens"], ["a"], batch_axis=1, time_axis=0
            ),
            helper.make_node(
                "ReverseSequence", ["a", "lens"], ["y"], batch_axis=1, time_axis=0
            ),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TP.FLOAT, ["T", "B", 3]),
            helper.make_tensor_value_info("n", TP.INT64, ["B"]),
        ],
        [helper.make_tensor_value_info("y", TP.FLOAT, ["T", "B", 3])],
    )
    model = helper.make_model(shared, opset_imports=[helper.make_opsetid("", 13)])
    report = revseq.check(model, revseq.inline(model))
    assert report.verdict == "OK" and report.engines["reference"] == "onnxruntime", report


def test_inputs_of_any_name_are_saved_and_read_back(tmp_path):
    from revseq import files

    arrays = {"file": np.arange(3), "allow_pickle": np.array(["a", "bc"], dtype=object)}
    files.save_arrays(tmp_path / "in.npz", arrays)
    back = files.load_arrays(tmp_path / "in.npz")
    assert back["file"].tolist() == [0, 1, 2] and back["allow_pickle"].tolist() == ["a", "bc"]


def test_an_infinite_reference_gives_no_nan_relative_error():
    from revseq.equivalence.reports import largest

    measured = largest("y", np.array([-np.inf, 2.0]), np.array([-3e38, 2.0]))
    assert measured.absolute == np.inf and measured.relative == 0.0


def test_a_restored_node_that_differs_is_blamed_on_revseq():
    """Restore writes a ReverseSequence where the reference computes a decomposition."""
    from revseq.equivalence._runners import Engine
    from revseq.equivalence.blame import REVSEQ, first_differing_tensor
    from revseq.ops.reference import reverse_sequence_model

    inlined = revseq.inline(reverse_sequence_model([5, 2, 3], TP.FLOAT))
    restored = revseq.restore(inlined)
    (node,) = [n for n in restored.graph.node if n.op_type == "ReverseSequence"]
    restored.graph.initializer.append(onnx.numpy_helper.from_array(np.array([5, 5]), "full"))
    node.input[1] = "full"  # every sequence reversed whole: wrong where lens are 3
    feeds = {"x": np.arange(30, dtype=np.float32).reshape(5, 2, 3), "lens": np.array([5, 3])}
    located = first_differing_tensor(inlined, restored, feeds, Engine(None), None)
    assert located.writer == REVSEQ and "restored ReverseSequence" in located.text, located
