"""Target profiles: what each backend runs exactly, as data that the forms and planner read.

A profile (written by ``revseq probe`` into its runtime's room,
``src/revseq/backends/ROOM/NAME.json``; the documented ones in ``profiles/``) lists the
op types and variants a backend ran exactly, the element types it carries and what each
form costs there. ``revseq.ops.vocabulary`` names everything a profile may say (and every
layer speaks it); ``profile`` is the model of one, with the measured thresholds the forms
switch at (``Tuning``); ``registry`` loads them (``TARGETS``) and resolves what a user asks
for (``resolve_target``); ``carriers`` holds the element-type carriers.
"""

from __future__ import annotations

__all__ = [
    "ANY",
    "PORTABLE",
    "TARGETS",
    "Target",
    "combine",
    "load_profiles",
    "resolve_target",
    "shipped_profile_files",
    "user_profiles",
]

from revseq.ops.targets.registry import (
    ANY,
    PORTABLE,
    TARGETS,
    Target,
    combine,
    load_profiles,
    resolve_target,
    shipped_profile_files,
    user_profiles,
)
