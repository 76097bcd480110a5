"""What both command modules (`cli`, `cli_warehouse`) need: the progress line and reading a program file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from coco_sql.errors import ConfigError
from coco_sql.progress import Progress, terminal_progress


def progress_line(args: argparse.Namespace) -> Progress | None:
    """The terminal's progress line for long operations, unless --quiet or stderr is not a terminal."""
    return None if getattr(args, "quiet", False) else terminal_progress(sys.stderr)


def read_program(path: Path) -> str:
    """A program file's text; a one-line ConfigError when it cannot be read."""
    try:
        return path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read program file {path}: {error.strerror}") from None
