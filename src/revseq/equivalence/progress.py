"""What a long check says while it works: the stage, and how long it has taken so far.

A runtime may convert a model for minutes (a build for a device, a converter) before its
first run returns: a check that printed nothing then looks hung. Each stage says when it
starts, every ``HEARTBEAT`` seconds while it lasts, and how long it took when it was
slow.
"""

from __future__ import annotations

__all__ = ["HEARTBEAT", "Progress", "stage"]

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

Progress = Callable[[str], None]
"""Called with one line (the command line prints it to stderr)."""

HEARTBEAT = 15.0
"""Seconds between two lines of a stage that is still running."""

_SLOW = 2.0  # a stage that took longer says so when it ends


@contextlib.contextmanager
def stage(progress: Progress | None, what: str, *, every: float = HEARTBEAT) -> Iterator[None]:
    """Say ``what`` starts, that it still runs every ``every`` seconds, and its time."""
    if progress is None:
        yield
        return
    started = time.perf_counter()
    progress(f"check: {what} ...")
    done = threading.Event()

    def beat() -> None:
        while not done.wait(every):
            progress(f"check: {what}: still running, {time.perf_counter() - started:.0f} s")

    heart = threading.Thread(target=beat, daemon=True)
    heart.start()
    try:
        yield
    finally:
        done.set()
        heart.join()
        took = time.perf_counter() - started
        if took >= _SLOW:
            progress(f"check: {what}: {took:.1f} s")
