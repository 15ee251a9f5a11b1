"""A node builder for the decomposition forms: ``op.Range(a, b, c)`` records one node.

Nodes whose inputs are all constants are evaluated on the spot (for the few integer ops
the forms use for index arithmetic) and recorded as one Constant instead, so a node with
static shapes carries its index as a constant rather than as arithmetic run every time.
"""

from __future__ import annotations

__all__ = ["NodeBuilder"]

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

# Results with more elements than this stay run-time arithmetic, so a folded index never
# makes the model file grow by a data-sized tensor.
MAX_FOLDED_ELEMENTS = 1 << 16


def _attr(attributes: dict[str, Any], name: str, default: Any) -> Any:
    return attributes.get(name, default)


def _unsqueeze(args: list[np.ndarray], attributes: dict[str, Any]) -> np.ndarray:
    data = args[0]
    axes = args[1].tolist() if len(args) > 1 else list(attributes["axes"])
    rank = data.ndim + len(axes)
    return np.expand_dims(data, tuple(a % rank for a in axes))


_FOLDERS: dict[str, Callable[[list[np.ndarray], dict[str, Any]], np.ndarray]] = {
    "Unsqueeze": _unsqueeze,
    "Expand": lambda a, _: np.broadcast_to(
        a[0], np.broadcast_shapes(a[0].shape, tuple(a[1].tolist()))
    ).copy(),
    "Add": lambda a, _: a[0] + a[1],
    "Sub": lambda a, _: a[0] - a[1],
    "Mul": lambda a, _: a[0] * a[1],
    "Min": lambda a, _: np.minimum(a[0], a[1]),
    "Max": lambda a, _: np.maximum(a[0], a[1]),
    "Less": lambda a, _: a[0] < a[1],
    "Where": lambda a, _: np.where(a[0], a[1], a[2]),
    "Concat": lambda a, at: np.concatenate(a, axis=_attr(at, "axis", 0)),
    "Range": lambda a, _: np.arange(a[0], a[1], a[2], dtype=a[0].dtype),
}


def _constant_of(value: ir.Value | None) -> np.ndarray | None:
    if value is None or value.const_value is None:
        return None
    return value.const_value.numpy()


class NodeBuilder:
    """Records the nodes a form emits, named after the node they replace.

    Attributes:
        nodes: The nodes recorded so far, in emission order.
    """

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self.nodes: list[ir.Node] = []

    def __getattr__(self, op_type: str) -> Callable[..., ir.Value]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def make(*inputs: ir.Value | None, **attributes: Any) -> ir.Value:
            folded = self._fold(op_type, inputs, attributes)
            if folded is not None:
                return self._record("Constant", (), {"value": ir.tensor(folded)})
            return self._record(op_type, inputs, attributes)

        return make

    def _fold(
        self, op_type: str, inputs: tuple[ir.Value | None, ...], attributes: dict[str, Any]
    ) -> np.ndarray | None:
        folder = _FOLDERS.get(op_type)
        if folder is None:
            return None
        args = [_constant_of(v) for v in inputs]
        if any(a is None for a in args):
            return None
        result = np.asarray(folder([a for a in args if a is not None], attributes))
        if result.size > MAX_FOLDED_ELEMENTS:
            return None
        return result

    def _record(
        self,
        op_type: str,
        inputs: tuple[ir.Value | None, ...],
        attributes: dict[str, Any],
    ) -> ir.Value:
        name = f"{self._prefix}/{op_type}_{len(self.nodes)}"
        node = ir.Node(
            "",
            op_type,
            inputs,
            attributes=ir.convenience.convert_attributes(attributes),
            name=name,
        )
        output = node.outputs[0]
        output.name = name
        if op_type == "Constant":
            tensor = attributes["value"]
            output.const_value = tensor
            output.type = ir.TensorType(tensor.dtype)
            output.shape = ir.Shape(tensor.shape)
        self.nodes.append(node)
        return output

    def drop_unused(self) -> None:
        """Forget folded-away constants that no emitted node reads."""
        self.nodes = [n for n in self.nodes if n.op_type != "Constant" or n.outputs[0].uses()]
