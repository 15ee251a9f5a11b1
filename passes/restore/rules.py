"""onnxscript rewrite rules that fuse ReverseSequence decompositions: ``rules``.

For users who run onnxscript's rewriter with their own rule sets::

    from onnxscript import rewriter
    from revseq.passes.restore.rules import rules

    model = rewriter.rewrite(model, pattern_rewrite_rules=rules)

The patterns anchor on the gather; ``check`` proves the rest with the same matcher as
:class:`revseq.passes.RestoreReverseSequencePass` (which also handles the function form
and every scope), and every refusal is a ``MatchResult.fail`` with the reason, so
onnxscript's ``MatchingTracer`` shows why a near-miss did not fuse. The index arithmetic
left unused afterwards is removed by the rewriter's own clean-up (or
``onnx_ir.passes.common.RemoveUnusedNodesPass``).
"""

from __future__ import annotations

__all__ = ["rules", "fuse_gather_rule", "fuse_gather_view_rule"]

import onnx_ir as ir
from onnxscript.rewriter import MatchResult, RewriteRule, RewriteRuleClassBase, RewriteRuleSet
from onnxscript.rewriter.pattern import PatternMatcher, SimplePatternMatcher

from revseq.passes.restore.fusion import Match, NoMatch, discard, fused_domain, made_lengths
from revseq.passes.restore.match import Matcher


class _ForgetfulMatcher(SimplePatternMatcher):
    """onnxscript's matcher, keeping nothing of a graph once a match is done.

    It holds the last graph and node it matched in: through the module-level ``rules``
    that would keep the last model rewritten alive.
    """

    def match(self, *args, **kwargs):
        try:
            return super().match(*args, **kwargs)
        finally:
            self._graph = self._current_node = self._tracer = self._match = None


class _FuseBase(RewriteRuleClassBase):
    """Shared check/rewrite: prove the root's output is ReverseSequence(X, L)."""

    @classmethod
    def rule(cls, *args, **kwargs) -> RewriteRule:
        """The rule, matched by a matcher that keeps no graph (``_ForgetfulMatcher``)."""
        instance = cls(*args, **kwargs)
        matcher: type[PatternMatcher] = _ForgetfulMatcher
        return RewriteRule(
            instance.pattern,
            instance.rewrite,
            instance.check,
            matcher,
            name=instance.name,
            remove_nodes=instance.remove_nodes,
            graph_pre_visitor=instance.setup,
            graph_post_visitor=instance.cleanup,
        )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._matcher: Matcher | None = None
        self._match: Match | None = None

    def setup(self) -> None:
        """A fresh matcher for each graph or function the rewriter visits."""
        self._matcher = Matcher()
        self._match = None

    def cleanup(self) -> None:
        """Drop the per-graph state: the module-level rules must not keep a model alive."""
        self._matcher = None
        self._match = None

    def _gather_of(self, root: ir.Node) -> ir.Node:
        return root

    def check(self, context, **_: object) -> MatchResult:
        """Fail with the matcher's reason unless the root computes a ReverseSequence."""
        result = MatchResult()
        root: ir.Node = context.root
        if self._matcher is None:  # check() called outside a rewriter pass
            self._matcher = Matcher()
        found = self._matcher.match(self._gather_of(root))
        if isinstance(found, NoMatch):
            return result.fail(found.reason, found.subject)
        if found.output is not root.outputs[0]:
            discard(found)
            return result.fail("the proven value is not this pattern's output", root)
        self._match = found
        return result

    def rewrite(self, op, **_: object) -> ir.Value:
        """One ReverseSequence node, in the domain restore would choose."""
        match, self._match = self._match, None
        assert match is not None
        made: dict[int, ir.Value] = {}
        for node in made_lengths(match):  # lengths the model does not hold, made anew
            inputs = [made.get(id(v), v) for v in node.inputs]
            attributes = {name: attr.value for name, attr in node.attributes.items()}
            made[id(node.outputs[0])] = getattr(op, node.op_type)(*inputs, **attributes)
        lengths = made.get(id(match.lengths), match.lengths)
        discard(match)  # made anew above
        return op.ReverseSequence(
            match.data,
            lengths,
            batch_axis=match.batch_axis,
            time_axis=match.time_axis,
            _domain=fused_domain(match),
        )


class FuseGather(_FuseBase):
    """A gather whose result is a ReverseSequence of its data or of its row view's."""

    def __init__(self, op_type: str) -> None:
        super().__init__(f"FuseReverseSequence{op_type}")
        self._op_type = op_type

    def pattern(self, op, data, indices):
        """The gather alone; the index is proven in ``check``."""
        return getattr(op, self._op_type)(data, indices, _allow_other_attributes=True)


class FuseGatherView(_FuseBase):
    """A gather, then views of its result.

    The row form's Reshape back, the matrix form's Transpose and Unsqueeze
    (``revseq.ops.forms``), and a carrier's Cast back.
    """

    def __init__(self, op_type: str, views: tuple[str, ...]) -> None:
        super().__init__(f"FuseReverseSequence{op_type}{''.join(views)}")
        self._op_type = op_type
        self._views = views

    def pattern(self, op, data, indices):
        """The gather, then each view in turn (their other inputs and attributes free)."""
        value = getattr(op, self._op_type)(data, indices, _allow_other_attributes=True)
        for view in self._views:
            value = getattr(op, view)(
                value, _allow_other_inputs=True, _allow_other_attributes=True
            )
        return value

    def _gather_of(self, root: ir.Node) -> ir.Node:
        node = root
        for _ in self._views:
            source = node.inputs[0]
            producer = source.producer() if source is not None else None
            if producer is None:
                break
            node = producer
        return node


# The views each form ends in, longest first: a rule matching fewer views is tried after.
# Each also with the Cast back from a carrier type (``ops/targets/carriers.py``): the matcher
# proves that only where the data was cast to the carrier of its own type.
_FORM_VIEWS = (("Transpose", "Unsqueeze"), ("Reshape",), ("Transpose",), ("Unsqueeze",))
_VIEW_CHAINS = (
    *((*views, "Cast") for views in _FORM_VIEWS),
    ("Cast",),
    *_FORM_VIEWS,
)

fuse_gather_rule = RewriteRuleSet(
    [FuseGather.rule(op_type) for op_type in ("GatherElements", "GatherND", "Gather")]
)
fuse_gather_view_rule = RewriteRuleSet(
    [
        FuseGatherView.rule(op_type, views)
        for views in _VIEW_CHAINS
        for op_type in ("Gather", "GatherElements", "GatherND")
    ]
)

rules = RewriteRuleSet([*fuse_gather_view_rule.rules, *fuse_gather_rule.rules])
"""Every rule of this module, for onnxscript's rewriter."""
