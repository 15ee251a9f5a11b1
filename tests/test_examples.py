"""Every example revseq shows runs, and does what its line says.

The examples of each command's ``--help``, and the ``revseq`` lines of the README's and
docs' shell blocks, run in a folder holding the files they name (``model.onnx``, a model
with a ReverseSequence; ``inlined.onnx``, its default output; ``ids.npy``...): one that
reverses token ids and embeds them, and for backends whose device has no int64 (WebGPU)
one that embeds them and reverses the floats; RKNN's target takes integers alone. Two
commands are parsed, not run: ``probe`` times every form on a backend (minutes) and
``webgpu-setup`` installs npm packages (CI runs it before the tests). The README's
synopsis names only options its commands take.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import shlex
import shutil

import helpers
import numpy as np
import onnx
import pytest

import revseq
from revseq.backends import unavailable
from revseq.cli import main
from revseq.cli._parser import build_parser
from revseq.ops.targets import TARGETS, resolve_target

ROOT = helpers.ROOT
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_PARSED_ONLY = {"probe", "webgpu-setup"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


Example = tuple[str, tuple[tuple[str, str], ...]]
"""Where an example is shown, and its lines in order: (command, what the line says)."""


HELP_NAMES = {"NAME": "tvm", "OTHER": "tract"}
"""What the help's examples run with in place of the backend names they leave open."""


def _help_examples() -> list[Example]:
    """Every ``--help``'s examples, each line an example of its own (``HELP_NAMES`` filled)."""
    parser = build_parser()
    helps = {"revseq --help": parser}
    helps.update({f"revseq {n} --help": p for n, p in _subparsers(parser).items()})
    found = []
    for where, command_parser in helps.items():
        epilog = command_parser.epilog or ""
        if "examples:" not in epilog:
            continue
        # A line that ends with a backslash goes on in the next, as in a shell.
        lines = re.sub(r"\s*\\\n\s*", " ", epilog.split("examples:", 1)[1]).splitlines()
        for line in lines:
            if line.strip().startswith("revseq "):
                command, *says = re.split(r"\s{2,}", line.strip(), maxsplit=1)
                command = " ".join(HELP_NAMES.get(w, w) for w in command.split(" "))
                found.append((where, ((command, "".join(says)),)))
    return found


def _page_examples() -> list[Example]:
    """Every shell block of the README and docs that runs ``revseq``: its lines in order
    (a later line may read what an earlier one wrote)."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", text, re.S):
            lines = []
            for line in block.splitlines():
                for part in line.split("&&"):
                    command, _, says = part.partition("#")
                    if command.strip().startswith("revseq "):
                        lines.append((command.strip(), says.strip()))
            if lines:
                found.append((str(page.relative_to(ROOT)), tuple(lines)))
    return found


EXAMPLES = _help_examples() + _page_examples()

EXPECTED_EXIT = {"revseq check model.onnx model.onnx --backend rknn": 1}
"""Examples shown for the difference they find: RKNN's own op is wrong on length 0."""


def test_examples_are_found_where_they_are_shown():
    wheres = {where for where, _ in EXAMPLES}
    assert {"revseq --help", "revseq inline --help", "revseq check --help"} <= wheres
    assert {"README.md", "docs/backends.md"} <= wheres


def _example_model(*, floats: bool = False) -> onnx.ModelProto:
    """Token ids [T, B] reversed by their lengths, then an embedding of 100 rows.

    ``floats``: embedded first, the embeddings reversed.
    """
    helper = onnx.helper
    emb = np.random.default_rng(0).standard_normal((100, 4)).astype(np.float32)
    nodes = [
        helper.make_node("ReverseSequence", ["ids", "lens"], ["rid"], name="reverse"),
        helper.make_node("Gather", ["emb", "rid"], ["y"], name="embed"),
    ]
    if floats:
        nodes = [
            helper.make_node("Gather", ["emb", "ids"], ["e"], name="embed"),
            helper.make_node("ReverseSequence", ["e", "lens"], ["y"], name="reverse"),
        ]
    graph = helper.make_graph(
        nodes,
        "tagger",
        [
            helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, ["T", "B"]),
            helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, ["B"]),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["T", "B", 4])],
        [onnx.numpy_helper.from_array(emb, "emb")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _example_folder(here: pathlib.Path, model: onnx.ModelProto) -> pathlib.Path:
    """The files the examples name, ``model`` as ``model.onnx``."""
    here.mkdir()
    onnx.save(model, here / "model.onnx")
    onnx.save(revseq.inline(model), here / "inlined.onnx")
    onnx.save(revseq.inline(model), here / "exported.onnx")
    rng = np.random.default_rng(1)
    np.save(here / "ids.npy", rng.integers(0, 100, (6, 4)))
    np.savez(here / "feeds.npz", lens=np.array([6, 0, 1, 3]))
    return here


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[bool, pathlib.Path]:
    """The example files by whether the model reverses floats."""
    root = tmp_path_factory.mktemp("examples")
    return {
        floats: _example_folder(root / str(floats), _example_model(floats=floats))
        for floats in (False, True)
    }


def _ops(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


def _backend(words: list[str]) -> str | None:
    if "--backend" in words:
        return words[words.index("--backend") + 1]
    return words[2] if words[1] == "probe" else None


def _targets(words: list[str]) -> list[str]:
    names, taking = [], False
    for word in words:
        if word.startswith("-"):
            taking = word == "--target"
        elif taking:
            names.append(word)
    return names


def _does_what_it_says(words: list[str], out: str, here: pathlib.Path) -> None:
    """What the command's line promises, beyond its exit status."""
    command = words[1]
    model = onnx.load(here / "model.onnx")
    if command in ("inline", "restore"):
        written = onnx.load(here / words[words.index("-o") + 1])
        source = onnx.load(here / words[2])
        ours = _ops(written) - _ops(source)
        if command == "inline":
            assert "ReverseSequence" not in _ops(written)
            assert revseq.check(source, written).ok
            targets = _targets(words)
            if targets:
                allowed = resolve_target(targets if len(targets) > 1 else targets[0])
                allowed_ops = allowed.allowed(dynamic="--overwrite-input-shape" not in words)
                if allowed_ops is not None:
                    assert ours <= allowed_ops | {"Constant"}, ours - allowed_ops
        else:
            assert "ReverseSequence" in _ops(written)
            assert revseq.check(model, written).ok
        if "--overwrite-input-shape" in words:
            name, _, dims = words[words.index("--overwrite-input-shape") + 1].partition(":")
            info = next(i for i in written.graph.input if i.name == name)
            declared = [d.dim_value for d in info.type.tensor_type.shape.dim]
            assert declared == [int(d) for d in dims.strip("[]").split(",")]
    elif command == "check":
        assert out.startswith("OK") or "node(s) identical" in out, out
    elif command == "targets":
        assert all(name in out for name in TARGETS)
    elif command == "demo":
        rows = [line for line in out.splitlines() if line.startswith("| ")][1:]
        assert rows and all("| bit-identical |" in row for row in rows), out


@pytest.mark.parametrize(
    ("where", "lines"),
    EXAMPLES,
    ids=[f"{where}: {lines[0][0]}" for where, lines in EXAMPLES],
)
def test_every_example_runs_and_does_what_its_line_says(
    where, lines, folders, tmp_path, monkeypatch, capsys
):
    commands = [shlex.split(command) for command, _ in lines]
    assert all(words[0] == "revseq" for words in commands)
    needed = {b for words in commands if (b := _backend(words)) and words[1] != "probe"}
    for backend in needed:
        if unavailable(backend) is not None:
            pytest.skip(unavailable(backend))
    webgpu = any("webgpu" in words for words in commands)
    source = folders[webgpu]  # WebGPU's device has no int64
    here = tmp_path / "example"
    shutil.copytree(source, here)  # a block's lines may write what the next reads
    monkeypatch.chdir(here)
    for words in commands:
        if words[1] in _PARSED_ONLY:
            assert build_parser().parse_args(words[1:]).handler is not None
            continue
        code = main(words[1:])
        out = capsys.readouterr().out
        command = " ".join(words)
        assert code == EXPECTED_EXIT.get(command, 0), (where, command, out)
        if code == 0:
            _does_what_it_says(words, out, here)


def _synopsis() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```text\n(revseq .*?)```", text, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.startswith("revseq ")]


@pytest.mark.parametrize("line", _synopsis())
def test_the_readme_synopsis_names_only_what_its_command_takes(line):
    words = line.split()
    command = _subparsers(build_parser())[words[1]]
    options = {s for action in command._actions for s in action.option_strings}
    for flag in re.findall(r"(?<![\w-])--?[a-z][\w-]*", line):
        assert flag in options, (line, flag)
