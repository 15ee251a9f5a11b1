"""Where a backend's profile file lives in the source tree, and writing it there.

``revseq probe NAME --write`` saves the profile it measured where the planner reads it
(``ops/profiles/NAME.json``); ``--keep-costs`` reads the saved one first.
"""

from __future__ import annotations

__all__ = ["profile_path", "saved_profile", "write_profile"]

import json
import pathlib

from revseq import files
from revseq.measure.probe import ProbeError
from revseq.ops import targets
from revseq.ops.profile import Profile


def profile_path(name: str) -> pathlib.Path:
    """Where the profile file of ``name`` lives (beside the module that loads them)."""
    return pathlib.Path(targets.__file__).parent / "profiles" / f"{name}.json"


def saved_profile(name: str) -> Profile:
    """The profile of ``name`` as saved.

    Raises:
        ProbeError: None is saved.
    """
    path = profile_path(name)
    if not path.is_file():
        raise ProbeError(f"no saved profile of {name!r} ({path})")
    return Profile.read(path)


def write_profile(profile: Profile) -> pathlib.Path:
    """Save ``profile`` where the planner reads it (atomically); returns the path."""
    path = profile_path(profile.name)
    files.write_text_atomically(path, json.dumps(profile.to_json(), indent=2) + "\n")
    return path
