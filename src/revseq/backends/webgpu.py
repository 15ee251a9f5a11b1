"""onnxruntime-web's WebGPU execution provider, in headless Chromium, driven by playwright.

The people who inline ReverseSequence most often run in a browser, where onnxruntime-web's
WebGPU EP has no kernel for it: a model holding the op is split between the GPU and the
CPU. This adapter runs a model there: it serves onnxruntime-web's files and a small page
from its own server on 127.0.0.1, starts its own Chromium (one per process, reused by
every model), creates a session with ``executionProviders: ['webgpu']`` and reads
onnxruntime's *Node placements* log, so that a run reports where each node ran.

Without a GPU, Chromium's bundled SwiftShader (a software Vulkan) gives WebGPU a fallback
adapter: exact results, not GPU timings, and no ``shader-f16`` (float16 cannot run).

onnxruntime-web comes from npm, pinned, into a cache folder, by ``revseq webgpu-setup``;
nothing is downloaded at import time. ``REVSEQ_CHROMIUM`` names the browser (default: the
``chromium`` on the PATH), ``REVSEQ_CACHE`` the cache folder (default ``~/.cache/revseq``).
"""

from __future__ import annotations

import atexit
import base64
import collections
import functools
import http.server
import json
import os
import pathlib
import re
import shutil
import subprocess
import threading
from collections.abc import Callable

import numpy as np
import onnx

from revseq.backends._adapter import input_names
from revseq.backends.placement import node_key

DISTRIBUTION = "onnxruntime-web"
EXTRA = "webgpu"
IMPORTS = ("playwright",)
ORT_WEB_VERSION = "1.30.0"
"""The onnxruntime-web release ``revseq webgpu-setup`` installs."""

# Sessions kept alive in the page: a probe or a check creates one per model.
_LIVE_SESSIONS = 16
_PLACEMENT_LINE = re.compile(r"VerifyEachNodeIsAssignedToAnEp\]\s(.*)$")
_PLACED = re.compile(r"(?:Node\(s\)|All nodes) placed on \[(\w+)\]")
_NODE_LINE = re.compile(r"^(\S+) \((.*)\)$")

# numpy dtype name -> (onnxruntime-web's tensor type, the JS typed array holding it)
_TYPES = {
    "float32": ("float32", "Float32Array"),
    "float16": ("float16", "Uint16Array"),
    "float64": ("float64", "Float64Array"),
    "int8": ("int8", "Int8Array"),
    "int16": ("int16", "Int16Array"),
    "int32": ("int32", "Int32Array"),
    "int64": ("int64", "BigInt64Array"),
    "uint8": ("uint8", "Uint8Array"),
    "uint16": ("uint16", "Uint16Array"),
    "uint32": ("uint32", "Uint32Array"),
    "uint64": ("uint64", "BigUint64Array"),
    "bool": ("bool", "Uint8Array"),
}
_NUMPY = {ort_type: np.dtype(name) for name, (ort_type, _) in _TYPES.items()}

_PAGE = """<!doctype html><meta charset="utf-8"><title>revseq webgpu</title>
<script type="module">
import * as ort from './dist/ort.webgpu.min.mjs';
ort.env.wasm.numThreads = 1;
const ARRAYS = {ARRAYS};
const sessions = new Map();
let next = 0;
// onnxruntime logs its node placements to the console while a session is created.
const log = [];
for (const level of ['log', 'info', 'warn', 'error', 'debug']) {
  const original = console[level].bind(console);
  console[level] = (...args) => { log.push(args.map(String).join(' ')); original(...args); };
}
function bytes(b64) {
  const s = atob(b64), out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out.buffer;
}
function b64(buffer) {
  const u = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  let s = '';
  for (let i = 0; i < u.length; i += 0x8000) {
    s += String.fromCharCode(...u.subarray(i, i + 0x8000));
  }
  return btoa(s);
}
window.revseq = {
  adapter: async () => {
    if (!navigator.gpu) return null;
    const a = await navigator.gpu.requestAdapter();
    if (!a) return null;
    const info = a.info || {};
    return {vendor: info.vendor || '', architecture: info.architecture || '',
            f16: a.features.has('shader-f16')};
  },
  create: async (model) => {
    log.length = 0;
    const session = await ort.InferenceSession.create(new Uint8Array(bytes(model)), {
      executionProviders: ['webgpu'], logSeverityLevel: 0, logVerbosityLevel: 1});
    const id = next++;
    sessions.set(id, session);
    return {id: id, log: log.splice(0)};
  },
  run: async (id, feeds) => {
    const session = sessions.get(id), inputs = {};
    for (const [name, f] of Object.entries(feeds)) {
      inputs[name] = new ort.Tensor(f.type, new ARRAYS[f.type](bytes(f.data)), f.dims);
    }
    const results = await session.run(inputs), out = {};
    for (const name of session.outputNames) {
      const t = results[name];
      out[name] = {type: t.type, dims: Array.from(t.dims), data: b64(t.data)};
    }
    return out;
  },
  release: async (id) => {
    const s = sessions.get(id);
    sessions.delete(id);
    if (s) await s.release();
  },
};
window.revseqReady = true;
</script>"""


def cache_folder() -> pathlib.Path:
    """Where ``revseq webgpu-setup`` installs onnxruntime-web."""
    root = os.environ.get("REVSEQ_CACHE") or os.path.join(
        pathlib.Path.home(), ".cache", "revseq"
    )
    return pathlib.Path(root) / "webgpu"


def _dist() -> pathlib.Path:
    return cache_folder() / "node_modules" / "onnxruntime-web" / "dist"


def _browser() -> str | None:
    named = os.environ.get("REVSEQ_CHROMIUM")
    if named:
        return named if os.path.exists(named) else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_requirement() -> str | None:
    """The browser and onnxruntime-web's files must be there."""
    if _browser() is None:
        return (
            "backend 'webgpu' cannot run here: no Chromium (apt-get install chromium, or "
            "name one in REVSEQ_CHROMIUM)"
        )
    if not (_dist() / "ort.webgpu.min.mjs").exists():
        return (
            f"backend 'webgpu' cannot run here: onnxruntime-web is not in {cache_folder()} "
            "(run: revseq webgpu-setup)"
        )
    return None


def version() -> str:
    """onnxruntime-web's version, from its package.json."""
    package = _dist().parent / "package.json"
    return json.loads(package.read_text(encoding="utf-8"))["version"]


def install(*, progress: Callable[[str], None] = print) -> pathlib.Path:
    """``npm install`` the pinned onnxruntime-web into the cache folder; returns it.

    Raises:
        RuntimeError: npm is missing or failed.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on the PATH (apt-get install npm)")
    folder = cache_folder()
    folder.mkdir(parents=True, exist_ok=True)
    progress(f"webgpu-setup: npm install onnxruntime-web@{ORT_WEB_VERSION} into {folder}")
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder),
         f"onnxruntime-web@{ORT_WEB_VERSION}"],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"npm install failed: {last}")
    return folder


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {  # noqa: RUF012  # the class attribute SimpleHTTPRequestHandler reads
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
    }

    def log_message(self, format: str, *args: object) -> None:
        return  # quiet: the adapter's caller prints what matters

    def do_GET(self) -> None:
        if self.path in ("/", "/index.html"):
            page = _PAGE.replace(
                "{ARRAYS}",
                json.dumps({t: a for t, a in _TYPES.values()}).replace('"', ""),
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        super().do_GET()


class _Browser:
    """One local server and one headless Chromium with the page loaded, for a process."""

    def __init__(self) -> None:
        from playwright.sync_api import sync_playwright

        root = str(_dist().parent)
        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(_Handler, directory=root)
        )
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.playwright = sync_playwright().start()
        self.browser = self.playwright.chromium.launch(
            executable_path=_browser(),
            headless=True,
            args=["--no-sandbox", "--enable-unsafe-webgpu", "--headless=new"],
        )
        self.page = self.browser.new_page()
        self.sessions: collections.deque[int] = collections.deque()
        port = self.server.server_address[1]
        self.page.goto(f"http://127.0.0.1:{port}/index.html")
        self.page.wait_for_function("window.revseqReady === true", timeout=60_000)
        self.adapter = self.page.evaluate("window.revseq.adapter()")
        if self.adapter is None:
            raise RuntimeError("the browser has no WebGPU adapter")

    def create(self, payload: str) -> tuple[int, list[str]]:
        """A session of the base64 model, and what onnxruntime logged creating it.

        The oldest live sessions beyond a few are released.
        """
        created = self.page.evaluate("m => window.revseq.create(m)", payload)
        session = int(created["id"])
        self.sessions.append(session)
        while len(self.sessions) > _LIVE_SESSIONS:
            self.page.evaluate("id => window.revseq.release(id)", self.sessions.popleft())
        return session, list(created["log"])

    def alive(self, session: int) -> bool:
        """Whether ``session`` has not been released."""
        return session in self.sessions

    def close(self) -> None:
        try:
            self.browser.close()
            self.playwright.stop()
        finally:
            self.server.shutdown()


@functools.cache
def _session_browser() -> _Browser:
    browser = _Browser()
    atexit.register(browser.close)
    return browser


def parse_placement(
    log: list[str], nodes: list[tuple[str, str]] = ()
) -> dict[str, list[tuple[str, str]]]:
    """(op type, node name) per execution provider, from the *Node placements* log.

    onnxruntime logs, one console message a line, ``Node(s) placed on [EP]. Number of
    nodes: N`` and then ``  OpType (node name)`` for each node; where one provider takes
    every node it logs only ``All nodes placed on [EP]``, and ``nodes`` (the model's
    own) are the ones placed there.
    """
    placement: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for message in log:
        line = _PLACEMENT_LINE.search(message)
        if line is None:
            continue
        body = line.group(1).strip()
        placed = _PLACED.search(body)
        if placed and body.startswith("All nodes"):
            placement.setdefault(placed.group(1), []).extend(nodes)
            current = None
        elif placed:
            current = placement.setdefault(placed.group(1), [])
        elif (node := _NODE_LINE.match(body)) and current is not None:
            current.append((node.group(1), node.group(2)))
    return placement


def _encode(array: np.ndarray) -> dict[str, object]:
    array = np.ascontiguousarray(array)
    name = "bool" if array.dtype == np.bool_ else array.dtype.name
    if name not in _TYPES:
        raise TypeError(f"onnxruntime-web takes no {array.dtype} tensors")
    return {
        "type": _TYPES[name][0],
        "dims": list(array.shape),
        "data": base64.b64encode(array.tobytes()).decode(),
    }


def _decode(result: dict[str, object]) -> np.ndarray:
    dtype = _NUMPY[str(result["type"])]
    data = base64.b64decode(str(result["data"]))
    dims = [int(d) for d in result["dims"]]  # type: ignore[attr-defined]
    return np.frombuffer(data, dtype=dtype).reshape(dims).copy()


def _as_served(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` as the page gets it: the lowest IR version it can have, nodes named.

    onnxruntime-web 1.30 refuses IR versions newer than it knows (``Unsupported model IR
    version``), which ``onnx.helper.make_model`` stamps by default. The placement log
    names nodes, so an unnamed one gets the name :func:`revseq.backends.placement.node_key`
    gives it (``#`` and its position).
    """
    lowest = onnx.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    nodes = model.graph.node
    if model.ir_version <= lowest and all(n.name for n in nodes):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = min(copy.ir_version, lowest)
    for position, node in enumerate(copy.graph.node):
        node.name = node_key(node, position)
    return copy


def prepare(model: onnx.ModelProto):
    """Create a WebGPU session of ``model``; return a function of the inputs by name.

    The function's ``placement`` maps each execution provider to the (op type, node
    name) pairs onnxruntime placed on it (``MemcpyToHost``/``MemcpyFromHost`` included).
    """
    browser = _session_browser()
    served = _as_served(model)
    payload = base64.b64encode(served.SerializeToString()).decode()
    session, log = browser.create(payload)
    placement = parse_placement(
        log, [(n.op_type, n.name) for n in served.graph.node if n.op_type != "Constant"]
    )
    live = [session]
    names = input_names(model)
    outputs = [o.name for o in model.graph.output]

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if not browser.alive(live[0]):  # let go to bound the page's memory
            live[0] = browser.create(payload)[0]
        encoded = {n: _encode(np.asarray(feeds[n])) for n in names}
        results = browser.page.evaluate(
            "([id, f]) => window.revseq.run(id, f)", [live[0], encoded]
        )
        return [_decode(results[n]) for n in outputs]

    run.placement = placement  # type: ignore[attr-defined]
    return run
