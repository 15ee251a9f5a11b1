"""Profiles as data: the planner steers around what the probes found, without a backend.

Every profile file was written by ``revseq probe NAME --write`` on the backend itself;
these tests read only the files, so they run everywhere. How the planner ranks forms by
their measured costs: ``tests/passes/inline/test_ranking.py``; the probe itself:
``tests/probe/test_probe.py``.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from helpers import all_op_types, constants_of, run_ort
from onnx import TensorProto, helper
from profile_cases import (
    DOCUMENTED,
    EVERY_OP,
    GATHER_OPS,
    PROBED,
    gather_of,
    gathers,
    one_node,
    probed,
)

import revseq
from revseq.cli import main
from revseq.ops.reference import reverse_sequence
from revseq.ops.targets import PORTABLE, TARGETS, combine, load_profiles
from revseq.ops.targets.profile import Profile


def test_every_backend_has_a_probed_profile_and_documents_stay_marked():
    for name in PROBED:
        profile = TARGETS[name]
        assert profile.verified and profile.backend_version.startswith(name)
        assert profile.forms is not None and profile.dtypes is not None
    for name in DOCUMENTED:
        assert TARGETS[name].source == "documented" and not TARGETS[name].verified


def test_profiles_round_trip_through_json():
    for profile in load_profiles().values():
        if profile.name == PORTABLE:
            continue
        again = Profile.from_json(json.loads(json.dumps(profile.to_json())))
        assert again.to_json() == profile.to_json()


def test_portable_is_what_every_probed_profile_runs():
    """Every probed host profile but those kept out of the default (``yields``)."""
    probed = [TARGETS[n] for n in PROBED if not TARGETS[n].yields]
    computed = combine(probed)
    for profile in probed:
        assert computed.static_ops <= profile.static_ops
        assert computed.dynamic_ops <= profile.dynamic_ops
    assert TARGETS[PORTABLE].static_ops == computed.static_ops


def test_onnx2torch_gets_gather_nd_without_batch_dims():
    """Probed: onnx2torch 1.5.15 raises on GatherND with batch_dims != 0."""
    model = one_node([4, 5, 2, 3], batch_axis=0, time_axis=1)
    steered = revseq.inline(model, strategy="gather_nd", target="onnx2torch")
    assert all(
        a.i == 0 for n in gathers(steered) for a in n.attribute if a.name == "batch_dims"
    )
    free = revseq.inline(model, strategy="gather_nd", target="onnxruntime")
    assert any(a.i for n in gathers(free) for a in n.attribute if a.name == "batch_dims")


def test_onnx2torch_unsigned_types_avoid_gather_elements():
    """Probed: torch's gather has no kernel for uint16/32/64; single-element rows of
    them go by the row form's Gather, which onnx2torch's costs on such rows put before
    GatherND's tuple per element."""
    model = one_node([5, 4, 1], elem=TensorProto.UINT16)
    inlined = revseq.inline(model, target="onnx2torch")
    assert "GatherElements" not in {n.op_type for n in gathers(inlined)}
    assert gather_of(inlined) == "Gather"
    costs = TARGETS["onnx2torch"].costs["matrix:static"]
    assert costs["gather_rows"].ratio < costs["gather_nd"].ratio


def _flat_gathers(model):
    """The GatherElements of ``model`` that read a 1-D view (a Reshape to one dim)."""
    made_by = {out: n for n in model.graph.node for out in n.output}
    consts = constants_of(model)
    views = {
        out
        for out, node in made_by.items()
        if node.op_type == "Reshape"
        and list(getattr(consts.get(node.input[1]), "dims", ())) == [1]
    }
    return [n for n in gathers(model) if n.op_type == "GatherElements" and n.input[0] in views]


@pytest.mark.parametrize("elem", [TensorProto.FLOAT16, TensorProto.BFLOAT16])
def test_half_floats_keep_a_signalling_nan_where_gather_elements_quiets_it(elem):
    """Probed: torch's gather sets a signalling float16 or bfloat16 NaN's quiet bit on
    data of two dims or more and keeps it on 1-D data, so the default never gathers
    single-element rows of them with GatherElements on the matrix: static ones with
    GatherElements on a 1-D view (``GatherElements:flat``), or on a few dozen bytes by
    the row form's Gather (its nodes fewer, what a tensor that small pays for), and with
    symbolic dims (a view that would need ``allowzero``, which onnx2torch lacks) by the
    row form's Gather, whose worst cost on such rows over the probed backends is below
    GatherND's; OpenVINO quiets one in every gather and tinygrad in every gather by a
    computed index, so neither has float16 at all and each refuses it by name."""
    for target in (None, "onnx2torch"):
        for dims in ([5, 4], [5, 4, 1]):
            tiny = revseq.inline(one_node(dims, elem=elem), target=target)
            assert [n.op_type for n in gathers(tiny)] == ["Gather", "Gather"]  # a table
        static = revseq.inline(one_node([2000, 16], elem=elem), target=target)
        assert gather_of(static) == "GatherElements"
        assert len(_flat_gathers(static)) == 1
        symbolic = revseq.inline(one_node(["T", "B"], elem=elem), target=target)
        assert [n.op_type for n in gathers(symbolic)] == ["Gather"]
    assert not TARGETS["openvino"].has("float16") and not TARGETS["tinygrad"].has("float16")
    with pytest.raises(revseq.StrategyError, match="moves no float16"):
        revseq.inline(one_node([5, 4, 3], elem=TensorProto.FLOAT16), target="tinygrad")


def test_a_1d_gather_elements_moves_only_what_its_own_probe_moved():
    """A profile whose GatherElements moves float16 on 1-D data only gathers static
    single-element rows as the 1-D view, exactly (signalling NaNs included), and never
    the matrix; without the flat variant's float16 it takes another gather."""
    from revseq.equivalence.inputs.values import random_array
    from revseq.ops.reference import reverse_sequence_model

    flat_only = dataclasses.replace(
        probed("alpha", dynamic_ops=EVERY_OP, gather_elements=frozenset({"float32"})),
        dtypes={
            "Gather": frozenset({"float16"}),
            "GatherElements": frozenset({"float32"}),
            "GatherElements:flat": frozenset({"float32", "float16"}),
            "GatherND": frozenset({"float16"}),
        },
    )
    cases = [([5, 4], 1, 0), ([4, 5], 0, 1), ([5, 4, 1, 1], 1, 0), ([5, 3, 4], 2, 0)]
    for dims, batch_axis, time_axis in cases:
        model = reverse_sequence_model(
            dims, TensorProto.FLOAT16, batch_axis=batch_axis, time_axis=time_axis,
            domain="revseq",
        )  # fmt: skip
        inlined = revseq.inline(model, target=flat_only)
        assert gather_of(inlined) == "GatherElements", dims
        assert len(_flat_gathers(inlined)) == 1, dims
        x = random_array(np.random.default_rng(0), TensorProto.FLOAT16, tuple(dims))
        lens = np.array([0, 1, dims[time_axis], 2][: dims[batch_axis]], dtype=np.int64)
        expected = reverse_sequence(x, lens, batch_axis=batch_axis, time_axis=time_axis)
        for optimize in (False, True):
            (got,) = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimize)
            assert got.tobytes() == expected.tobytes(), (dims, optimize)
    symbolic = revseq.inline(one_node(["T", "B"], TensorProto.FLOAT16), target=flat_only)
    assert not _flat_gathers(symbolic)
    without = dataclasses.replace(
        flat_only, dtypes={**flat_only.dtypes, "GatherElements:flat": frozenset({"float32"})}
    )
    inlined = revseq.inline(one_node([5, 4], TensorProto.FLOAT16), target=without)
    assert gather_of(inlined) != "GatherElements"


def test_tinygrad_bool_avoids_gather_nd():
    """Probed: tinygrad 0.14's GatherND returns int32 for bool data."""
    model = one_node([5, 4, 3], elem=TensorProto.BOOL)
    used = {n.op_type for n in gathers(revseq.inline(model, target="tinygrad"))}
    assert "GatherND" not in used


@pytest.mark.parametrize(
    ("target", "forbidden"),
    [
        # TVM's Relax frontend: CumSum, ReduceProd and ConstantOfShape fail on symbolic
        # dims (GatherND converts where its index columns share one shape: gather_nd).
        ("tvm", {"CumSum", "ReduceProd", "ConstantOfShape", "Flatten"}),
        # tract cannot infer Flatten's output from symbolic dims (the row form views
        # [-1, 3] instead); its int32 index needs no ReduceSum for the stride (its lean
        # index sums one dim read from the shape for Range's scalar: ReduceSum:scalar).
        ("tract", {"Flatten", "ReduceProd"}),
        (PORTABLE, {"CumSum", "ReduceProd", "ConstantOfShape", "Flatten", "ReduceSum"}),
    ],
)
def test_dynamic_shapes_use_what_the_frontends_convert(target, forbidden):
    model = revseq.inline(one_node(["T", "B", 3]), target=target)
    used = set(all_op_types(model))
    assert used & set(GATHER_OPS)
    assert not used & forbidden
    # A ReduceSum only ever sums one dim read from the shape (a scalar, not a stride).
    made_by = {out: n for n in model.graph.node for out in n.output}
    for node in model.graph.node:
        if node.op_type == "ReduceSum":
            source = made_by[node.input[0]]
            while source.op_type == "Cast":
                source = made_by[source.input[0]]
            span = {a.name: a.i for a in source.attribute}
            assert source.op_type == "Shape" and span["end"] - span["start"] == 1


def test_the_default_refuses_no_type():
    """uint16/32/64 take the row form's Gather (onnx2torch's GatherElements moves none of
    them), static or with symbolic time and batch, from opset 10 (upgraded to 11);
    GatherND with every dim symbolic (tract cannot Flatten symbolic dims)."""
    for elem in (TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64):
        for opset in (10, 11, 18):
            for dims in (["T", "B", 3], [5, 4, 3], ["T", "B", "F"]):
                model = one_node(dims, elem=elem)
                model.opset_import[0].version = opset
                used = {n.op_type for n in gathers(revseq.inline(model))}
                assert used == ({"GatherND"} if "F" in dims else {"Gather"}), (opset, dims)


def test_constant_lengths_avoid_a_constant_gather_index_where_a_backend_lacks_it():
    """Probed: tinygrad 0.14 reads a constant Gather index of two dims as a flat list.
    onnxruntime reads it right, and takes it where the data outweighs a node (0.23 MiB
    here: on a few hundred bytes a form of fewer nodes wins there)."""

    def constant_lengths(dims):
        model = one_node(dims)
        model.graph.input.pop()
        model.graph.initializer.append(
            helper.make_tensor("lens", TensorProto.INT64, [4], [0, 1, 5, 2])
        )
        return model

    for target in ("tinygrad", None):
        for dims in ([5, 4, 3], [5, 4, 3000]):
            assert "Gather" not in {
                n.op_type
                for n in gathers(revseq.inline(constant_lengths(dims), target=target))
            }
    large = revseq.inline(constant_lengths([5, 4, 3000]), target="onnxruntime")
    assert {n.op_type for n in gathers(large)} == {"Gather"}


def _lens_readers(model):
    return [n.op_type for n in model.graph.node if "lens" in n.input]


def test_a_static_t_clamps_with_one_clip_where_it_is_exact_once_cast():
    """onnx2torch's integer Clip comes out float32 (its converter clamps with float
    bounds): exact once cast back (``Clip:cast``, probed on every backend), so the
    default and its own target clamp to a static T with a Clip and a Cast, not two
    selects; a target with an exact Clip needs no Cast, one with neither selects."""
    model = one_node([5, 4, 3])
    for target in (None, "onnx2torch"):
        inlined = revseq.inline(model, target=target)
        assert _lens_readers(inlined) == ["Clip"], target
        clip = next(n for n in inlined.graph.node if n.op_type == "Clip")
        readers = [n.op_type for n in inlined.graph.node if clip.output[0] in n.input]
        assert readers == ["Cast"], target
        rng = np.random.default_rng(0)
        x = rng.standard_normal((5, 4, 3)).astype(np.float32)
        extremes = [2**62, -(2**62), 2**24 + 1, 4]
        for values in ([0, 1, 5, 3], [-4, 6, 2**40, -(2**40)], extremes):
            lens = np.array(values, np.int64)
            expected = reverse_sequence(x, np.clip(lens, 0, 5), batch_axis=1, time_axis=0)
            for optimized in (False, True):
                got = run_ort(inlined, {"x": x, "lens": lens}, optimize=optimized)[0]
                assert got.tobytes() == expected.tobytes()
    exact = revseq.inline(model, target="onnxruntime")
    clip = next(n for n in exact.graph.node if n.op_type == "Clip")
    assert [n.op_type for n in exact.graph.node if clip.output[0] in n.input] == ["Gather"]
    neither = probed("alpha", dynamic_ops=EVERY_OP, gather_elements=frozenset({"float32"}))
    assert "Clip" not in all_op_types(revseq.inline(model, target=neither))
    # An op-type target that names Clip has Clip:cast too (an exact Clip stays exact).
    named = revseq.inline(model, target=sorted(neither.static_ops | {"Clip"}))
    assert _lens_readers(named) == ["Clip"]
    # Past 2**24 float32 no longer holds every length: selects, even where Clip:cast.
    long = revseq.inline(one_node([2**24 + 1, 4, 3]))
    assert "Clip" not in all_op_types(long)


def test_a_default_no_form_fits_names_the_backends_in_the_way():
    """Synthetic: one backend lacks GatherND on symbolic dims, the other's GatherElements
    moves no uint16; the default they make refuses uint16 there, naming both."""
    every_op = frozenset(TARGETS[PORTABLE].static_ops) | {"Index:int64"}
    default = combine(
        [
            probed("alpha", dynamic_ops=every_op - {"GatherND"},
                    gather_elements=frozenset({"float32", "uint16"})),
            probed("beta", dynamic_ops=every_op, gather_elements=frozenset({"float32"})),
        ]
    )  # fmt: skip
    model = one_node(["T", "B", 3], elem=TensorProto.UINT16)
    with pytest.raises(revseq.StrategyError) as error:
        revseq.inline(model, target=default)
    message = str(error.value)
    assert "GatherND, which alpha 1.0 lacks" in message
    assert "moves no uint16 on beta 1.0" in message
    assert "declare static input shapes" in message
    assert gathers(revseq.inline(one_node([5, 4, 3], elem=TensorProto.UINT16), target=default))


def test_a_named_target_refuses_a_type_it_lacks_with_its_version():
    model = one_node(["T", "B", 3], elem=TensorProto.COMPLEX64)
    refusal = r"target 'tract' .*probed with tract 0\.23"
    with pytest.raises(revseq.StrategyError, match=refusal):
        revseq.inline(model, target="tract")
    assert gathers(revseq.inline(model))  # the default serves it (tract has no complex)


def test_targets_command_marks_each_source(capsys):
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:] if line.strip()}
    for name in PROBED:
        assert rows[name] == "probed", out
    for name in DOCUMENTED:
        assert rows[name] == "documented", out


def test_several_backends_get_output_that_runs_on_each():
    """target=("onnx2torch", "tvm"): what both run, not what either does (TVM's GatherND
    takes batch_dims, onnx2torch's raises on it)."""
    pair = revseq.ops.targets.resolve_target(("tvm", "onnx2torch"))
    assert pair.name == "onnx2torch+tvm" and pair.members == (
        TARGETS["onnx2torch"],
        TARGETS["tvm"],
    )
    model = one_node(["B", "T", 3], batch_axis=0, time_axis=1)
    assert any(
        a.i
        for n in gathers(revseq.inline(model, strategy="gather_nd", target="tvm"))
        for a in n.attribute
    )  # batch_dims
    both = revseq.inline(model, strategy="gather_nd", target=("onnx2torch", "tvm"))
    assert not any(a.i for n in gathers(both) for a in n.attribute if a.name == "batch_dims")
    assert revseq.ops.targets.resolve_target(["tvm"]) is TARGETS["tvm"]
    assert revseq.ops.targets.resolve_target(["any", "tvm"]) is TARGETS["tvm"]


def test_mnn_gets_no_batch_dims_where_tuples_hold_two_coordinates():
    """MNN 3.6.1 reads GatherND batch_dims wrong where its tuples hold two coordinates
    (probe GatherND:batch_dims:tuples): a batch axis after the time axis takes every
    leading axis as a coordinate there; one coordinate keeps batch_dims."""
    from revseq.ops.reference import reverse_sequence_model

    def batch_dims(dims, batch_axis, time_axis, target):
        model = reverse_sequence_model(
            dims, TensorProto.FLOAT, batch_axis=batch_axis, time_axis=time_axis,
            domain="revseq",
        )  # fmt: skip
        inlined = revseq.inline(model, target=target, strategy="gather_nd")
        (node,) = [n for n in inlined.graph.node if n.op_type == "GatherND"]
        return {a.name: a.i for a in node.attribute}.get("batch_dims", 0)

    assert "GatherND:batch_dims:tuples" not in TARGETS["mnn"].static_ops
    assert batch_dims([3, 5, 2, 4, 6], 3, 1, "mnn") == 0
    assert batch_dims([3, 5, 2, 4, 6], 3, 1, "onnxruntime") == 1
    assert batch_dims([4, 5, 6], 0, 1, "mnn") == 1  # one coordinate: (src,)


def test_a_backend_that_falls_back_yields_where_no_form_fits_every_member():
    """Synthetic: "gpu" (falls back to the CPU, like WebGPU) moves bool only with Gather
    and has no int64 arithmetic; "alpha" runs no row form on symbolic dims. With static
    dims the default fits both (int32 index, the row form); with symbolic dims no form
    does, so "gpu" yields: the output is alpha's, in int64, and nothing is refused. A
    member that does not fall back never yields."""
    ops = EVERY_OP
    gpu = dataclasses.replace(
        probed("gpu", dynamic_ops=ops, gather_elements=frozenset({"float32"})),
        static_ops=ops - {"Index:int64"} | {"Index:int32"},
        dynamic_ops=ops - {"Index:int64"} | {"Index:int32"},
        dtypes={g: frozenset({"float32", "bool"} if g == "Gather" else {"float32"})
                for g in GATHER_OPS},
        forms={"static": frozenset({"gather_rows"}), "dynamic": frozenset({"gather_rows"})},
        falls_back=True,
    )  # fmt: skip
    alpha = probed("alpha", dynamic_ops=ops, gather_elements=frozenset({"float32", "bool"}))
    alpha = dataclasses.replace(
        alpha,
        static_ops=alpha.static_ops | {"Index:int32"},
        dynamic_ops=alpha.dynamic_ops | {"Index:int32"},
        dtypes=dict.fromkeys(GATHER_OPS, frozenset({"float32", "bool"})),
    )
    default = combine([gpu, alpha])
    static = revseq.inline(one_node([5, 4, 3], elem=TensorProto.BOOL), target=default)
    assert gather_of(static) == "Gather"
    symbolic = revseq.inline(one_node(["T", "B", 3], elem=TensorProto.BOOL), target=default)
    assert gather_of(symbolic) in ("GatherND", "GatherElements")
    strict = combine([dataclasses.replace(gpu, falls_back=False), alpha])
    with pytest.raises(revseq.StrategyError):
        revseq.inline(one_node(["T", "B", 3], elem=TensorProto.BOOL), target=strict)


def test_user_profiles_are_read_over_the_shipped_ones(tmp_path):
    import os
    import subprocess
    import sys

    from revseq.ops.targets import TARGETS as shipped
    from revseq.probe.profile_file import saved_profile, write_profile

    mine = dataclasses.replace(shipped["tvm"], name="mytvm", backend_version="tvm 9.9")
    path = write_profile(mine, tmp_path)
    assert path == tmp_path / "mytvm.json"
    assert saved_profile("mytvm", tmp_path).backend_version == "tvm 9.9"
    program = (
        "import revseq; print(revseq.TARGETS['mytvm'].backend_version, "
        "revseq.TARGETS['tvm'].backend_version)"
    )
    env = {**os.environ, "REVSEQ_PROFILES": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[:2] == ["tvm", "9.9"] and out[2:] == shipped["tvm"].backend_version.split()
    assert json.loads(path.read_text())["name"] == "mytvm"


def test_a_deployment_runtime_is_kept_out_of_the_default_and_served_by_its_own_target():
    """OpenCV lacks exact int32 index arithmetic with static dims (its probe), which
    WebGPU needs: in the default it would push every static index to int64 and off the
    GPU; kept out, it narrows no one's output, and its own target serves it."""
    assert TARGETS["opencv"].yields and not TARGETS["tvm"].yields
    portable = TARGETS[PORTABLE]
    assert "opencv" not in {m.name for m in portable.members}
    assert {"tvm", "tract", "webgpu"} <= {m.name for m in portable.members}
    assert "Index:int32" in portable.static_ops
    assert "Index:int32" not in TARGETS["opencv"].static_ops
    model = one_node(["d0", "d1", "d2"], elem=TensorProto.DOUBLE)
    assert gathers(revseq.inline(model))
    assert gathers(revseq.inline(model, target="opencv"))


def test_rknn_s_profile_says_what_it_rounds_and_its_adapter_reads_it_there():
    """RKNN's int64 of rank 4 through float64: in the profile, and read back unchanged."""
    from revseq.backends._adapter import Backend, adapter
    from revseq.errors import ProfileError
    from revseq.ops.targets import TARGETS
    from revseq.ops.targets.profile import Profile

    profile = TARGETS["rknn"]
    assert profile.rounding[0][:2] == ("int64", 4)
    assert Backend("rknn", adapter("rknn")).rounding("int64", 4) == profile.rounding[0][2]
    assert Profile.from_json(profile.to_json()) == profile
    with pytest.raises(ProfileError, match="element type in rounding"):
        Profile.from_json(
            {**profile.to_json(), "rounding": {"int65": {"from_rank": 4, "how": ""}}}
        )
