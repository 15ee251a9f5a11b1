"""The pages the measuring commands write under ``docs/``, stamped with the command."""

from __future__ import annotations

__all__ = ["stamped_command", "write_measured_page"]

import os
import shlex
import time
from collections.abc import Sequence

from revseq import __version__, files


def write_measured_page(
    path: str | os.PathLike,
    title: str,
    command: str,
    context: str,
    body: str,
    *,
    setup: str | None = None,
) -> None:
    """Write a Markdown page of measurements: the title, the set-up, the body, the stamp.

    ``setup`` is one line on what was measured on what; the stamp at the end names the
    ``command`` (so anyone can bring the page up to date), the date, revseq's version
    and the ``context`` it measured with (backend versions, machine).
    """
    stamp = (
        f"Written by `{command}` on {time.strftime('%Y-%m-%d')} (revseq {__version__}; "
        f"{context}); run it again to bring it up to date."
    )
    head = f"# {title}\n\n" + (f"{setup}\n\n" if setup else "")
    files.write_text_atomically(path, f"{head}{body.rstrip()}\n\n{stamp}\n")


def stamped_command(
    prog: str, argv: Sequence[str], *, placeholders: Sequence[str] = ()
) -> str:
    """The command a page was written by, as its stamp says it.

    The value of each option in ``placeholders`` (``--before``: an interpreter on the
    machine that ran it) is said by its metavar instead, ``PYTHON``.
    """
    words, hidden = [], False
    for word in argv:
        words.append("PYTHON" if hidden else shlex.quote(word))
        hidden = word in placeholders
    return " ".join([prog, *words])
