"""Why no form fits a node: the one-line error inline raises, and what to do about it.

Each form's reason is said once where forms fail alike. With symbolic dims, one thing
may keep every form away (the probe ran none with them; no op makes an index of
run-time length): it is said in place of each form's reason, which names only the
first lack that form met.
"""

from __future__ import annotations

__all__ = ["refusal"]

from revseq.errors import StrategyError
from revseq.ops.forms import runtime_index_lack
from revseq.ops.signature import Signature
from revseq.ops.targets.profile import Profile
from revseq.ops.vocabulary import DYNAMIC, STATIC
from revseq.passes.graph.reverse_sequence import node_label
from revseq.passes.graph.scopes import ScopedNode
from revseq.passes.inline.ranking import is_dynamic

_FIX_SHAPES = (
    "declare static input shapes (--overwrite-input-shape NAME:[D0,D1], or input_shapes=)"
)
"""How a user fixes the sizes a runtime that converts for fixed shapes needs."""

_KEEP_THE_OP = "keep the op (not inlined: its own ReverseSequence ran exactly when probed)"
"""What serves a runtime whose own op is exact where no form ran."""


def refusal(
    sig: Signature,
    scoped: ScopedNode,
    profile: Profile,
    reasons: list[str],
    finite: list[str],
) -> StrategyError:
    """The error for ``scoped`` (as the target sees it: ``sig``) on ``profile``.

    ``reasons`` are the forms', ``finite`` why the finite-domain form does not fit.
    """
    shapes = DYNAMIC if is_dynamic(sig) else STATIC
    if shapes == DYNAMIC:
        reasons = _symbolic_blockers(profile) or reasons
    where = f"target {profile.name!r} with {shapes} shapes"
    if profile.backend_version:
        where += f" (probed with {profile.backend_version})"
    options = []
    if shapes == DYNAMIC and (profile.verified or profile.members):
        options.append(_FIX_SHAPES)
    if profile.members:
        options.append("name the backend you run on (target=...)")
    if profile.native and profile.verified and not profile.ran_any(dynamic=shapes == DYNAMIC):
        options.append(_KEEP_THE_OP)
    hint = f"; {', or '.join(options)}" if options else ""
    why = "; ".join(dict.fromkeys([*reasons, *finite]))  # forms that fail alike say it once
    return StrategyError(f"{node_label(scoped)}: no decomposition fits {where}: {why}{hint}")


def _symbolic_blockers(profile: Profile) -> list[str]:
    """What keeps every form from a target with symbolic dims, if one thing does.

    A probe that ran no form with them, or no op an index of run-time length is made with.
    """
    if not profile.members and profile.forms is not None and not profile.ran_any(dynamic=True):
        return ["no form ran exactly there with symbolic dims when it was probed"]
    lack = runtime_index_lack(profile.allowed(dynamic=True))
    return [] if lack is None else [lack]
