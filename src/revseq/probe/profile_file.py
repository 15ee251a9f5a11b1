"""Where a backend's profile file is saved, and reading the saved one back.

``revseq probe NAME --write`` saves the profile it measured in the user's profile folder
(``revseq.ops.targets.user_profiles``), which the planner reads over the profiles
shipped with revseq; ``--write FOLDER`` saves it elsewhere (revseq's own are refreshed
in a source tree with ``--write src/revseq/backends/ROOM``, the runtime's room).
``--keep-costs`` reads the saved one first.
"""

from __future__ import annotations

__all__ = ["profile_path", "saved_profile", "write_profile"]

import json
import os
import pathlib

from revseq import files
from revseq.ops.targets import shipped_profile_files, user_profiles
from revseq.ops.targets.profile import Profile
from revseq.probe.backend import ProbeError


def profile_path(name: str, folder: str | os.PathLike | None = None) -> pathlib.Path:
    """Where the profile of ``name`` is saved: in ``folder``, else the user's folder."""
    return pathlib.Path(folder if folder is not None else user_profiles()) / f"{name}.json"


def saved_profile(name: str, folder: str | os.PathLike | None = None) -> Profile:
    """The profile of ``name`` as saved: in ``folder``, the user's, or revseq's own.

    Raises:
        ProbeError: None is saved.
    """
    path = profile_path(name, folder)
    if path.is_file():
        return Profile.read(path)
    for shipped in shipped_profile_files():
        if shipped.name == f"{name}.json":
            return Profile.read(shipped)
    raise ProbeError(f"no saved profile of {name!r} ({profile_path(name, folder)})")


def write_profile(profile: Profile, folder: str | os.PathLike | None = None) -> pathlib.Path:
    """Save ``profile`` (atomically) in ``folder``, else the user's; returns the path."""
    path = profile_path(profile.name, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_text_atomically(path, json.dumps(profile.to_json(), indent=2) + "\n")
    return path
