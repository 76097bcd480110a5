"""What both command modules (`cli`, `cli_warehouse`) need: the progress line, reading a program file, and the
parser that lets ``--json`` end with a JSON object even for a usage error."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

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


class UsageError(Exception):
    """A command line argparse refuses; carries the usage text argparse would print."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


class Parser(argparse.ArgumentParser):
    """argparse that raises `UsageError` instead of exiting, so `run` can end ``--json`` output with JSON."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage())


def json_error(wanted: bool, error: object, kind: str) -> None:
    if wanted:
        print(json.dumps({"error": " ".join(str(error).split()), "kind": kind}), flush=True)
