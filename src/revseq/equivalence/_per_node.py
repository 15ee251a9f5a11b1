"""Each ReverseSequence of one model against revseq's decomposition of it, node by node.

:func:`check_nodes` inlines the model and runs each node's replacement alone, on the
values the node receives; :func:`generate_inputs` gives the inputs :func:`check` would
generate for a trial.
"""

from __future__ import annotations

__all__ = ["check_nodes", "generate_inputs"]

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx

from revseq.equivalence._decompositions_alone import nodes_report
from revseq.equivalence._runners import (
    Capturer,
    Engine,
    ModelLike,
    refuse_invalid_nodes,
    to_proto,
    with_definition,
)
from revseq.equivalence.inputs import InputGenerator, Inputs
from revseq.equivalence.inputs.sizes import given_inputs
from revseq.equivalence.reports import NodeReport
from revseq.errors import CheckError


def check_nodes(  # noqa: PLR0913 (the public API's keyword options)
    model: ModelLike,
    *,
    strategy: str = "auto",
    trials: int = 3,
    seed: int = 0,
    backend: str | None = None,
    inputs: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]] | None = None,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[NodeReport]:
    """Check every ReverseSequence node of ``model`` against its decomposition, alone.

    The model is inlined (``revseq.inline(..., strategy=strategy)``); each node's
    replacement is then run alone (on ``backend``, or in onnxruntime) on the values the
    node receives in a run of the model, with its own and generated lengths, and compared
    bit for bit with the native op. A user learns which node, if any, breaks.
    ``inputs``, ``dims``, ``input_shapes`` and ``value_ranges`` are as in :func:`check`;
    ``progress`` is told what each input was fed.

    Raises:
        CheckError: No trials, or the model cannot be run.
        RevseqError: A node is invalid or cannot be inlined.
    """
    from revseq._api import inline

    if trials < 1:
        raise CheckError(f"trials must be at least 1, got {trials}")
    reference = with_definition(to_proto(model))
    refuse_invalid_nodes(reference, "model")
    candidate = with_definition(inline(reference, strategy=strategy))
    given, sets = given_inputs(inputs, dims, input_shapes, value_ranges)
    generator = InputGenerator([reference], seed=seed, capture=Capturer(), given=given)
    input_sets = generator.trials(sets, trials)
    if progress is not None:
        for line in generator.describe():
            progress(f"check: {line}")
    engine = Engine(backend)
    return nodes_report(reference, candidate, input_sets, engine, seed=seed, progress=None)


def generate_inputs(
    proto: onnx.ModelProto, trial: int, seed: int, *, also: onnx.ModelProto | None = None
) -> Inputs:
    """The inputs :func:`check` generates for trial ``trial`` of ``proto``.

    Symbolic dims get sizes that vary by trial (1 among them); an input that feeds a
    ``sequence_lens`` gets lengths in [0, T] that include 0, 1 and T across trials, T
    being what its nodes actually see; everything else gets random values of its type.
    """
    models = [proto] if also is None else [proto, also]
    return InputGenerator(models, seed=seed, capture=Capturer()).trial(trial)
