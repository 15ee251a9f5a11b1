"""The adapter registry and the wrapper every backend module is used through."""

from __future__ import annotations

__all__ = [
    "ADAPTERS",
    "SETUPS",
    "CPU",
    "Placement",
    "Adapter",
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "MeasuredOutputs",
    "Runner",
    "adapter",
    "get",
    "input_names",
    "installed",
    "lowest_ir",
    "node_key",
    "quirks_of",
    "set_up",
    "unavailable",
]

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import logging
import os
from collections.abc import Callable, Mapping

import numpy as np
import onnx

from revseq.errors import RevseqError, install_hint, one_line
from revseq.ops.targets import TARGETS
from revseq.ops.targets.profile import Profile
from revseq.passes.graph.scopes import run_time_input_infos

logger = logging.getLogger(__name__)

Inputs = dict[str, np.ndarray]
Runner = Callable[[Inputs], list[np.ndarray]]

Placement = dict[str, list[tuple[str, str]]]
"""Where an execution-provider backend ran each node (a runner's ``placement``):
execution provider -> the (op type, node name) pairs onnxruntime placed on it. On
onnxruntime-web's WebGPU EP a node without a kernel falls back to the CPU; the check
judges which placements defeat inlining (:mod:`revseq.equivalence.off_device`)."""

CPU = "CPUExecutionProvider"
"""The provider a node without a device kernel falls back to."""


def node_key(node: onnx.NodeProto, position: int) -> str:
    """How a placement names a node: its name, or ``#`` and its position in the graph."""
    return node.name or f"#{position}"


class MeasuredOutputs(list):
    """A run's outputs, with the seconds the run took where it ran.

    A runner served in another process (``_foreign``) times its run there: the copies
    through the pipe to it and back are not the backend's time, and timing
    (``revseq.measure``) counts these seconds instead of its own clock's.
    """

    def __init__(self, outputs: list[np.ndarray], seconds: float) -> None:
        super().__init__(outputs)
        self.seconds = seconds


@dataclasses.dataclass(frozen=True)
class Adapter:
    """The adapter protocol: what a backend module declares, as its ``ADAPTER`` value.

    ``prepare`` converts or compiles a model and returns a function of the inputs by
    name that returns the outputs; everything else says how revseq may use it. Every
    field is read as declared here: a backend states what differs from these defaults.
    What the planner reads too (whether it falls back off its device, yields the
    default, takes a leading batch, rounds a type, lives on a device) is stated once,
    in the profile its room holds (``revseq.ops.targets.profile.Profile``), and read
    from there (:meth:`Backend.quirks`).

    Attributes:
        prepare: The model to a runner (see :meth:`Backend.prepare`).
        distribution: The package whose installed version is reported.
        extra: revseq's extra that installs it; None where it has an environment of
            its own (RKNN, x2paddle).
        imports: What must be importable for it to run (found without importing).
        version: Its own version string, where the distribution's alone says too little.
        missing_requirement: Why it cannot run here beyond its imports, or None.
        prepare_repeated: ``prepare`` for a runner called again and again on the same
            shapes (timing), where that runs differently (tinygrad's TinyJit).
        resident: Its data lives on a device: its copy floor is its own Identity there.
        storage: Element types it holds in a narrower one (RKNN: float32 as float16):
            the truth there is the reversal of what it holds.
        survives_failures: A model that failed leaves it as it was: its worker process
            is kept after one (a crash still ends it).
        own_process: It runs in a worker process even where a test could run it in
            its own (OpenCV: cv2 imported beside onnxruntime in one process has
            crashed).
        builds_for_shapes: It builds the model for the input sizes it is run at:
            symbolic dims are static there, shape arithmetic folded at build.
        untimed: Why its run times are not the device's (a probe takes no costs from
            it), or None.
        simulated: It simulates a device on the host: its speed page times the
            simulator, and says so.
        setup: Installs what it needs beyond pip (``revseq NAME-setup``), reporting
            each step to the function it is given; returns what it installed, in one
            line. Raises RuntimeError when a step fails.
        lacking_named: The ONNX op types a refusal's message names as what it has no
            kernel for (a converter listing the layers it left unconverted), or None
            where the message names none: a probe blames that refusal on those alone.
    """

    prepare: Callable[[onnx.ModelProto], Callable]
    distribution: str
    extra: str | None
    imports: tuple[str, ...] = ()
    version: Callable[[], str] | None = None
    missing_requirement: Callable[[], str | None] | None = None
    prepare_repeated: Callable[[onnx.ModelProto], Callable] | None = None
    resident: bool = False
    storage: Mapping[str, str] = dataclasses.field(default_factory=dict)
    survives_failures: bool = False
    own_process: bool = False
    builds_for_shapes: bool = False
    untimed: str | None = None
    simulated: bool = False
    setup: Callable[[Callable[[str], None]], str] | None = None
    lacking_named: Callable[[str], frozenset[str] | None] | None = None


@dataclasses.dataclass(frozen=True)
class _Row:
    where: str  # "module" or "module:ATTRIBUTE" in this package; ADAPTER by default
    description: str
    setup: str | None = None  # what ``revseq NAME-setup`` installs, where it has one


_REGISTRY: dict[str, _Row] = {
    "onnxruntime": _Row(
        "onnxruntime", "Microsoft's runtime, CPU execution provider (control: has the op)"
    ),
    "openvino": _Row("openvino", "Intel OpenVINO, CPU plugin (control: has the op)"),
    "onnx2torch": _Row(
        "onnx2torch", "onnx2torch converted to a torch.fx module, run by torch on the CPU"
    ),
    "onnx2torch-cuda": _Row(
        "onnx2torch_cuda",
        "onnx2torch's torch.fx module run by torch on a CUDA device, the data resident there",
    ),
    "tvm": _Row("tvm", "Apache TVM, Relax ONNX frontend, compiled for llvm, Relax VM"),
    "iree": _Row("iree", "IREE: iree-import-onnx, compiled for llvm-cpu, local-task runtime"),
    "tinygrad": _Row("tinygrad", "tinygrad's OnnxRunner on its CPU device"),
    "tract": _Row("tract", "Sonos tract, through its Python bindings"),
    "mnn": _Row("mnn", "Alibaba MNN: its converter, then its nn Module API on the CPU"),
    "webgpu": _Row(
        "webgpu",
        "onnxruntime-web's WebGPU execution provider on Dawn, in Node",
        setup="npm install the pinned onnxruntime-web that the webgpu backend runs "
        "(into ~/.cache/revseq, or $REVSEQ_CACHE)",
    ),
    "opencv": _Row("opencv", "OpenCV's DNN module (cv2.dnn) on its CPU backend"),
    "ncnn": _Row(
        "ncnn", "Tencent's ncnn, converted by pnnx from ONNX, run on the CPU in float32"
    ),
    "rknn": _Row(
        "rknn",
        "Rockchip's RKNN-Toolkit2 simulator (rk3588), float models unquantised (float32 "
        "held as float16: exact means exact to that storage), in an environment of its own",
    ),
    "x2paddle": _Row(
        "x2paddle",
        "x2paddle's conversion to a Paddle inference model, run by PaddlePaddle on the CPU, "
        "in an environment of its own",
    ),
    "litert": _Row(
        "litert",
        "onnx2tf's conversion to a .tflite, run by LiteRT's interpreter (XNNPACK delegate) "
        "on the CPU, in an environment of its own",
    ),
    "executorch": _Row(
        "executorch",
        "onnx2torch's module through torch.export to ExecuTorch, XNNPACK delegate and "
        "portable kernels",
    ),
    "executorch-portable": _Row(
        "executorch:PORTABLE",
        "onnx2torch's module through torch.export to ExecuTorch, its portable kernels alone",
    ),
}
"""The one registry: each backend's row, by the name ``--backend`` and ``target=`` take."""

ADAPTERS: dict[str, str] = {name: row.description for name, row in _REGISTRY.items()}
"""Every adapter, by the name ``--backend`` and ``target=`` take, with what it runs."""

SETUPS: dict[str, str] = {
    name: row.setup for name, row in _REGISTRY.items() if row.setup is not None
}
"""The backends that install more than pip does, with what ``revseq NAME-setup`` installs."""


class BackendError(RevseqError):
    """A backend refused a model or failed to run it.

    Attributes:
        stage: "convert" (loading, converting or compiling) or "run".
    """

    def __init__(self, backend: str, stage: str, message: str) -> None:
        self.backend = backend
        self.stage = stage
        self.detail = message
        super().__init__(f"{backend}: {stage} failed: {message}")


class BackendUnavailableError(RevseqError):
    """The backend's packages are not installed."""


@dataclasses.dataclass(frozen=True)
class Backend:
    """One backend, through its adapter.

    Attributes:
        name: The adapter's name (a key of ``ADAPTERS``).
        adapter: What its module declares (:class:`Adapter`).
    """

    name: str
    adapter: Adapter

    @property
    def version(self) -> str:
        """The installed version of the backend's package (or the adapter's own word)."""
        own = self.adapter.version
        return (
            own() if own is not None else importlib.metadata.version(self.adapter.distribution)
        )

    @property
    def resident(self) -> bool:
        """Whether its data lives on a device: its copy floor is its own Identity there."""
        return self.adapter.resident

    @property
    def label(self) -> str:
        """Name and version, as reports print them."""
        return f"{self.name} {self.version}"

    @property
    def storage(self) -> dict[str, str]:
        """The element types it holds in a narrower one (``Adapter.storage``).

        RKNN's float32 as float16: the truth there is the reversal of what it holds.
        """
        return dict(self.adapter.storage)

    @property
    def quirks(self) -> Profile:
        """Its profile: where its declared quirks are stated (none where it has none)."""
        return quirks_of(self.name)

    def lacking_named(self, failure: str) -> frozenset[str] | None:
        """The op types a failure names as lacking (``Adapter.lacking_named``), or None."""
        named = self.adapter.lacking_named
        return None if named is None else named(failure)

    def rounding(self, dtype: str, rank: int) -> str | None:
        """What it does to ``dtype`` data of ``rank`` inexactly (``Profile.rounding``)."""
        for rounded, from_rank, how in self.quirks.rounding:
            if rounded == dtype and rank >= from_rank:
                return how
        return None

    def prepare(self, model: onnx.ModelProto, *, repeated: bool = False) -> Runner:
        """Convert or compile ``model``; the runner takes inputs by name, returns outputs.

        ``repeated``: the runner will be called again and again with inputs of the same
        shapes (timing), so the adapter may run the model as a deployment does, where
        that differs from a first call (tinygrad: under its TinyJit, ``prepare_repeated``).

        Outputs come back as numpy arrays of the model's declared output types where the
        backend returns the same bytes under another type of the same width (IREE's
        unsigned outputs); anything else is returned as the backend gave it, so that a
        wrong type is seen as a difference. For an execution-provider backend (webgpu),
        the runner's ``placement`` maps each provider to the (op type, node name) pairs
        placed on it; it is None for the others. For a backend that lowers to a delegate
        (executorch), ``delegation`` maps the delegate and the rest to what each took.

        Raises:
            BackendError: The backend refused the model (stage "convert") or failed to
                run it (stage "run").
        """
        prepare = self.adapter.prepare
        if repeated and self.adapter.prepare_repeated is not None:
            prepare = self.adapter.prepare_repeated
        try:
            run = prepare(model)
        except BackendError:
            raise
        except Exception as e:  # each backend raises its own types
            raise BackendError(self.name, "convert", one_line(e, typed=True)) from e
        declared = [_declared_dtype(o) for o in model.graph.output]

        def runner(feeds: Inputs) -> list[np.ndarray]:
            try:
                outputs = run(feeds)
            except BackendError:
                raise
            except Exception as e:
                raise BackendError(self.name, "run", one_line(e, typed=True)) from e
            if len(outputs) != len(declared):  # MNN returns nothing on a failed forward
                raise BackendError(
                    self.name,
                    "run",
                    f"returned {len(outputs)} output(s), the model declares {len(declared)}",
                )
            result = [
                _as_declared(np.asarray(o), d) for o, d in zip(outputs, declared, strict=True)
            ]
            if isinstance(outputs, MeasuredOutputs):
                return MeasuredOutputs(result, outputs.seconds)
            return result

        runner.placement = getattr(run, "placement", None)  # type: ignore[attr-defined]
        runner.delegation = getattr(run, "delegation", None)  # type: ignore[attr-defined]
        return runner

    def run(self, model: onnx.ModelProto, feeds: Inputs) -> list[np.ndarray]:
        """Prepare ``model`` and run it once."""
        return self.prepare(model)(feeds)


def quirks_of(name: str) -> Profile:
    """The profile of the runtime ``name``, where its declared quirks are read.

    A runtime without a profile (ExecuTorch) declares none: an empty one stands for it.
    """
    found = TARGETS.get(name)
    if found is not None:
        return found
    return Profile(name, "declared", "", None, None, frozenset(), frozenset())


def lowest_ir(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` saved with the lowest IR version its opsets allow.

    For runtimes that bundle an older onnx than revseq's (pnnx's onnxruntime, the onnx of
    RKNN's and x2paddle's environments), whose checkers refuse a newer IR version.
    """
    lowered = onnx.ModelProto()
    lowered.CopyFrom(model)
    lowest = onnx.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    lowered.ir_version = min(model.ir_version, lowest)
    return lowered


def _declared_dtype(info: onnx.ValueInfoProto) -> np.dtype | None:
    elem = info.type.tensor_type.elem_type
    if not elem or elem in (onnx.TensorProto.STRING, onnx.TensorProto.BFLOAT16):
        return None
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))


def _as_declared(array: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """Reinterpret signed/unsigned look-alikes (same kind of integer, same width)."""
    if (
        dtype is None
        or array.dtype == dtype
        or array.dtype.kind not in "iu"
        or dtype.kind not in "iu"
        or array.dtype.itemsize != dtype.itemsize
    ):
        return array
    return np.ascontiguousarray(array).view(dtype)


def unavailable(name: str) -> str | None:
    """Why the backend cannot run on this machine, or None when it can.

    Its packages must be importable (checked without importing them: ``find_spec`` of a
    dotted name imports only its parent package), and whatever else the adapter needs
    (tinygrad's CPU device needs a C compiler) must be there.
    """
    declared = adapter(name)
    for module_name in declared.imports:
        try:
            found = importlib.util.find_spec(module_name) is not None
        except ImportError:  # the dotted name's parent package is missing
            found = False
        if not found:
            return f"backend {name!r} is not installed: {install_hint(declared.extra)}"
    missing = declared.missing_requirement
    return missing() if missing is not None else None


def installed(name: str) -> bool:
    """Whether the backend can run here (see :func:`unavailable`)."""
    return unavailable(name) is None


def adapter(name: str) -> Adapter:
    """The adapter registered as ``name`` (its module imported on first use).

    Raises:
        BackendUnavailableError: No adapter has that name.
    """
    row = _REGISTRY.get(name)
    if row is None:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; choose one of {', '.join(_REGISTRY)}"
        )
    module, _, attribute = row.where.partition(":")
    found = getattr(
        importlib.import_module(f"revseq.backends.{module}"), attribute or "ADAPTER"
    )
    if not isinstance(found, Adapter):
        raise TypeError(f"revseq.backends.{row.where} is no Adapter")
    return found


def get(name: str) -> Backend:
    """The adapter for ``name``.

    Raises:
        BackendUnavailableError: The name is unknown or the backend cannot run here.
    """
    reason = unavailable(name)
    if reason is not None:
        raise BackendUnavailableError(reason)
    return Backend(name, adapter(name))


def set_up(name: str, progress: Callable[[str], None]) -> str:
    """Install what backend ``name`` needs beyond pip; what it installed, in one line.

    Raises:
        BackendUnavailableError: It installed, but the backend still cannot run here.
        RuntimeError: A step of the installation failed.
    """
    declared = adapter(name)
    if declared.setup is None:
        raise BackendUnavailableError(f"backend {name!r} installs with pip alone")
    done = declared.setup(progress)
    reason = unavailable(name)
    if reason is not None:
        raise BackendUnavailableError(reason)
    return done


def input_names(model: onnx.ModelProto) -> list[str]:
    """The names of the model's run-time inputs (``run_time_input_infos``)."""
    return [i.name for i in run_time_input_infos(model)]


def write_model(model: onnx.ModelProto, folder: str, name: str = "model.onnx") -> str:
    """Save ``model`` in ``folder`` for backends that only read files; returns the path."""
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path
