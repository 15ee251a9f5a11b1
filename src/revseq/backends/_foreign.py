"""Adapters whose runtime lives in a Python environment of its own.

A runtime whose pins clash with revseq's is installed in an environment of its own, and
an environment variable names that environment's interpreter
(``REVSEQ_RKNN_PYTHON=/path/to/venv/bin/python``). Its runner (the ``runner.py`` of
its room, a plain script that imports nothing from revseq) is served there by
``_serve.py``, in a process that a crash takes down alone: models travel as bytes,
arrays in numpy's ``.npy`` format, with the lowest IR version their opsets allow (the
environment's onnx is older). Its failures are Python errors in their own process: the
worker is kept after one.
"""

from __future__ import annotations

__all__ = ["missing", "prepare", "served", "served_adapter", "version"]

import atexit
import functools
import io
import itertools
import os
import pathlib
import shutil
import subprocess

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, Inputs, MeasuredOutputs, Runner, lowest_ir
from revseq.backends._isolated import _Worker

_FOLDER = pathlib.Path(__file__).parent  # the rooms, and the server beside them
_WORKERS: dict[str, _Worker] = {}
_KEYS = itertools.count()


def _interpreter(variable: str) -> str | None:
    value = os.environ.get(variable)
    if not value:
        return None
    return shutil.which(value) or (value if os.access(value, os.X_OK) else None)


def _run(python: str, code: str) -> tuple[int, str, str]:
    """Run ``code`` under ``python``: (exit status, stdout, stderr); -1 where it cannot."""
    try:
        done = subprocess.run(
            [python, "-c", code], check=False, capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, "", str(e)
    return done.returncode, done.stdout, done.stderr


@functools.cache
def _imports(python: str, module: str) -> str | None:
    """Why ``python`` cannot import ``module``, or None when it can."""
    status, _, stderr = _run(python, f"import {module}")
    if status == 0:
        return None
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {status}"


def missing(name: str, variable: str, module: str) -> str | None:
    """Why backend ``name`` cannot run here, or None when its environment is set up."""
    how = f"docs/backends.md#{name} says how to make it"
    value = os.environ.get(variable)
    if not value:
        return (
            f"backend {name!r} runs in a Python environment of its own: set {variable} to "
            f"its interpreter ({how})"
        )
    python = _interpreter(variable)
    if python is None:
        return f"backend {name!r}: {variable}={value} is no interpreter here"
    verified = f"_REVSEQ_VERIFIED_{variable}"  # inherited: a worker does not ask again
    if os.environ.get(verified) == f"{python}:{module}":
        return None
    why = _imports(python, module)
    if why is not None:
        return f"backend {name!r}: {variable}={value} cannot import {module} ({why})"
    os.environ[verified] = f"{python}:{module}"
    return None


def version(variable: str, distribution: str) -> str:
    """The version of ``distribution`` installed beside the environment's interpreter.

    Asked once, and handed to the workers this process starts.
    """
    python = _interpreter(variable)
    if python is None:
        return "unknown"
    known = f"_REVSEQ_VERSION_{variable}"
    if os.environ.get(known, "").startswith(f"{python}:{distribution}="):
        return os.environ[known].partition("=")[2]
    found = _version(python, distribution)
    os.environ[known] = f"{python}:{distribution}={found}"
    return found


@functools.cache
def _version(python: str, distribution: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({distribution!r}))"
    return _run(python, code)[1].strip() or "unknown"


def _worker(name: str, variable: str, runner: str) -> _Worker:
    if name not in _WORKERS:
        python = _interpreter(variable)
        assert python is not None, f"{variable} is checked before a model is prepared"
        command = [python, str(_FOLDER / "_serve.py"), str(_FOLDER / runner)]
        _WORKERS[name] = _Worker(name, command)
    return _WORKERS[name]


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def prepare(name: str, variable: str, runner: str, model: onnx.ModelProto) -> Runner:
    """Prepare ``model`` in the environment's worker; the runner runs it there.

    Its runs come back as ``MeasuredOutputs``: timed in the worker, the pipe left out.
    Where the runner says what a delegate took of the model (its ``delegation``), the
    runner here says it too, from its last run.
    """
    worker = _worker(name, variable, runner)
    payload = model.SerializeToString()
    key = next(_KEYS)
    worker.call("convert", ("prepare", key, payload))

    def run(feeds: Inputs) -> MeasuredOutputs:
        request = ("run", key, {k: _npy(v) for k, v in feeds.items()})
        found, outputs, seconds, delegation = worker.call("run", request)
        if not found:  # let go, or a restarted worker never saw it
            worker.call("convert", ("prepare", key, payload))
            found, outputs, seconds, delegation = worker.call("run", request)
        run.delegation.clear()  # type: ignore[attr-defined]
        run.delegation.update(delegation or {})  # type: ignore[attr-defined]
        arrays = [np.load(io.BytesIO(o), allow_pickle=False) for o in outputs]
        return MeasuredOutputs(arrays, seconds)

    run.delegation = {}  # type: ignore[attr-defined]  # what a delegate took, once run
    return run


def served(name: str, variable: str, model: onnx.ModelProto) -> Runner:
    """``model`` prepared by room ``name``'s runner, in the environment ``variable`` names."""
    return prepare(name, variable, f"{name}/runner.py", lowest_ir(model))


def _versions(variable: str, distribution: str, converter: str | None) -> str:
    """``distribution``'s version, and ``converter``'s in brackets where there is one."""
    own = version(variable, distribution)
    if converter is None:
        return own
    return f"{own} ({converter} {version(variable, converter)})"


def served_adapter(
    name: str,
    variable: str,
    distribution: str,
    module: str,
    own_prepare=None,
    converter: str | None = None,
    **fields,
) -> Adapter:
    """The adapter of a runtime served in the environment ``variable`` names.

    ``own_prepare`` where it checks a model before it travels; ``module`` is what the
    environment must import; ``converter`` the distribution that converts the model for
    ``distribution`` to run, where they differ (its version is said beside).
    """
    return Adapter(
        prepare=own_prepare or functools.partial(served, name, variable),
        distribution=distribution,
        extra=None,  # no extra: an environment of its own
        version=functools.partial(_versions, variable, distribution, converter),
        missing_requirement=functools.partial(missing, name, variable, module),
        survives_failures=True,
        **fields,
    )


@atexit.register
def _close_workers() -> None:
    for worker in list(_WORKERS.values()):
        worker.close()
