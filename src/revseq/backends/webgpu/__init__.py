"""onnxruntime-web's WebGPU execution provider, under Dawn, in Node.

The people who inline ReverseSequence most often run in a browser, where onnxruntime-web's
WebGPU EP has no kernel for it: a model holding the op is split between the GPU and the
CPU. This adapter runs a model in that EP on Dawn, the WebGPU implementation Chrome
ships, through its Node binding (npm ``webgpu``): one ``node`` process per Python
process, reused by every model, creates a session with ``executionProviders:
['webgpu']`` and reads onnxruntime's *Node placements* log, so that a run reports where
each node ran.

``revseq webgpu-setup`` installs the pinned onnxruntime-web and ``webgpu`` with npm
into a cache folder, and, where the machine has no Vulkan driver with ``shader-f16``,
Mesa's lavapipe (a software Vulkan on the CPU, from Debian's bookworm-backports) beside
them: exact results and float16, not a GPU's timings. ``REVSEQ_CACHE`` names the cache
folder (default ``~/.cache/revseq``); ``REVSEQ_VULKAN_ICD`` a Vulkan driver's ICD file
to use instead of lavapipe, or ``system`` for the machine's own drivers as they are.
"""

from __future__ import annotations

import atexit
import base64
import collections
import functools
import importlib.resources
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable

import numpy as np
import onnx

from revseq.backends._adapter import Adapter, input_names, node_key

ORT_WEB_VERSION = "1.30.0"
"""The onnxruntime-web release ``revseq webgpu-setup`` installs."""
DAWN_VERSION = "0.6.2"
"""The release of npm's ``webgpu`` (Dawn for Node) ``revseq webgpu-setup`` installs."""
LAVAPIPE = (
    "mesa-vulkan-drivers/bookworm-backports",
    "libdrm2/bookworm-backports",
    "libdrm-amdgpu1/bookworm-backports",
    "libvulkan1",
)
"""Debian's packages that make lavapipe, Mesa 25's software Vulkan (Debian 12's own Mesa
22 gives Dawn no adapter: ``shaderUniform*ArrayDynamicIndexing required``)."""

# Sessions kept alive in the worker: a probe or a check creates one per model.
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

# The worker's script (``worker.mjs``, shipped beside this module): JSON requests
# on stdin, one a line, each answer a line of stdout after _MARK.
_SCRIPT = "worker.mjs"
_MARK = "@@revseq "


def cache_folder() -> pathlib.Path:
    """Where ``revseq webgpu-setup`` installs onnxruntime-web, Dawn and lavapipe."""
    root = os.environ.get("REVSEQ_CACHE") or os.path.join(
        pathlib.Path.home(), ".cache", "revseq"
    )
    return pathlib.Path(root) / "webgpu"


def _dist() -> pathlib.Path:
    return cache_folder() / "node_modules" / "onnxruntime-web" / "dist"


def _lavapipe() -> pathlib.Path:
    return cache_folder() / "vulkan"


def _icd() -> str | None:
    """The Vulkan driver Dawn is given: a file, "system", or None where there is none."""
    named = os.environ.get("REVSEQ_VULKAN_ICD")
    if named:
        return named if named == "system" or os.path.exists(named) else None
    icd = _lavapipe() / "icd.json"
    return str(icd) if icd.exists() else None


def missing_requirement() -> str | None:
    """Node, onnxruntime-web, Dawn and a Vulkan driver must be there."""
    if shutil.which("node") is None:
        return "backend 'webgpu' cannot run here: node is not on the PATH"
    needed = [_dist() / "ort.webgpu.min.mjs", cache_folder() / "node_modules" / "webgpu"]
    if not all(path.exists() for path in needed) or _icd() is None:
        return (
            f"backend 'webgpu' cannot run here: onnxruntime-web, Dawn or lavapipe is not "
            f"in {cache_folder()} (run: revseq webgpu-setup)"
        )
    return None


def version() -> str:
    """onnxruntime-web's version, from its package.json."""
    package = _dist().parent / "package.json"
    return json.loads(package.read_text(encoding="utf-8"))["version"]


def _run(command: list[str], what: str, **options) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **options)
    if done.returncode != 0:
        last = ((done.stderr or done.stdout).strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{what} failed: {last}")


def install(*, progress: Callable[[str], None] = print) -> pathlib.Path:
    """Install onnxruntime-web and Dawn with npm, and lavapipe, into the cache folder.

    lavapipe comes from Debian's packages (``apt-get download`` with a configuration of
    its own: the system's sources and state are left as they are), unpacked there.

    Raises:
        RuntimeError: npm, apt-get or dpkg-deb is missing or failed.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on the PATH (apt-get install npm)")
    folder = cache_folder()
    folder.mkdir(parents=True, exist_ok=True)
    packages = [f"onnxruntime-web@{ORT_WEB_VERSION}", f"webgpu@{DAWN_VERSION}"]
    progress(f"webgpu-setup: npm install {' '.join(packages)} into {folder}")
    _run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), *packages],
        "npm install",
    )
    if os.environ.get("REVSEQ_VULKAN_ICD"):
        return folder
    progress(f"webgpu-setup: lavapipe from Debian's packages into {_lavapipe()}")
    _install_lavapipe(_lavapipe())
    return folder


def _set_up(progress: Callable[[str], None]) -> str:
    """``revseq webgpu-setup``: :func:`install`, and what it installed."""
    folder = install(progress=progress)
    return f"onnxruntime-web {version()} installed in {folder}"


def _install_lavapipe(target: pathlib.Path) -> None:
    apt, unpack = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if apt is None or unpack is None:
        raise RuntimeError(
            "apt-get and dpkg-deb are needed to fetch lavapipe; or name a Vulkan driver "
            "with shader-f16 in REVSEQ_VULKAN_ICD"
        )
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        for sub in ("lists/partial", "cache/archives/partial", "parts", "debs"):
            (root / sub).mkdir(parents=True)
        (root / "sources.list").write_text(
            "deb http://deb.debian.org/debian bookworm main\n"
            "deb http://deb.debian.org/debian bookworm-backports main\n"
        )
        (root / "preferences").write_text("")
        (root / "apt.conf").write_text(
            f'Dir::Etc::SourceList "{root}/sources.list";\n'
            f'Dir::Etc::SourceParts "{root}/parts";\n'
            f'Dir::Etc::Preferences "{root}/preferences";\n'
            f'Dir::Etc::PreferencesParts "{root}/parts";\n'
            f'Dir::State::Lists "{root}/lists";\n'
            f'Dir::Cache "{root}/cache";\n'
        )
        env = {**os.environ, "APT_CONFIG": str(root / "apt.conf")}
        _run([apt, "update", "-qq"], "apt-get update", env=env)
        _run([apt, "download", *LAVAPIPE], "apt-get download", env=env, cwd=root / "debs")
        shutil.rmtree(target, ignore_errors=True)
        for deb in sorted((root / "debs").glob("*.deb")):
            _run([unpack, "-x", str(deb), str(target)], "dpkg-deb")
    library = target / "usr" / "lib" / "x86_64-linux-gnu" / "libvulkan_lvp.so"
    icd = {
        "file_format_version": "1.0.0",
        "ICD": {"library_path": str(library), "api_version": "1.3.0"},
    }
    (target / "icd.json").write_text(json.dumps(icd))


class _Worker:
    """One ``node`` process running onnxruntime-web's WebGPU EP on Dawn, for a process."""

    def __init__(self) -> None:
        script = cache_folder() / "revseq_worker.mjs"
        arrays = json.dumps({t: a for t, a in _TYPES.values()}).replace('"', "")
        template = importlib.resources.files("revseq.backends.webgpu") / _SCRIPT
        source = template.read_text(encoding="utf-8").replace("{ARRAYS}", arrays)
        if not script.exists() or script.read_text(encoding="utf-8") != source:
            script.write_text(source, encoding="utf-8")
        env = dict(os.environ)
        icd = _icd()
        if icd not in (None, "system"):
            env["VK_ICD_FILENAMES"] = icd
            libraries = str(_lavapipe() / "usr" / "lib" / "x86_64-linux-gnu")
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                p for p in (libraries, env.get("LD_LIBRARY_PATH")) if p
            )
        # V8's optimising wasm compiler takes half a minute on onnxruntime-web's first
        # run; its baseline compiler a few seconds.
        self.process = subprocess.Popen(
            ["node", "--liftoff-only", str(script)],
            cwd=cache_folder(),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.sessions: collections.deque[int] = collections.deque()
        self.adapter = self.ask("adapter")
        if self.adapter is None:
            raise RuntimeError("Dawn finds no WebGPU adapter (no Vulkan driver?)")

    def ask(self, op: str, **fields: object) -> object:
        """Send one request; its answer's value, or the worker's error raised."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(_MARK):
                answer = json.loads(line[len(_MARK) :])
                if not answer["ok"]:
                    raise RuntimeError(answer["error"])
                return answer["value"]
        raise RuntimeError(f"the WebGPU worker exited ({self.process.wait()})")

    def create(self, payload: str) -> tuple[int, list[str]]:
        """A session of the base64 model, and what onnxruntime logged creating it.

        The oldest live sessions beyond a few are released.
        """
        created = self.ask("create", model=payload)
        session = int(created["id"])  # type: ignore[index]
        self.sessions.append(session)
        while len(self.sessions) > _LIVE_SESSIONS:
            self.ask("release", id=self.sessions.popleft())
        return session, list(created["log"])  # type: ignore[index]

    def alive(self, session: int) -> bool:
        """Whether ``session`` has not been released."""
        return session in self.sessions

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()  # type: ignore[union-attr]
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


@functools.cache
def worker() -> _Worker:
    """The process's WebGPU worker, started when first needed."""
    started = _Worker()
    atexit.register(started.close)
    return started


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
    """``model`` as the worker gets it: the lowest IR version it can have, nodes named.

    onnxruntime-web 1.30 refuses IR versions newer than it knows (``Unsupported model IR
    version``), which ``onnx.helper.make_model`` stamps by default. The placement log
    names nodes, so an unnamed one gets the name :func:`revseq.backends.node_key`
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
    runtime = worker()
    served = _as_served(model)
    payload = base64.b64encode(served.SerializeToString()).decode()
    session, log = runtime.create(payload)
    placement = parse_placement(
        log, [(n.op_type, n.name) for n in served.graph.node if n.op_type != "Constant"]
    )
    live = [session]
    names = input_names(model)
    outputs = [o.name for o in model.graph.output]

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if not runtime.alive(live[0]):  # let go to bound the worker's memory
            live[0] = runtime.create(payload)[0]
        encoded = {n: _encode(np.asarray(feeds[n])) for n in names}
        results = runtime.ask("run", id=live[0], feeds=encoded)
        return [_decode(results[n]) for n in outputs]  # type: ignore[index]

    run.placement = placement  # type: ignore[attr-defined]
    return run


ADAPTER = Adapter(
    prepare=prepare,
    distribution="onnxruntime-web",
    extra="webgpu",
    imports=(),
    version=version,
    missing_requirement=missing_requirement,
    setup=_set_up,
    untimed=(
        "its runs pass the tensors through a worker process, on a software Vulkan where "
        "no GPU is there: no GPU's timing"
    ),
)
