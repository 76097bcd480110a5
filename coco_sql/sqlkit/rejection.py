"""How every check rejects a candidate: one bounded line, free of terminal escapes, so the mutator can read it
and a user never sees a multi-line dump of hostile text."""

from __future__ import annotations

import re

from coco_sql.errors import CandidateRejected

MAX_MESSAGE_CHARS = 400


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Collapse whitespace and terminal escapes so a message is a single, bounded line."""
    flat = " ".join(_ANSI_ESCAPE.sub("", text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def reject(message: str) -> CandidateRejected:
    """Build the rejection raised by every check (always one line)."""
    return CandidateRejected(one_line(message))
