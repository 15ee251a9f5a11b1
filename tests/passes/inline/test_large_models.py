"""Large models: weights are never read into memory; many nodes are processed linearly."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest

import revseq
from revseq.passes import InlineReverseSequencePass, RestoreReverseSequencePass
from revseq.passes.graph.shapes import ShapeTable

TP = onnx.TensorProto
GIB = 1 << 30


def _big_model(folder: pathlib.Path) -> pathlib.Path:
    """A ReverseSequence model carrying 1 GiB of external weights (a sparse file)."""
    count = GIB // 4
    weights = onnx.TensorProto(name="weights", data_type=TP.FLOAT, dims=[count])
    weights.data_location = TP.EXTERNAL
    for key, value in (("location", "big.data"), ("offset", "0"), ("length", str(GIB))):
        weights.external_data.add(key=key, value=value)
    with open(folder / "big.data", "wb") as f:
        f.truncate(GIB)  # sparse: nothing is written, reading it would cost 1 GiB
    nodes = [
        oh.make_node("ReverseSequence", ["x", "lens"], ["r"], name="rs"),
        oh.make_node("Gather", ["weights", "index"], ["w"], name="pick"),
        oh.make_node("Add", ["r", "w"], ["y"], name="add"),
    ]
    graph = oh.make_graph(
        nodes,
        "big",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, ["T", "B", 1]),
            oh.make_tensor_value_info("lens", TP.INT64, ["B"]),
        ],
        [oh.make_tensor_value_info("y", TP.FLOAT, ["T", "B", 1])],
        [weights, oh.make_tensor("index", TP.INT64, [1], [7])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    path = folder / "big.onnx"
    path.write_bytes(model.SerializeToString())
    return path


# The peak is this process's own high-water mark (VmHWM, reset at exec). ru_maxrss is
# not: Linux carries the parent's high-water mark across fork and exec, so a large test
# process (torch and TVM loaded by the backend tests) would be measured instead.
_MEASURE = """
import json, resource, sys, time
from revseq.cli import main
start = time.perf_counter()
code = main(sys.argv[1:])
try:
    with open("/proc/self/status") as status:
        line = next(l for l in status if l.startswith("VmHWM:"))
    peak = int(line.split()[1]) / 1024
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"code": code, "seconds": time.perf_counter() - start, "peak_mib": peak}))
"""


def test_inlining_a_1_gib_model_never_reads_the_weights(tmp_path):
    path = _big_model(tmp_path)
    out = tmp_path / "inlined.onnx"
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, "inline", str(path), "-o", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    stats = json.loads(result.stdout.strip().splitlines()[-1])
    assert stats["code"] == 0, result.stderr
    # Python with onnx, onnxruntime and onnxscript imported takes ~150-250 MiB; reading
    # the weights would add 1024 MiB.
    assert stats["peak_mib"] < 400, stats
    print(f"1 GiB model inlined in {stats['seconds']:.2f} s, peak {stats['peak_mib']:.0f} MiB")
    written = onnx.load(out, load_external_data=False)
    assert written.graph.initializer[0].external_data[0].value == "big.data"
    assert "ReverseSequence" not in [n.op_type for n in written.graph.node]
    assert (tmp_path / "big.data").stat().st_blocks == 0  # still sparse: never rewritten


def _chain(count: int) -> onnx.GraphProto:
    """``count`` ReverseSequence nodes in a chain, each followed by 24 Relus."""
    nodes = []
    previous = "x"
    for i in range(count):
        nodes.append(oh.make_node("ReverseSequence", [previous, "lens"], [f"r{i}"]))
        for j in range(24):
            nodes.append(
                oh.make_node("Relu", [f"r{i}" if j == 0 else f"a{i}_{j - 1}"], [f"a{i}_{j}"])
            )
        previous = f"a{i}_23"
    return oh.make_graph(
        nodes,
        "many",
        [
            oh.make_tensor_value_info("x", TP.FLOAT, ["T", "B", 4]),
            oh.make_tensor_value_info("lens", TP.INT64, ["B"]),
        ],
        [oh.make_tensor_value_info(previous, TP.FLOAT, ["T", "B", 4])],
    )


@pytest.mark.parametrize("count", [100, 400])
def test_shape_questions_stay_linear_in_the_chain(count, monkeypatch):
    """Each node's dims are asked a bounded number of times, however long the chain
    before it: a walk back through producers stops where an earlier walk went."""
    asked = [0]
    dims = ShapeTable.dims

    def counted(self, value):
        asked[0] += 1
        return dims(self, value)

    monkeypatch.setattr(ShapeTable, "dims", counted)
    model = ir.from_proto(graph_model(_chain(count)))
    InlineReverseSequencePass()(model)
    RestoreReverseSequencePass()(model)
    assert asked[0] < 5 * count * 25, asked[0]  # walks to the input from each node: ~n²/2


def test_many_nodes_are_processed(capsys):
    graph = _chain(2000)  # 2000 ReverseSequence + 48,000 other nodes = 50,000 nodes
    model = ir.from_proto(graph_model(graph))
    start = time.perf_counter()
    InlineReverseSequencePass()(model)
    inline_s = time.perf_counter() - start
    start = time.perf_counter()
    RestoreReverseSequencePass()(model)
    restore_s = time.perf_counter() - start
    assert sum(n.op_type == "ReverseSequence" for n in model.graph) == 2000
    assert model.graph.num_nodes() == 50_000
    with capsys.disabled():
        print(f"\n50,000-node model: inline {inline_s:.2f} s, restore {restore_s:.2f} s")
    # Node for node the original: each reversal fused back where it was, wired as it was.
    wiring = [
        (n.op_type, [v.name for v in n.inputs], [v.name for v in n.outputs])
        for n in model.graph
    ]
    assert wiring == [(n.op_type, list(n.input), list(n.output)) for n in graph.node]
    # And what it computes, on a chain short enough to check each node alone.
    short = _chain(20)
    round_trip = ir.from_proto(graph_model(short))
    InlineReverseSequencePass()(round_trip)
    RestoreReverseSequencePass()(round_trip)
    assert revseq.check(ir.to_proto(round_trip), graph_model(short), trials=1).ok


def graph_model(graph: onnx.GraphProto) -> onnx.ModelProto:
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
