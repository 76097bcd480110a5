"""Progress of long operations (the cold embedding of a task's texts, a deploy, a mirror), shown on a terminal.

An operation reports `progress(what, done, total)` as it goes, through a callback it was handed; it never prints.
`terminal_progress(stream)` is the CLI's callback: one line rewritten in place, ended when `done == total`. It is
None when the stream is not a terminal (a pipe, a file, CI logs), and the CLI passes None under `--quiet`.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from typing import TextIO

Progress = Callable[[str, int, int], None]  # (what, done, total)

_MIN_INTERVAL_S = 0.1  # redraw at most ten times a second


def terminal_progress(stream: TextIO) -> Progress | None:
    """A callback drawing `what: done/total (pct)` on `stream`, or None when `stream` is not a terminal."""
    if not stream.isatty():
        return None
    last = [0.0]

    def show(what: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = done >= total
        if not finished and now - last[0] < _MIN_INTERVAL_S:
            return
        last[0] = now
        share = f" ({100 * done / total:.0f}%)" if total else ""
        stream.write(f"\r{what}: {done:,}/{total:,}{share}\x1b[K" + ("\n" if finished else ""))
        stream.flush()

    return show


def fit(text: str, room: int | None) -> str:
    """`text` on one line in at most `room` characters, cut at a word boundary and ended with `…` when it is
    longer (None: as it is, on one line)."""
    text = re.sub(r"\s*\n\s*", " ", text.strip())
    if room is None or len(text) <= room:
        return text
    if room < 2:
        return ""
    cut = text[: room - 1]
    space = cut.rfind(" ")
    if space > 0:
        cut = cut[:space]
    elif room < 20:  # not even the first word fits: nothing rather than half a word
        return ""
    return cut.rstrip(" ,;:") + "…"


def terminal_width(stream: TextIO) -> int | None:
    """The width of the terminal `stream` writes to, or None when it is not a terminal (a log keeps whole
    lines)."""
    if not stream.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns
