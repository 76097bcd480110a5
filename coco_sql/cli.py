"""The `coco-sql` command. Thin: parses arguments, calls the library, prints. No logic of its own (the help
texts and shared options are `cli_help`).

User errors (CocoError) print as one line on stderr and exit 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from coco_sql import cli_init, cli_run, cli_warehouse, cli_watch
from coco_sql.cli_common import UsageError, ai_config, json_error, read_program
from coco_sql.cli_help import (
    DESCRIPTION,
    EPILOG,
    add_ai_options,
    add_db,
    add_installed_commands,
    add_json,
    add_plugin_commands,
    add_quiet,
    add_run,
    add_version,
    command,
    command_word,
    parser_class,
)
from coco_sql.cli_inspect import HISTORY_ALIASES, cmd_cost, cmd_history, cmd_report, cmd_status
from coco_sql.errors import CocoError, ConfigError
from coco_sql.options import TOOL_ARGUMENTS
from coco_sql.plugin_loader import BUILTIN_COMMANDS, COMMAND_GROUP
from coco_sql.progress import terminal_width
from coco_sql.reflect.history import HistoryTools

if TYPE_CHECKING:
    from coco_sql.engine import IterationReport

# The heavy parts (the loop, the stores, sqlglot, pandas) are imported by the commands that use them, so that
# `coco-sql --help` stays under 0.5 s of CPU (issue 28): `python -X importtime -m coco_sql.cli --help` shows it.


def main(argv: Sequence[str] | None = None) -> int:
    """The `coco-sql` command, in a process of its own: `run(argv)`, with what is imported at its start moved
    out of the collector's way (it lives as long as the process), so that the many short-lived sqlglot trees
    of validation and mutation do not make each collection rescan it."""
    gc.collect()
    gc.freeze()
    return run(argv)


def run(argv: Sequence[str] | None = None) -> int:
    """One command line in this process (the tests' in-process CLI); its exit code. With ``--json``, stdout
    ends with one JSON object whatever happens: the command's own, or ``{"error": ..., "kind": ...}`` for a
    usage error, a user error, an interrupt, or a failure of coco-sql itself (whose traceback still goes to
    stderr)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in argv
    try:
        args = _parser(argv).parse_args(argv)
    except UsageError as error:
        print(error.usage + f"coco-sql: error: {error}", file=sys.stderr, end="\n")
        json_error(wants_json, error, "usage")
        return 2
    _quiet_libraries(debug=args.debug)
    try:
        return int(args.handler(args) or 0)
    except CocoError as error:
        if args.debug:
            raise
        print(f"coco-sql: error: {error}", file=sys.stderr)
        json_error(wants_json, error, type(error).__name__)
        return 2
    except KeyboardInterrupt:
        message = "interrupted; every committed iteration is kept (continue with --resume)"
        print(f"coco-sql: {message}", file=sys.stderr)
        json_error(wants_json, message, "interrupted")
        return 130
    except Exception as error:  # a bug: its traceback on stderr, and the JSON object all the same
        json_error(wants_json, f"{type(error).__name__}: {error}", "internal")
        raise


def _quiet_libraries(*, debug: bool) -> None:
    """Errors reach the user as one `coco-sql: error:` line: library loggers (sqlglot warns when it falls back to
    parsing a statement as a Command) and Python warnings stay silent unless --debug asks for everything."""
    if debug:
        logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
        return
    logging.getLogger().addHandler(logging.NullHandler())  # no handler-less fallback to stderr
    warnings.simplefilter("ignore")


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line's parser; `argv`, when known, spares reading the installed plug-ins' commands
    unless it names none of the others (`cli_help.add_installed_commands`)."""
    parser = parser_class()(prog="coco-sql", description=DESCRIPTION, epilog=EPILOG)
    add_version(parser)
    parser.add_argument("--debug", action="store_true", help="show a traceback instead of the one-line error")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=parser_class()
    )

    command(commands, "tasks", "list the task packs coco-sql can find").set_defaults(handler=cmd_tasks)
    cli_run.add_evolve_parser(commands)

    cli_run.add_resume_parser(commands)

    evaluate = command(commands, "eval", "score one program file on one split of a task")
    evaluate.add_argument("task", help="task pack name or directory, or a task registered in --db")
    evaluate.add_argument("--program", required=True, type=Path, metavar="FILE", help="the program file")
    evaluate.add_argument(
        "--split", choices=("train", "val", "test"), default="val", help="the rows to score on"
    )
    evaluate.add_argument(
        "--db", metavar="PATH", help="a store whose registered tasks and AI cache to use (default: none)"
    )
    add_quiet(evaluate, "no progress line")
    add_ai_options(evaluate)
    add_json(evaluate, "print the result as one JSON object")
    evaluate.set_defaults(handler=cmd_eval)

    env = command(
        commands, "env", "run the mutator's live tools over a task's training rows (JSON)",
        "What a coding agent sees: only training rows, never validation or test rows.",
    )  # fmt: skip
    env.add_argument("task", help="task pack name or directory")
    env.add_argument(
        "tool", choices=("query", "show-draft", "check"),
        help="query: one read-only SELECT; show-draft: a program's outputs against the expected ones; "
        "check: validate a program without running it",
    )  # fmt: skip
    env.add_argument("--sql", help="query: one read-only SELECT over the table `input` (default: none)")
    env.add_argument(
        "--program", type=Path, metavar="FILE", help="show-draft and check: the program file (default: none)"
    )
    env.add_argument(
        "--instance", action="append", metavar="ID", help="show-draft: a training row id (repeatable; default: "
        "the first rows)"
    )  # fmt: skip
    env.add_argument("-n", type=int, default=10, help="rows to show (query shows at least 100)")
    env.set_defaults(handler=cmd_env)

    status = command(commands, "status", "list the runs in a store and how far each got")
    add_db(status)
    status.set_defaults(handler=cmd_status)
    cli_watch.add_parser(commands)

    cost = command(
        commands, "cost", "show a run's model spending and the champion's deploy cost per 1,000 rows",
        "Search (train, val, drafts), report (test) and the mutator's own models, with and without the cache, "
        "and the score/cost frontier.",
    )  # fmt: skip
    add_db(cost)
    add_run(cost)
    add_json(cost, "print the report as JSON")
    cost.set_defaults(handler=cmd_cost)

    report = command(
        commands, "report", "write a run's report: one HTML file that opens offline",
        "What changed from the seed, how good it is now, what it costs to deploy and how to deploy it; then the "
        "score over iterations, the lineage, the solve matrix, the ledger and the code.",
    )  # fmt: skip
    add_db(report)
    add_run(report)
    report.add_argument("--out", type=Path, default=Path("report.html"), metavar="FILE", help="the HTML file")
    report.set_defaults(handler=cmd_report)

    cli_warehouse.add_parsers(commands)  # export, sql, deploy, mirror, check-deploy
    cli_init.add_parsers(commands, argv)  # init aifo, and each kind's source (init dbt)
    add_plugin_commands(commands, COMMAND_GROUP, BUILTIN_COMMANDS)  # the kinds' own: demo-agent-server

    history = command(
        commands, "history", "query a run's search history as JSON (the history tools of the paper's Table 6)"
    )
    tools = (*HistoryTools.TOOLS, *HistoryTools.ROW_TOOLS, *HISTORY_ALIASES)
    history.add_argument("tool", choices=tools, metavar="TOOL", help="one of " + ", ".join(tools))
    add_db(history)
    add_run(history)
    history.add_argument(
        "--program",
        dest="program_id",
        default=None,
        metavar="ID",
        help="program id, e.g. 1-42 (default: none)",
    )
    history.add_argument(
        "--instance", dest="instance_id", default=None, metavar="ID", help="training row id (default: none)"
    )
    history.add_argument(
        "--iteration",
        type=int,
        default=None,
        metavar="N",
        help="get_thinking_trace: the iteration (default: none)",
    )
    history.add_argument("--cell", default=None, help="MAP-Elites cell, e.g. 3:2 (default: every cell)")
    history.add_argument("-n", type=int, default=None, help="how many rows (default: the tool's own)")
    history.add_argument(
        "--depth", type=int, default=None, metavar="N", help="get_lineage: how many ancestors (default: 10)"
    )
    history.set_defaults(handler=cmd_history)
    add_installed_commands(commands, COMMAND_GROUP, command_word(argv))
    return parser


def cmd_tasks(args: argparse.Namespace) -> int:
    from coco_sql.tasks.catalog import summaries

    for name, description in summaries():
        print(f"{name:<16} {description}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from coco_sql import api

    result = api.evaluate(args.task, read_program(args.program), args.split, ai=ai_config(args), db=args.db)
    if args.json:
        print(json.dumps(result.as_dict()))
    if result.error is not None:  # the program as a whole failed: one line, like every user error
        print(f"coco-sql: error: {args.program}: {result.error}", file=sys.stderr)
        return 2
    if not args.json:
        print(
            f"{result.task} {args.split}: score {result.score:.4f} over {result.rows} rows "
            f"({result.failing_rows} not fully correct)"
        )
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    from coco_sql.evaluate import Evaluator
    from coco_sql.reflect import DraftEnvironment
    from coco_sql.tasks import load_task

    TOOL_ARGUMENTS["n"].check(args.n, label="-n")  # before the sandbox starts
    task = load_task(args.task)
    evaluator = Evaluator(task, ("train",))
    environment = DraftEnvironment(evaluator)
    try:
        if args.tool == "query":
            if not args.sql:
                raise ConfigError("env query needs --sql")
            result: object = environment.query(args.sql, limit=max(args.n, 100))
        else:
            if args.program is None:
                raise ConfigError(f"env {args.tool} needs --program")
            code = read_program(args.program)
            if args.tool == "check":
                message = environment.check(code)
                result = {"ok": message is None, "error": message}
            else:
                result = environment.show_draft(code, args.instance, limit=args.n)
    finally:
        evaluator.close()
    print(json.dumps(result))
    return 0


def _print_progress(report: IterationReport) -> None:
    """One iteration's line on stderr, fitted to the terminal (`RunProgress` adds the legend and the mirror)."""
    print(report.line(terminal_width(sys.stderr)), file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
