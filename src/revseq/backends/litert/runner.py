"""LiteRT (TFLite): the model converted by onnx2tf to a ``.tflite``, run by its interpreter.

Served in the environment ``REVSEQ_LITERT_PYTHON`` names (onnx2tf 2.x needs Python 3.12
or later). onnx2tf rewrites the file it reads (its onnxsim step saves over it): it is
given a copy, in a folder of its own. Every input keeps its ONNX layout
(``keep_shape_absolutely_input_names``: no NCHW to NHWC transposition of a sequence)
and a plain name of its own (``input_0``: onnx2tf rewrites names holding ``:``, and
then transposes that input after all), kept in the ``.tflite``
(``copy_onnx_input_output_names_to_tflite``). A symbolic dim is -1 in the
``.tflite``: each run resizes the inputs to what it is given. The interpreter applies
its default delegate, XNNPACK, as an app's does; the runner's ``delegation`` says which
of the model's ops XNNPACK took and which the interpreter's own kernels run. A
converted LSTM keeps its state in variable tensors across runs: each run resets them.
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile

import numpy as np

_DELEGATE = "DELEGATE"  # how the interpreter lists a node a delegate took over


def _own_tools_first() -> None:
    """Put this environment's commands first: onnx2tf runs ``onnxsim`` by name."""
    here = os.path.dirname(sys.executable)
    os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])


_own_tools_first()


def _convert(model_bytes: bytes, names: list[str], folder: str) -> str:
    """Convert a copy of the model with onnx2tf; returns the float32 ``.tflite``'s path."""
    import onnx2tf

    path = os.path.join(folder, "model.onnx")
    with open(path, "wb") as f:
        f.write(model_bytes)
    out = os.path.join(folder, "tflite")
    onnx2tf.convert(
        input_onnx_file_path=path,
        output_folder_path=out,
        keep_shape_absolutely_input_names=names or None,
        copy_onnx_input_output_names_to_tflite=True,
        verbosity="error",
    )
    converted = os.path.join(out, "model_float32.tflite")
    if not os.path.exists(converted):
        raise RuntimeError("onnx2tf wrote no float32 .tflite (its log says why)")
    return converted


def _delegation(interpreter) -> dict[str, list[str]]:
    """The ops XNNPACK took (``xnnpack``) and those left to LiteRT's kernels (``litert``).

    The interpreter lists the model's nodes, then one ``DELEGATE`` node per partition a
    delegate took, with the partition's boundary as its inputs and outputs: a node is
    in a partition when it is reached walking back from the partition's outputs
    without crossing its inputs.
    """
    ops = interpreter._get_ops_details()  # the only listing of the nodes the API gives
    producer = {t: op for op in ops if op["op_name"] != _DELEGATE for t in op["outputs"]}
    taken: set[int] = set()
    for delegate in (op for op in ops if op["op_name"] == _DELEGATE):
        boundary = {int(t) for t in delegate["inputs"]}
        pending = [int(t) for t in delegate["outputs"]]
        while pending:
            tensor = pending.pop()
            op = producer.get(tensor)
            if tensor in boundary or op is None or op["index"] in taken:
                continue
            taken.add(op["index"])
            pending.extend(int(t) for t in op["inputs"] if t >= 0)
    found: dict[str, list[str]] = collections.defaultdict(list)
    for op in ops:
        if op["op_name"] != _DELEGATE:
            found["xnnpack" if op["index"] in taken else "litert"].append(op["op_name"])
    return dict(found)


def _plain_names(model) -> tuple[list[str], list[str]]:
    """Name the inputs ``input_0``... and the outputs ``output_0``...; the old names.

    onnx2tf rewrites a name that holds ``:`` or ``/`` (tf2onnx writes ``x:0``), and
    then no longer keeps that input's layout: the copy it converts uses plain names.
    """
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    outputs = [o.name for o in model.graph.output]
    renamed = {name: f"input_{i}" for i, name in enumerate(inputs)}
    renamed.update({name: f"output_{i}" for i, name in enumerate(outputs)})
    for value in [*model.graph.input, *model.graph.output]:
        value.name = renamed.get(value.name, value.name)
    pending = [model.graph]
    while pending:
        graph = pending.pop()
        for node in graph.node:
            node.input[:] = [renamed.get(n, n) for n in node.input]
            node.output[:] = [renamed.get(n, n) for n in node.output]
            pending.extend(a.g for a in node.attribute if a.HasField("g"))
            pending.extend(g for a in node.attribute for g in a.graphs)
    return inputs, outputs


def prepare(model_bytes: bytes):
    """Convert the model; returns a function of the inputs by name."""
    import onnx
    from ai_edge_litert.interpreter import Interpreter

    model = onnx.load_from_string(model_bytes)
    inputs, outputs = _plain_names(model)
    plain = [f"input_{i}" for i in range(len(inputs))]
    with tempfile.TemporaryDirectory(prefix="revseq-litert-") as folder:
        converted = _convert(model.SerializeToString(), plain, folder)
        with open(converted, "rb") as f:
            flatbuffer = f.read()
    interpreter = Interpreter(model_content=flatbuffer)
    details = {d["name"]: d for d in interpreter.get_input_details()}
    produced = {d["name"]: d for d in interpreter.get_output_details()}
    # An input no node reads is dropped by the conversion: it is not fed.
    fed = {
        name: details[f"input_{i}"] for i, name in enumerate(inputs) if f"input_{i}" in details
    }
    missing = [f"output_{i}" for i in range(len(outputs)) if f"output_{i}" not in produced]
    if missing:
        raise RuntimeError(f"onnx2tf's .tflite lacks the model's output(s) {missing}")
    shapes: dict[str, tuple[int, ...]] = {}

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        given = {n: np.ascontiguousarray(feeds[n]) for n in fed}
        wanted = {n: v.shape for n, v in given.items()}
        if wanted != shapes:
            shapes.clear()  # until allocated anew: a failed allocation leaves none
            for name, shape in wanted.items():
                interpreter.resize_tensor_input(fed[name]["index"], shape, strict=False)
            interpreter.allocate_tensors()
            shapes.update(wanted)
            run.delegation = _delegation(interpreter)  # type: ignore[attr-defined]
        for name, value in given.items():
            interpreter.set_tensor(fed[name]["index"], value)
        # A converted LSTM keeps its state in variable tensors from one run to the
        # next: each run starts from the model's initial state, as ONNX's does.
        interpreter.reset_all_variables()
        try:
            interpreter.invoke()
        except Exception:  # a node that failed to prepare: the next run prepares again
            shapes.clear()  # (else it says only "Invoke called on model that is not ready")
            raise
        return [
            interpreter.get_tensor(produced[f"output_{i}"]["index"]).copy()
            for i in range(len(outputs))
        ]

    run.delegation = None  # type: ignore[attr-defined]
    return run
