"""The pages the measuring commands write under ``docs/``, stamped with the command."""

from __future__ import annotations

__all__ = ["write_measured_page"]

import os
import time

from revseq import __version__, files


def write_measured_page(
    path: str | os.PathLike, title: str, command: str, context: str, body: str
) -> None:
    """Write a Markdown page of measurements, stamped with what wrote it and when.

    The stamp names the ``command`` (so anyone can bring the page up to date), the date,
    revseq's version and the ``context`` it measured with (backend versions, machine).
    """
    stamp = (
        f"Written by `{command}` on {time.strftime('%Y-%m-%d')} (revseq {__version__}; "
        f"{context}); run it again to bring it up to date."
    )
    files.write_text_atomically(path, f"# {title}\n\n{stamp}\n\n{body}")
