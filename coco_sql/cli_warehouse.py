"""The `coco-sql` commands that move a program or a run between stores: export, sql, deploy, mirror, check-deploy.

Split from `cli.py` so that each module stays small; `cli.py` adds these parsers in its own command order. Thin like
the rest of the command: parse, call the library, print.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from coco_sql.cli_common import progress_line, read_program
from coco_sql.cli_help import ExportForms, add_db, add_json, add_quiet, add_run, command
from coco_sql.errors import ConfigError, StoreError
from coco_sql.plugin_loader import DEPLOY_DIALECT
from coco_sql.stage import STAGE

if TYPE_CHECKING:
    from coco_sql.engines.snowflake.procs.commands import WarehouseCommands
    from coco_sql.engines.snowflake.procs.deploy import TaskRun


def add_parsers(commands: argparse._SubParsersAction) -> None:
    """export, sql, deploy, mirror and check-deploy, in the order `coco-sql --help` lists them."""
    export = command(
        commands, "export", "print or write a run's champion in the form it will run in",
        "A view, a macro or a function for DuckDB or Snowflake, a dbt model or project, or a Cortex agent. The "
        "forms that run somewhere else read --source instead of the task's `input`.",
    )  # fmt: skip
    add_db(export)
    add_run(export)
    export.add_argument(
        "--form", default="sql", choices=ExportForms(), metavar="FORM",
        help="one of %(choices)s (default: sql, the program as evolved)",
    )  # fmt: skip
    export.add_argument(
        "--source", default=None, metavar="TABLE",
        help="the table the view or model reads (default: the table the task was registered from)",
    )  # fmt: skip
    export.add_argument(
        "--max-cost", default=None, metavar="LIMIT",
        help="export the best program whose deploy cost per 1,000 rows is within this ('500 calls', "
        "'20000 tokens', '$0.05') (default: the champion)",
    )  # fmt: skip
    export.add_argument(
        "--champion", choices=("cheapest_within_se", "best"), default=None,
        help="the champion rule to export by; best: the best validation score whatever it costs (default: the "
        "run's rule)",
    )  # fmt: skip
    export.add_argument(
        "--task", default=None, metavar="DIR",
        help="the run's task pack directory, when the program reads the training rows as `examples` and the "
        "pack is not found by its name (default: found by name)",
    )  # fmt: skip
    export.add_argument(
        "--out", type=Path, default=None, metavar="DIR",
        help="write the export and the files that ship with it into this new or empty directory (default: "
        "print it)",
    )  # fmt: skip
    export.set_defaults(handler=cmd_export)

    sql = command(
        commands, "sql", "run one SQL statement on a store with the procedures installed",
        "The procedures are those a DuckDB connection from coco_sql.connect() has: coco_task, coco_evolve, "
        "coco_resume, coco_status, coco_export, coco_eval, coco_report, coco_help.",
    )  # fmt: skip
    sql.add_argument("statement", help="e.g. \"CALL coco_evolve('lockpicking6', 30, {'seed': 1})\"")
    add_db(sql)
    add_json(sql, "print the rows as a JSON list of objects")
    sql.set_defaults(handler=cmd_sql)

    _deploy_parser(commands)
    mirror = command(
        commands, "mirror", "copy a run from Snowflake into a DuckDB file",
        "Programs, evaluations, ledger and events: every local command then reads it, and resume continues it.",
    )  # fmt: skip
    mirror.add_argument(
        "--from", dest="source", choices=(DEPLOY_DIALECT,), default=DEPLOY_DIALECT, help="where the run is"
    )
    mirror.add_argument(
        "--connection", required=True, metavar="NAME", help="the connection of ~/.snowflake/connections.toml"
    )
    add_run(mirror)
    add_db(mirror, "the DuckDB file to copy the run into")
    add_quiet(mirror, "no progress line")
    mirror.set_defaults(handler=cmd_mirror)
    _check_deploy_parser(commands)


def _deploy_parser(commands: argparse._SubParsersAction) -> None:
    deploy = command(
        commands, "deploy", "set coco-sql up in a Snowflake schema: stage, tables, views and procedures",
        "Needs the snowflake extra (pip install 'coco-sql[snowflake]') and a connection in "
        "~/.snowflake/connections.toml. --print shows the script without connecting.",
    )  # fmt: skip
    how = deploy.add_mutually_exclusive_group()
    how.add_argument(
        "--print", dest="print_script", action="store_true", help="print the SQL script and stop"
    )
    how.add_argument(
        "--connection",
        metavar="NAME",
        help="run it on this connection of ~/.snowflake/connections.toml (default: none)",
    )
    deploy.add_argument(
        "--zip",
        type=Path,
        metavar="FILE",
        help="also write the package zip the procedures import to FILE (default: none)",
    )
    deploy.add_argument("--stage", default=STAGE, help="the stage that holds the zip")
    deploy.add_argument(
        "--schema", metavar="DB.SCHEMA", help="where to deploy (default: the connection's schema)"
    )
    add_quiet(deploy, "no progress line")
    deploy.add_argument(
        "--task-run", nargs=2, metavar=("TASK", "BUDGET"),
        help="also start coco_evolve(TASK, BUDGET) as a Snowflake task (default: none)",
    )  # fmt: skip
    deploy.add_argument("--warehouse", help="with --task-run: the warehouse the task runs on (default: none)")
    deploy.add_argument(
        "--task-options", metavar="JSON",
        help="with --task-run: coco_evolve options as JSON, e.g. '{\"seed\": 1}' (default: none)",
    )  # fmt: skip
    deploy.set_defaults(handler=cmd_deploy)


def _check_deploy_parser(commands: argparse._SubParsersAction) -> None:
    check = command(
        commands, "check-deploy", "check that a run's champion, or a program file, runs unchanged in Snowflake",
        "Each finding is one line (a function Snowflake lacks, with its alternative; an argument name; a type). "
        "Exits 1 when there are findings.",
    )  # fmt: skip
    add_db(check)
    add_run(check)
    check.add_argument(
        "--program",
        type=Path,
        default=None,
        metavar="FILE",
        help="a SQL file to check (default: the champion)",
    )
    check.add_argument(
        "--task", default=None, help="with --program: the task whose dialect it is written in (default: none)"
    )
    add_json(check, "print the findings as a JSON list")
    check.set_defaults(handler=cmd_check_deploy)


def cmd_export(args: argparse.Namespace) -> int:
    from coco_sql import api
    from coco_sql.plugins import kind, open_store

    champion = api.export(
        args.run, db=args.db, form=args.form, source=args.source, max_cost=args.max_cost, task=args.task,
        champion=args.champion,
    )  # fmt: skip
    folder = kind(champion.language).folder_export
    if folder is not None and args.form in folder.forms:  # a kind's own form: a folder of files
        if args.out is None:
            print(champion.code, end="")
        else:
            written = folder.write(champion.code, args.out)
            print(
                f"wrote {len(written)} files of {champion.program_id} (run {champion.run_id}) to {args.out}"
            )
        return 0
    text = champion.code.rstrip() + "\n"
    if args.form != "dbt":  # a dbt model starts with its config block
        what = "best program" if args.champion == "best" else "champion"
        what = what if args.max_cost is None else f"best program within {args.max_cost} per 1,000 rows:"
        text = (
            f"-- coco-sql {what} {champion.program_id} of run {champion.run_id} "
            f"(validation score {champion.val_score:.4f})\n" + text
        )
    if args.out is not None:
        with contextlib.closing(open_store(args.db, read_only=True)) as store:
            main = f"coco_{store.get_run(champion.run_id).task}_champion.sql"  # the name the export creates
        written = {f"models/{main}" if args.form == "dbt" else main: text, **champion.files}
        for name, content in written.items():
            (args.out / name).parent.mkdir(parents=True, exist_ok=True)
            (args.out / name).write_text(content, encoding="utf-8")
        print(f"wrote {', '.join(sorted(written))} to {args.out}", file=sys.stderr)
    else:
        print(text, end="")
        if champion.files:
            print(f"coco-sql: the export ships {len(champion.files)} file(s) ({', '.join(sorted(champion.files))}): "
                  "--out DIR writes them", file=sys.stderr)  # fmt: skip
    for finding in api.export_findings(champion, args.form, db=args.db):  # warned, never refused
        print(f"coco-sql: warning: would not run in Snowflake: {finding.line()}", file=sys.stderr)
    return 0


def cmd_check_deploy(args: argparse.Namespace) -> int:
    from coco_sql import api

    if (args.program is None) != (args.task is None):
        raise ConfigError("check-deploy takes --program FILE and --task TASK together (or neither: a run)")
    if args.program is not None and args.run is not None:
        raise ConfigError("check-deploy checks either --run ID or --program FILE, not both")
    code = None if args.program is None else read_program(args.program)
    findings = api.check_deploy(args.run, db=args.db, code=code, task=args.task)
    if args.json:
        print(json.dumps([finding.as_dict() for finding in findings]))
    elif not findings:
        print("no findings")
    for finding in [] if args.json else findings:
        print(finding.line())
    return 1 if findings else 0


def cmd_deploy(args: argparse.Namespace) -> int:
    from coco_sql.plugins import deploy_engine

    snowflake = deploy_engine().warehouse_commands()  # the deploy engine's `commands` part
    if not (args.print_script or args.connection or args.zip):
        raise ConfigError("deploy needs --print (the script), --connection NAME (run it) or --zip FILE")
    options = {"stage": args.stage, "schema": args.schema, "task_run": _task_run(args, snowflake)}
    script = snowflake.deploy_script(**options) if args.print_script else None  # checks the names first
    if args.zip:
        print(f"wrote {snowflake.build_package_zip(args.zip)}", file=sys.stderr)
    if script is not None:
        print(script, end="")
    elif args.connection:
        plan = snowflake.deploy(args.connection, **options, progress=progress_line(args))
        print(
            f"deployed coco-sql with {len(plan.setup) + len(plan.objects)} statements; package on @{plan.stage}"
        )
    return 0


def cmd_mirror(args: argparse.Namespace) -> int:
    from coco_sql import api
    from coco_sql.plugins import engine, open_store

    remote = engine(args.source).warehouse_commands()  # --from's engine: its `commands` part
    with remote.store(args.connection, "mirror") as source:
        run_id = api.resolve_run(source, args.run, f"connection {args.connection}")
        with contextlib.closing(open_store(args.db)) as target:
            copied = remote.mirror(source, target, run_id, progress_line(args))
    print(f"mirrored run {copied.run_id} ({copied.task}) into {args.db}: {sum(copied.rows.values()):,} rows")
    return 0


def _task_run(args: argparse.Namespace, snowflake: WarehouseCommands) -> TaskRun | None:
    if args.task_run is None:
        if args.warehouse or args.task_options:
            raise ConfigError("--warehouse and --task-options only make sense with --task-run TASK BUDGET")
        return None
    task, budget = args.task_run
    if not budget.isdigit():
        raise ConfigError(f"--task-run BUDGET must be a whole number of iterations, got {budget!r}")
    if not args.warehouse:
        raise ConfigError("--task-run needs --warehouse: the warehouse the Snowflake task runs on")
    try:
        options = json.loads(args.task_options) if args.task_options else None
    except json.JSONDecodeError as error:
        raise ConfigError(f"--task-options is not JSON: {error}") from None
    if options is not None and not isinstance(options, dict):
        raise ConfigError("--task-options must be a JSON object such as '{\"seed\": 1}'")
    from coco_sql.engine import RunConfig
    from coco_sql.procedures.handlers import split_options

    run_options, _ = split_options(options)
    RunConfig.from_dict({**run_options, "budget": int(budget)})  # what the task would refuse, refused now
    return snowflake.task_run(task, int(budget), args.warehouse, options)


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    from coco_sql import connect

    con = connect(args.db)
    try:
        cursor = con.execute(args.statement)
        columns = [d[0] for d in cursor.description or ()]
        rows = cursor.fetchall() if columns else []
    except duckdb.Error as error:
        raise StoreError(_procedure_message(error)) from None
    finally:
        con.close()
    if args.json:
        print(json.dumps([dict(zip(columns, row, strict=True)) for row in rows], default=str))
    elif columns:
        print("\t".join(columns))
        for row in rows:
            print("\t".join("" if v is None else str(v) for v in row))
    return 0


def _procedure_message(error: Exception) -> str:
    """DuckDB's message without its wrapping: a procedure's own error is the coco-sql error inside it."""
    text = " ".join(str(error).split())
    marker = "Python exception occurred while executing the UDF: "
    if marker in text:
        text = text.split(marker, 1)[1]
        kind, _, rest = text.partition(": ")
        return rest if kind.isidentifier() and rest else text
    return text
