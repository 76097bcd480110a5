"""What the command modules (`cli`, `cli_warehouse`, `cli_watch`) share: progress lines, a run's progress as
`evolve` and `resume` show and mirror it, the next step after a run, reading a program file, and the parser
that lets ``--json`` end with a JSON object even for a usage error."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from coco_sql.errors import ConfigError
from coco_sql.progress import Progress, terminal_progress, terminal_width

if TYPE_CHECKING:
    from coco_sql.engine import IterationReport, RunSummary
    from coco_sql.llm import AiConfig

LEGEND = (
    "One line per iteration: [iteration/budget] parent -> child, the child's score on the validation rows "
    "(+ when it entered the archive), the best score so far, and what the child changed. Program ids are "
    "run-iteration: {run}-0 is the seed of run {run}."
)


def progress_line(args: argparse.Namespace) -> Progress | None:
    """The terminal's progress line for long operations, unless --quiet or stderr is not a terminal."""
    return None if getattr(args, "quiet", False) else terminal_progress(sys.stderr)


def read_program(path: Path) -> str:
    """A program file's text; a one-line ConfigError when it cannot be read."""
    try:
        return path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read program file {path}: {error.strerror}") from None


def db_flag(db: str | Path) -> str:
    return f"--db {shlex.quote(str(db))}"


class RunProgress:
    """What `coco-sql evolve` and `resume` show while a run goes: a legend before the first line, then each
    iteration's line fitted to the terminal (whole in a log). Every line is also mirrored beside the store
    (`progress_mirror`), so that `coco-sql watch` in another terminal can follow the run while
    this process holds the database file; the mirror is written under --quiet too."""

    def __init__(self, db: str | Path, task: str = "", *, quiet: bool = False, stream: TextIO | None = None):
        from coco_sql.progress_mirror import ProgressMirror

        self.db, self.quiet = db, quiet
        self.stream = stream or sys.stderr
        self.mirror: ProgressMirror = ProgressMirror(db, 0, task)
        self._legend = False

    def starting(self) -> None:
        """Before the run opens its store: a `starting` row, so that a watcher waits instead of opening it."""
        self.mirror.update("starting", f"starting a run of {self.mirror.task or 'the task'}", line=False)

    def __call__(self, report: IterationReport) -> None:
        if not self._legend:
            self._start(int(report.program_id.split("-")[0]))
        if not self.quiet:
            print(report.line(terminal_width(self.stream)), file=self.stream, flush=True)
        self.mirror.update(
            "evolving", report.line(), iteration=report.iteration, best_val=report.best_score,
            budget=report.budget,
        )  # fmt: skip

    def _start(self, run_id: int) -> None:
        self.mirror.run_id, self._legend = run_id, True
        if self.quiet:
            return
        width = min(terminal_width(self.stream) or 100, 100)
        print(textwrap.fill(LEGEND.format(run=run_id), width, break_on_hyphens=False), file=self.stream)
        print(
            f"Follow it from another terminal: coco-sql watch {db_flag(self.db)}",
            file=self.stream,
            flush=True,
        )

    def finished(self, summary: RunSummary) -> None:
        """The run returned and the command is done with its store: its last state in the mirror."""
        if not self._legend:
            return
        self.mirror.task = summary.task
        phase = "stopped" if summary.stopped else "finished"
        message = f"run {summary.run_id} {phase}: champion {summary.champion_id}, validation " + (
            f"{summary.seed_val_score:.3f} -> {summary.champion_val_score:.3f}"
        )
        if summary.stopped:
            message += f" ({summary.stopped})"
        self.mirror.update(phase, message, iteration=summary.iterations, best_val=summary.best_val_score)

    def failed(self, error: BaseException) -> None:
        what = "interrupted" if isinstance(error, KeyboardInterrupt) else " ".join(str(error).split())
        self.mirror.update("failed", f"the run failed: {what}")


def next_steps(summary: RunSummary, db: str | Path) -> list[str]:
    """What to do after a run, as commands."""
    flag = db_flag(db)
    if summary.stopped and "spend limit" in summary.stopped:
        return [f"coco-sql resume {flag} --run {summary.run_id} --max-spend LARGER   (go on)"]
    return [
        f"coco-sql report {flag} --out report.html   (what changed, how good, what it costs)",
        f"coco-sql export {flag}   (the champion; --form makes it a view, a dbt project or an agent: --help)",
    ]


def ai_config(args: argparse.Namespace) -> AiConfig:
    """The environment's AI configuration with the command line's model choices and aliases on top."""
    from coco_sql.llm import AiConfig
    from coco_sql.llm.routing import alias_option, aliases_from_file

    overrides = {
        name: value
        for name, value in (
            ("classify_model", args.classify_model),
            ("completion_model", args.completion_model),
        )
        if value
    }
    aliases = aliases_from_file(args.model_aliases) if args.model_aliases is not None else {}
    aliases.update(alias_option(text) for text in args.model_alias)
    return AiConfig.from_environment(**overrides, model_aliases=aliases, progress=progress_line(args))


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
