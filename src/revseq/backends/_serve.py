"""The loop a runner in another environment is served by: ``python _serve.py RUNNER.py``.

It imports only the standard library, numpy and the runner file, so that it runs under
any interpreter that has the runtime. Requests and replies are pickles of plain Python
values: models as bytes, arrays in numpy's ``.npy`` format (readable across numpy 1
and 2, which a pickled array is not). What the runtime prints goes to stderr.
"""

from __future__ import annotations

import collections
import importlib.util
import io
import os
import pickle
import sys
import time
import traceback

_KEPT = 16  # prepared models kept, as revseq's own workers keep them


def _load(path: str):
    spec = importlib.util.spec_from_file_location("revseq_runner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _array(data: bytes):
    import numpy as np

    return np.load(io.BytesIO(data), allow_pickle=False)


def _npy(array) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:400]


def main(runner_path: str) -> int:
    """Answer requests on stdin until it closes."""
    # This folder, first on the path of a script run, holds runners named after the
    # runtimes they import: ``import NAME`` must find the runtime, not the runner.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the runtime's prints must not corrupt the replies
    sys.stdout = sys.stderr
    runner = _load(runner_path)
    prepared: collections.OrderedDict = collections.OrderedDict()
    while True:
        try:
            kind, key, payload = pickle.load(requests)
        except EOFError:
            return 0
        # Where the worker's last words begin, were it to die on this request.
        print(os.environ.get("REVSEQ_REQUEST_MARK", ""), file=sys.stderr, flush=True)
        try:
            if kind == "prepare":
                prepared[key] = runner.prepare(payload)
                while len(prepared) > _KEPT:
                    prepared.popitem(last=False)
                answer = None
            elif key in prepared:
                prepared.move_to_end(key)
                feeds = {name: _array(data) for name, data in payload.items()}
                start = time.perf_counter()
                outputs = prepared[key](feeds)
                seconds = time.perf_counter() - start  # the run here, the pipe left out
                # Where a delegate took part of the model, what it took (a delegate library).
                delegation = getattr(prepared[key], "delegation", None)
                answer = (True, [_npy(o) for o in outputs], seconds, delegation)
            else:
                answer = (False, None, None, None)
            reply = ("ok", answer)
        except Exception as e:  # the runtime's own errors, one line each
            traceback.print_exc()
            reply = ("error", ("convert" if kind == "prepare" else "run", _one_line(e)))
        pickle.dump(reply, replies, protocol=4)
        replies.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
