"""Backends in a child process: a native crash there is one line here, not the end of ours.

A Python binding of a Rust runtime aborts the whole interpreter on a panic, and a compiler's
C++ assertion can do the same. ``check --backend`` and ``probe`` therefore talk to each
backend through a worker process (``python -m revseq.backends._isolated NAME``) that
prepares models and runs them on request; when the worker dies, the call that was in
flight raises :class:`BackendCrashError` naming the backend and the signal, and the next
call starts a fresh worker (re-preparing the models it needs).

Requests and replies are pickles on the worker's stdin and a private copy of its stdout;
whatever the backend itself prints goes to its stderr, of which the last lines are kept
to explain a crash.
"""

from __future__ import annotations

__all__ = ["BackendCrashError", "IsolatedBackend", "isolated"]

import atexit
import collections
import dataclasses
import itertools
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any

import numpy as np
import onnx

from revseq.backends._adapter import (
    Backend,
    BackendError,
    Inputs,
    Runner,
    get,
)
from revseq.errors import one_line


class BackendCrashError(BackendError):
    """The backend's worker process died (a panic, a segfault, an abort)."""


REQUEST_MARK = "revseq: a request begins"
"""The line a worker writes to stderr as it takes each request (its loop reads it from
``MARK_VARIABLE``): a worker's last words are what it wrote since, never what a runtime
logged while an earlier model ran."""

MARK_VARIABLE = "REVSEQ_REQUEST_MARK"
"""Where a worker finds ``REQUEST_MARK`` (``_serve.py``, which imports no revseq, reads
it under this name too)."""


def _exit_description(returncode: int | None) -> str:
    if returncode is None:
        return "closed its pipe"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class _Worker:
    """One child process serving one backend; restarted on demand after a crash."""

    def __init__(self, name: str, command: list[str] | None = None) -> None:
        self.name = name
        self._command = command or [sys.executable, "-m", "revseq.backends._isolated", name]
        self._process: subprocess.Popen[bytes] | None = None
        self._drainer: threading.Thread | None = None
        self._panic: str | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._lock = threading.Lock()
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        """A fresh worker, working in a folder of its own.

        Runtimes write files where they run (a converter's build has saved each constant
        it folds as a ``.npy``): the worker's working folder is a temporary one, removed
        with it, never the user's.
        """
        self._stderr.clear()
        self._panic: str | None = None
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix=f"revseq-{self.name}-")
        process = subprocess.Popen(
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self._folder.name,
            env={
                **os.environ,
                **_absolute_python_path(),
                "RUST_BACKTRACE": "0",
                MARK_VARIABLE: REQUEST_MARK,
            },
        )
        self._drainer = threading.Thread(target=self._drain, args=(process,), daemon=True)
        self._drainer.start()
        self._process = process
        return process

    def _drain(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        after_panic = False
        for raw in process.stderr:
            line = raw.decode(errors="replace").strip()
            if line == REQUEST_MARK:  # what came before was another request's
                self._stderr.clear()
                self._panic, after_panic = None, False
                continue
            if not line:
                continue
            if after_panic and self._panic is None:  # Rust: the message follows
                self._panic = f"panic: {line[:200]}"
            after_panic = "panicked at" in line
            self._stderr.append(line)

    def _last_words(self) -> str:
        """The line of the worker's stderr that best says why it died."""
        if self._panic is not None:
            return self._panic
        lines = list(self._stderr)
        for marker in ("Error", "error", "Abort", "Assert", "Fatal"):
            for line in reversed(lines):
                if marker in line:
                    return line[:200]
        return lines[-1][:200] if lines else ""

    def call(self, stage: str, request: tuple[Any, ...]) -> Any:
        """Send one request; returns the worker's answer."""
        with self._lock:
            process = self._process
            if process is None or process.poll() is not None:
                process = self._start()
            assert process.stdin is not None and process.stdout is not None
            try:
                pickle.dump(request, process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                process.stdin.flush()
                status, answer = pickle.load(process.stdout)
            except (EOFError, OSError, pickle.UnpicklingError) as e:
                try:
                    returncode = process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    returncode = process.wait()
                self._process = None
                if self._drainer is not None:
                    self._drainer.join(timeout=5)  # the last words, read to the end
                why = self._last_words()
                raise BackendCrashError(
                    self.name,
                    stage,
                    f"the backend's process {_exit_description(returncode)}"
                    + (f" ({why})" if why else ""),
                ) from e
            if status == "error":
                error_stage, detail = answer
                raise BackendError(self.name, error_stage, detail)
            return answer

    def close(self) -> None:
        """End the worker, and remove its working folder."""
        with self._lock:
            process, self._process = self._process, None
            folder, self._folder = self._folder, None
        if process is not None:
            try:
                assert process.stdin is not None
                process.stdin.close()
                process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()
        if folder is not None:
            folder.cleanup()


def _absolute_python_path() -> dict[str, str]:
    """``PYTHONPATH`` with its folders made absolute: the worker runs in another folder."""
    path = os.environ.get("PYTHONPATH")
    if not path:
        return {}
    folders = (os.path.abspath(p or os.curdir) for p in path.split(os.pathsep))
    return {"PYTHONPATH": os.pathsep.join(folders)}


_WORKERS: dict[str, _Worker] = {}
_KEYS = itertools.count()
# Prepared models a worker keeps (a probe prepares hundreds, each run a few times).
_KEPT = 16
_WORKERS_LOCK = threading.Lock()


def _worker(name: str) -> _Worker:
    with _WORKERS_LOCK:
        if name not in _WORKERS:
            _WORKERS[name] = _Worker(name)
        return _WORKERS[name]


@atexit.register
def _close_workers() -> None:
    for worker in list(_WORKERS.values()):
        worker.close()


@dataclasses.dataclass(frozen=True)
class IsolatedBackend:
    """A :class:`Backend` whose conversion and runs happen in a worker process."""

    backend: Backend

    @property
    def name(self) -> str:
        """The adapter's name."""
        return self.backend.name

    @property
    def version(self) -> str:
        """The installed version of the backend's package."""
        return self.backend.version

    @property
    def label(self) -> str:
        """Name and version, as reports print them."""
        return self.backend.label

    @property
    def storage(self) -> dict[str, str]:
        """The element types it holds in a narrower one (``Backend.storage``)."""
        return self.backend.storage

    def lacking_named(self, failure: str) -> frozenset[str] | None:
        """The op types a failure names as lacking (``Backend.lacking_named``), or None."""
        return self.backend.lacking_named(failure)

    def rounding(self, dtype: str, rank: int) -> str | None:
        """What it does to ``dtype`` data of ``rank`` inexactly (``Backend.rounding``)."""
        return self.backend.rounding(dtype, rank)

    def prepare(self, model: onnx.ModelProto) -> Runner:
        """Like :meth:`Backend.prepare`, in the worker.

        The worker keeps the last few prepared models; a runner whose model it has let go
        (or that a restarted worker never saw) prepares it again before running.

        Raises:
            BackendError: The backend refused or failed the model;
                :class:`BackendCrashError` when its process died doing so.
        """
        worker = _worker(self.name)
        payload = model.SerializeToString()
        key = next(_KEYS)
        placement = worker.call("convert", ("prepare", key, payload))

        def runner(feeds: Inputs) -> list[np.ndarray]:
            request = ("run", key, dict(feeds))
            found, outputs = worker.call("run", request)
            if not found:
                worker.call("convert", ("prepare", key, payload))
                found, outputs = worker.call("run", request)
            return outputs

        runner.placement = placement  # type: ignore[attr-defined]
        return runner

    def run(self, model: onnx.ModelProto, feeds: Inputs) -> list[np.ndarray]:
        """Prepare ``model`` and run it once."""
        return self.prepare(model)(feeds)

    @property
    def survives_failures(self) -> bool:
        """Whether a model that failed leaves the backend as it was (``survives_failures``).

        Then its worker is kept after a failure (a fresh one costs the runtime's
        import); a crash still ends it.
        """
        return self.backend.adapter.survives_failures

    def restart(self) -> None:
        """Make the next call start a fresh worker.

        After a model went wrong in it: a backend may corrupt its memory without dying
        (a runtime has freed an invalid pointer reversing rank-4 data by a step -1 Slice),
        and a later model would fail in its place (a probe of ConstantOfShape, killed by
        SIGSEGV after that Slice).
        """
        _worker(self.name).close()


def isolated(name: str) -> IsolatedBackend:
    """The backend ``name`` behind a worker process.

    Raises:
        BackendUnavailableError: The name is unknown or the backend cannot run here.
    """
    return IsolatedBackend(get(name))


def _serve(name: str) -> int:
    """The worker's loop: answer requests until stdin closes."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    # The backend's own prints must not corrupt the replies: fd 1 becomes stderr.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    backend = get(name)
    prepared: collections.OrderedDict[int, Runner] = collections.OrderedDict()
    while True:
        try:
            kind, key, payload = pickle.load(requests)
        except EOFError:
            return 0
        print(os.environ.get(MARK_VARIABLE, ""), file=sys.stderr, flush=True)
        try:
            answer: Any = None
            if kind == "prepare":
                prepared[key] = backend.prepare(onnx.load_from_string(payload))
                answer = prepared[key].placement
                while len(prepared) > _KEPT:
                    prepared.popitem(last=False)
            elif key in prepared:
                prepared.move_to_end(key)
                answer = (True, prepared[key](payload))
            else:
                answer = (False, None)
            reply: tuple[str, Any] = ("ok", answer)
        except BackendError as e:
            reply = ("error", (e.stage, e.detail))
        except Exception as e:  # anything else the adapter let through
            reply = (
                "error",
                ("convert" if kind == "prepare" else "run", one_line(e, typed=True)),
            )
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1]))
