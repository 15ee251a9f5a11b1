"""Loading and saving model files safely: clear errors, contained external data, atomic writes.

Loading never reads a byte outside the model's folder: every external-data ``location`` is
checked (relative, no escape through ``..`` or symlinks, the file present and long enough)
before onnx-ir maps the tensors lazily, so big weights are not read into memory. Saving
writes a temporary file next to the target and renames it into place, so a failure never
leaves a half-written output.
"""

from __future__ import annotations

__all__ = [
    "InputLoadError",
    "ModelLoadError",
    "ModelSaveError",
    "check_output_path",
    "external_tensor_count",
    "load_arrays",
    "load_model",
    "same_file",
    "save_arrays",
    "save_model",
    "write_text_atomically",
]

import contextlib
import logging
import os
import pathlib
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator

import google.protobuf.message
import numpy as np
import onnx
import onnx.checker
import onnx_ir as ir
from onnx_ir import external_data as ir_external_data

from revseq.errors import RevseqError, one_line

logger = logging.getLogger(__name__)


class ModelLoadError(RevseqError):
    """A file could not be read as a valid ONNX model."""


class ModelSaveError(RevseqError):
    """A model could not be written to the requested path."""


class InputLoadError(RevseqError):
    """A file of input values could not be read."""


# protobuf cannot serialise a message of 2 GiB or more: larger models need external data.
_PROTOBUF_LIMIT = 2**31 - 1


def _check_path(path: pathlib.Path) -> None:
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    if path.is_dir():
        raise ModelLoadError(f"{path}: is a folder, not a model file")
    if not os.access(path, os.R_OK):
        raise ModelLoadError(f"{path}: permission denied")
    if path.stat().st_size == 0:
        raise ModelLoadError(f"{path}: empty file, not an ONNX model")


def _parse(path: pathlib.Path) -> onnx.ModelProto:
    try:
        proto = onnx.load(path, load_external_data=False)
    except (google.protobuf.message.DecodeError, ValueError, RuntimeError) as e:
        raise ModelLoadError(
            f"{path}: not an ONNX model (protobuf parse failed: truncated or not a "
            f"model file: {one_line(e)})"
        ) from e
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {one_line(e)}") from e
    if not proto.HasField("graph") or proto.ir_version <= 0 or not proto.opset_import:
        raise ModelLoadError(
            f"{path}: not an ONNX model (the file parses, but has no graph, ir_version or "
            "opset imports: another protobuf message?)"
        )
    return proto


def _tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every TensorProto a model holds: initializers, attributes, subgraphs, functions."""

    def from_graph(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield sparse.values
            yield sparse.indices
        yield from from_nodes(graph.node)

    def from_nodes(nodes: Iterator[onnx.NodeProto]) -> Iterator[onnx.TensorProto]:
        for node in nodes:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("g"):
                    yield from from_graph(attr.g)
                for graph in attr.graphs:
                    yield from from_graph(graph)

    yield from from_graph(proto.graph)
    for function in proto.functions:
        yield from from_nodes(function.node)


def external_tensor_count(proto: onnx.ModelProto) -> int:
    """How many tensors of ``proto`` keep their data in external files."""
    return sum(t.data_location == onnx.TensorProto.EXTERNAL for t in _tensors(proto))


def _check_external_data(path: pathlib.Path, proto: onnx.ModelProto) -> None:
    """Refuse external data that is missing, too short, or outside the model's folder."""
    folder = path.parent.resolve()
    for tensor in _tensors(proto):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        where = f"{path}: tensor {tensor.name!r}: external data location {location!r}"
        if not location:
            raise ModelLoadError(f"{where}: no location given")
        if os.path.isabs(location) or pathlib.PurePath(location).drive:
            raise ModelLoadError(f"{where}: absolute paths are refused")
        if ".." in pathlib.PurePath(location).parts:
            raise ModelLoadError(f"{where}: escapes the model's folder ('..')")
        target = (folder / location).resolve()
        if folder not in target.parents:
            raise ModelLoadError(f"{where}: resolves outside the model's folder")
        if not target.is_file():
            raise ModelLoadError(f"{where}: external data file is missing")
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else None
        except ValueError as e:
            raise ModelLoadError(f"{where}: offset/length are not integers") from e
        size = target.stat().st_size
        if offset < 0 or offset > size or (length is not None and offset + length > size):
            raise ModelLoadError(
                f"{where}: offset {offset} + length {length} lies beyond the file's "
                f"{size} bytes"
            )


def load_model(
    path: str | os.PathLike, *, checker_warning: Callable[[str], None] | None = None
) -> ir.Model:
    """Load a model file as an ``onnx_ir.Model``, external tensors mapped lazily.

    ``checker_warning``: where onnx's checker fails the model (a tf2onnx export holding
    an op of another framework, CudnnRNN), it is called with the complaint and the model
    is loaded all the same (``revseq info`` describes what such a model holds); without
    it, that is an error.

    Raises:
        ModelLoadError: The path is missing, a folder, unreadable or empty; the file is
            not an ONNX model (random bytes, truncated, another protobuf message); it
            fails onnx's checker; or its external data is missing or lies outside the
            model's folder. The message names the file and the problem.
    """
    path = pathlib.Path(path)
    _check_path(path)
    proto = _parse(path)
    _check_external_data(path, proto)
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as e:
        if checker_warning is None:
            raise ModelLoadError(f"{path}: fails onnx's checker: {one_line(e)}") from e
        checker_warning(f"{path}: fails onnx's checker: {one_line(e)}")
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as e:
        raise ModelLoadError(f"{path}: not a readable ONNX model: {one_line(e)}") from e
    ir_external_data.set_base_dir(model.graph, str(path.parent))
    return model


def load_arrays(path: str | os.PathLike, *, name: str | None = None) -> dict[str, np.ndarray]:
    """Arrays by input name from an ``.npz`` (its names) or an ``.npy`` (``name``).

    Pickled objects are never loaded: a string input is given as a unicode array.

    Raises:
        InputLoadError: The file is missing, not a numpy file, holds pickled objects,
            or is an ``.npy`` without a name to give it.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise InputLoadError(f"{path}: no such file")
    try:
        loaded = np.load(path, allow_pickle=False)
    except ValueError as e:
        raise InputLoadError(f"{path}: holds pickled objects, which are not loaded") from e
    except (OSError, EOFError) as e:
        raise InputLoadError(f"{path}: not a .npy or .npz file: {one_line(e)}") from e
    if isinstance(loaded, np.ndarray):
        if name is None:
            raise InputLoadError(
                f"{path}: an .npy holds one array: name its input (NAME={path})"
            )
        arrays = {name: loaded}
    else:
        with loaded:
            if name is not None:
                raise InputLoadError(f"{path}: an .npz names its arrays itself")
            arrays = {key: loaded[key] for key in loaded.files}
    return {
        key: value.astype(object) if value.dtype.kind == "U" else value
        for key, value in arrays.items()
    }


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name the same file (both must exist to be the same)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _external_files(model: ir.Model) -> dict[pathlib.Path, str]:
    """Data files the model's external tensors live in: absolute path -> location."""
    files: dict[pathlib.Path, str] = {}
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                files[pathlib.Path(tensor.base_dir, tensor.location).resolve()] = str(
                    tensor.location
                )
    return files


def _carry_external_data(
    proto: onnx.ModelProto, files: dict[pathlib.Path, str], output: pathlib.Path
) -> list[tuple[pathlib.Path, pathlib.Path]]:
    """Point the proto's external data at files beside ``output``; plan the copies.

    Weights are never read into memory: a data file already in the output's folder is
    referenced as it is, any other is copied there by the kernel (``shutil.copyfile``)
    under ``<output name>.<its name>``.

    Returns:
        (source, destination) pairs still to copy.
    """
    folder = output.parent.resolve()
    renames: dict[str, str] = {}
    copies = []
    for source, location in files.items():
        if source.parent == folder:
            continue
        destination = folder / f"{output.name}.{source.name}"
        renames[location] = destination.name
        copies.append((source, destination))
    if renames:
        for tensor in _tensors(proto):
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value in renames:
                    entry.value = renames[entry.value]
    return copies


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: set it straight back
    os.umask(mask)
    return mask


def _mode_for(path: pathlib.Path) -> int:
    """The permission bits a file written at ``path`` gets, as the tools beside us do.

    A file that replaces another keeps its bits; a new one gets 0666 minus the umask
    (``mkstemp`` alone would leave every output 0600).
    """
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


@contextlib.contextmanager
def _temporary_next_to(path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A temporary file in ``path``'s folder, removed unless renamed into place.

    It already has the mode ``path`` will have, so the rename publishes both at once.
    """
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(handle, _mode_for(path))
    finally:
        os.close(handle)
    temporary = pathlib.Path(name)
    try:
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)


def _fsync(path: pathlib.Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _save_with_new_external_data(
    model: ir.Model, path: pathlib.Path, external_data: str | None, size_threshold: int
) -> None:
    """Write every large tensor to one new data file beside ``path`` (both atomic)."""
    with _temporary_next_to(path) as temporary:
        ir.save(
            model,
            temporary,
            external_data=external_data or f"{path.name}.data",
            size_threshold_bytes=size_threshold,
        )
        _fsync(temporary)
        os.replace(temporary, path)


def check_output_path(path: str | os.PathLike) -> None:
    """Refuse an output path that cannot be written, before any work is done.

    Raises:
        ModelSaveError: The path is a folder, or its folder does not exist.
    """
    path = pathlib.Path(path)
    if path.is_dir():
        raise ModelSaveError(f"{path}: is a folder; give a file path for the output")
    if not path.parent.is_dir():
        raise ModelSaveError(f"{path}: the output folder {path.parent} does not exist")


def save_model(
    model: ir.Model,
    path: str | os.PathLike,
    *,
    external_data: str | None = None,
    size_threshold: int = 1024,
) -> None:
    """Write ``model`` to ``path`` atomically.

    External data is carried over without reading it: files already beside the output
    are referenced as they are, others are copied next to it. A model too large for one
    protobuf, or any model when ``external_data`` names a file, gets its weights written
    to a new data file beside the output (``<output name>.data`` by default).

    Raises:
        ModelSaveError: The output cannot be written (missing or unwritable folder, the
            path is a folder, ...). Nothing is left behind.
    """
    path = pathlib.Path(path)
    check_output_path(path)
    try:
        files = _external_files(model)
        proto = ir.to_proto(model)  # external tensors stay references: nothing is read
        if external_data is not None or proto.ByteSize() > _PROTOBUF_LIMIT:
            _save_with_new_external_data(model, path, external_data, size_threshold)
        else:
            copies = _carry_external_data(proto, files, path)
            for source, destination in copies:
                with _temporary_next_to(destination) as temporary:
                    shutil.copyfile(source, temporary)
                    os.replace(temporary, destination)
            with _temporary_next_to(path) as temporary:
                temporary.write_bytes(proto.SerializeToString())
                _fsync(temporary)
                os.replace(temporary, path)
    except ModelSaveError:
        raise
    except (OSError, ValueError) as e:
        raise ModelSaveError(f"{path}: cannot write: {one_line(e)}") from e
    logger.info("wrote %s", path)


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename.

    Raises:
        ModelSaveError: The file cannot be written.
    """
    path = pathlib.Path(path)
    try:
        with _temporary_next_to(path) as temporary:
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, path)
    except OSError as e:
        raise ModelSaveError(f"{path}: cannot write: {one_line(e)}") from e


def save_arrays(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an ``.npz`` that :func:`load_arrays` reads back, atomically.

    Strings are written as unicode arrays (no pickle), as ``load_arrays`` reads them.

    Raises:
        ModelSaveError: The file cannot be written.
    """
    path = pathlib.Path(path)
    check_output_path(path)
    plain = {
        name: array.astype(str) if array.dtype == object else array
        for name, array in ((n, np.asarray(a)) for n, a in arrays.items())
    }
    try:
        with _temporary_next_to(path) as temporary:
            # Member by member, as np.savez writes them: any input name is a name.
            with zipfile.ZipFile(temporary, "w") as archive:
                for name, array in plain.items():
                    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, array, allow_pickle=False)
            _fsync(temporary)
            os.replace(temporary, path)
    except OSError as e:
        raise ModelSaveError(f"{path}: cannot write: {one_line(e)}") from e
