"""What revseq writes on a fixed workload, as one digest per case: to compare two installs.

A restructuring must leave every output byte for byte as it was. This walks a fixed
set of models (the bundled ones, the exporters' fixtures and small generated ones:
ranks 2-4, both layouts, constant and run-time lengths, static and symbolic dims,
several element types) through ``inline`` under every strategy and every target, with
and without ``as_function``, and through ``restore`` after inline. Each case is one
line: its name and the sha256 of the model written, or the refusal's message.

    python -m bench.outputs > now.txt
    PYTHONPATH=/path/to/other/site python -m bench.outputs > before.txt
    python -m bench.outputs --compare before.txt now.txt

It reads only the public API (``revseq.inline``, ``restore``, ``STRATEGIES``,
``TARGETS``), so that any two versions answer the same questions.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import pathlib
import sys
from collections.abc import Iterator

import onnx
from onnx import TensorProto, helper

_ROOT = pathlib.Path(__file__).resolve().parents[1]
_FOLDERS = (_ROOT / "models", _ROOT / "tests" / "fixtures")
_DTYPES = (TensorProto.FLOAT, TensorProto.INT32, TensorProto.UINT8, TensorProto.FLOAT16)


_OP_LISTS = (
    ("Slice", "Concat"),
    ("Gather", "Shape", "Range", "Squeeze", "Unsqueeze", "Sub", "Add", "Cast", "Reshape"),
    ("GatherElements", "Shape", "ConstantOfShape", "CumSum", "Min", "Max", "Mul", "Add",
     "Sub", "Expand"),
    ("GatherND", "Shape", "Clip", "Mul", "Add", "Sub", "Concat", "Unsqueeze", "Expand"),
)  # fmt: skip
"""Targets given as op types: what a form lacks there is said, or worked around."""

_FIXED_SHAPES = {
    "tf_crnn_reader.onnx": {"image": [1, 40, 16, 1]},
    "tf_bilstm_tagger.onnx": {"ids": [1, 12]},
    "tf_go_backwards.onnx": {"x": [1, 10, 4]},
    "tf_bird_flip.onnx": {"mel": [1, 32, 20]},
    "tf_reverse_sequence_dense.onnx": {"x": [1, 9, 3], "lens": [1]},
}
"""Exports inlined at fixed sizes too, as runtimes that build for them are given."""


def _small(rank: int, batch_axis: int, static: bool, constant: bool, dtype: int):
    """One ReverseSequence node: data of ``rank``, lengths given or constant."""
    time_axis = 1 - batch_axis
    sizes = [3, 5, 2, 4][:rank]
    dims: list[int | str] = list(sizes) if static else [f"d{i}" for i in range(rank)]
    data = helper.make_tensor_value_info("x", dtype, dims)
    out = helper.make_tensor_value_info("y", dtype, dims)
    batch = sizes[batch_axis]
    inputs, initializers = [data], []
    if constant:
        lens = list(range(batch, 0, -1))[:batch]
        initializers.append(helper.make_tensor("lens", TensorProto.INT64, [batch], lens))
    else:
        batch_dim = dims[batch_axis]
        inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT64, [batch_dim]))
    node = helper.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis
    )
    graph = helper.make_graph([node], "small", inputs, [out], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _models() -> Iterator[tuple[str, onnx.ModelProto]]:
    for folder in _FOLDERS:
        for path in sorted(folder.glob("*.onnx")):
            yield f"{folder.name}/{path.name}", onnx.load(path)
    for rank, batch_axis, static, constant, dtype in itertools.product(
        (2, 3, 4), (0, 1), (True, False), (True, False), _DTYPES
    ):
        name = (
            f"small/r{rank}-b{batch_axis}-{'static' if static else 'symbolic'}-"
            f"{'constant' if constant else 'given'}-{TensorProto.DataType.Name(dtype)}"
        )
        yield name, _small(rank, batch_axis, static, constant, dtype)


def _written(call, *args, **options) -> str:
    try:
        model = call(*args, **options)
    except Exception as e:  # a refusal is an output too: its message must not change
        return f"{type(e).__name__}: {' '.join(str(e).split())}"
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()


def lines() -> Iterator[str]:
    """One line per case: ``model | call | digest or refusal``."""
    import revseq

    targets = [None, *sorted(revseq.TARGETS), *_OP_LISTS]
    for name, model in _models():
        for strategy, target in itertools.product(revseq.STRATEGIES, targets):
            call = f"inline strategy={strategy} target={target}"
            written = _written(revseq.inline, model, strategy=strategy, target=target)
            yield f"{name} | {call} | {written}"
        written = _written(revseq.inline, model, as_function=True)
        yield f"{name} | inline as_function | {written}"
        written = _written(lambda m: revseq.restore(revseq.inline(m)), model)
        yield f"{name} | restore(inline) | {written}"
        yield f"{name} | restore | {_written(revseq.restore, model)}"
        shapes = _FIXED_SHAPES.get(name.rpartition("/")[2])
        for target in targets if shapes else ():
            written = _written(revseq.inline, model, target=target, input_shapes=shapes)
            yield f"{name} | inline target={target} input_shapes={shapes} | {written}"


def compare(before: pathlib.Path, now: pathlib.Path, new_targets: set[str]) -> int:
    """Print the cases whose output changed (cases of ``new_targets`` left out)."""
    old = before.read_text().splitlines()
    new = [
        line
        for line in now.read_text().splitlines()
        if not any(f"target={t} " in line + " " for t in new_targets)
    ]
    keyed_old = {line.rpartition(" | ")[0]: line for line in old}
    keyed_new = {line.rpartition(" | ")[0]: line for line in new}
    changed = [k for k in keyed_old if keyed_new.get(k) != keyed_old[k]]
    added = [k for k in keyed_new if k not in keyed_old]
    for key in changed:
        print(f"changed: {keyed_old[key]}\n     now: {keyed_new.get(key, '(no such case)')}")
    for key in added:
        print(f"added: {keyed_new[key]}")
    same = len(keyed_old) - len(changed)
    print(f"{same} of {len(keyed_old)} cases the same, {len(changed)} changed, ", end="")
    print(f"{len(added)} new")
    return 1 if changed or added else 0


def main(argv: list[str] | None = None) -> int:
    """Print the listing, or compare two."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--compare",
        nargs=2,
        type=pathlib.Path,
        metavar=("BEFORE", "NOW"),
        help="compare two listings this command printed",
    )
    parser.add_argument(
        "--new-target",
        action="append",
        default=[],
        help="a target the earlier version lacked: its cases are left out of --compare",
    )
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare, set(args.new_target))
    for line in lines():
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
