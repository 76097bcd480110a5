"""`coco-sql init`: a task from what a user already has.

`coco-sql init dbt PROJECT` makes a task folder from a dbt project as it stands (`languages.dbt.init_task`): its
sources, the models to score and the rows they should give; the command parses, calls the library and prints
the one-screen report.


`coco-sql init aifo SPEC.yaml --db PATH` reads a Snowflake AI_FUNCTION_OPTIMIZATION specification (the YAML of
`CREATE EXPERIMENT ... FROM SPECIFICATION $$ ... $$`) and registers it as a task over a table of the store: the
same call as `CALL coco_task(name, source, {'spec': ...})`, so the CLI and SQL make the same task. Why a command
of its own and not `evolve --spec`: a spec describes a task, not a run. Registered once under a name, the task is
what `evolve`, `eval`, `export` and `report` name, and a second run (another seed, the `prompt_only` baseline)
runs on the same rows, as CREATE EXPERIMENT is one statement and EXECUTE EXPERIMENT another.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from coco_sql.cli_common import read_program
from coco_sql.cli_help import add_db, command, parser_class
from coco_sql.errors import ConfigError
from coco_sql.options import TASK_NAME


def add_parsers(commands: argparse._SubParsersAction) -> None:
    init = command(
        commands, "init", "register a task from another tool's description of it",
        "The task is registered in the store under a name, as `CALL coco_task` registers one; `evolve`, `eval`, "
        "`export` and `report` then name it.",
    )  # fmt: skip
    kinds = init.add_subparsers(
        dest="init_kind",
        required=True,
        metavar="KIND",
        parser_class=parser_class(),
        help="what to read: aifo or dbt",
    )
    aifo = command(
        kinds, "aifo", "a Snowflake AI_FUNCTION_OPTIMIZATION specification (YAML) over a table of the store"
    )
    aifo.add_argument("spec", type=Path, help="the specification's YAML file")
    add_db(aifo, "the DuckDB file that holds the table and the task")
    aifo.add_argument(
        "--source", default=None, metavar="TABLE",
        help="the table (or one SELECT) holding the dataset's rows (default: the last part of dataset.name)",
    )  # fmt: skip
    aifo.add_argument(
        "--name", default=None, help="the task's name (default: the function's, or the dataset's)"
    )
    aifo.add_argument(
        "--function", type=Path, default=None, metavar="FILE",
        help="a file with the CREATE AI FUNCTION statement of the spec's function.function_name (default: none)",
    )  # fmt: skip
    aifo.add_argument(
        "--options", default=None, metavar="JSON",
        help='more coco_task options as JSON, e.g. \'{"id_column": "ticket_id"}\' (default: none)',
    )  # fmt: skip
    aifo.set_defaults(handler=cmd_init_aifo)
    _add_dbt(kinds)


def _add_dbt(kinds: argparse._SubParsersAction) -> None:
    dbt = command(
        kinds, "dbt", "a dbt project as it stands, made into a task folder",
        "Scores the models the expected rows name (or the ones no other model reads), partitions the rows by an "
        "entity, and prints what it found and refused.",
    )  # fmt: skip
    dbt.add_argument("project", type=Path, help="the project folder (dbt_project.yml)")
    dbt.add_argument(
        "--expected", type=Path, metavar="PATH",
        help="the rows the pipeline should give: a golden DuckDB file, or a folder of CSV / Parquet files named "
        "after the models, or one such file (required)",
    )  # fmt: skip
    dbt.add_argument(
        "--data", type=Path, metavar="PATH", help="a DuckDB file holding the sources (default: the profile's)"
    )
    dbt.add_argument(
        "--target", action="append", default=[], metavar="MODEL[:KEY,...]",
        help="a model to score, with its key columns (repeatable; default: the models found in --expected that "
        "no other found model reads; keys from unique tests or the rows)",
    )  # fmt: skip
    dbt.add_argument(
        "--entity",
        metavar="SOURCE.TABLE.COLUMN",
        help="the source column the splits partition (default: found)",
    )
    dbt.add_argument("--name", help="the task's name (default: the project's)")
    dbt.add_argument("--out", type=Path, metavar="DIR", help="the task folder (default: PROJECT/.coco/NAME)")
    dbt.add_argument("--force", action="store_true", help="replace a task made there before")
    dbt.add_argument("--no-score", action="store_true", help="do not score the seed (no dbt run)")
    dbt.set_defaults(handler=cmd_init_dbt)


def cmd_init_dbt(args: argparse.Namespace) -> int:
    from coco_sql.languages.dbt.init_task import InitOptions, init_dbt

    report = init_dbt(
        InitOptions(
            project=args.project,
            out=args.out,
            expected=args.expected,
            data=args.data,
            targets=tuple(args.target),
            entity=args.entity,
            name=args.name,
            force=args.force,
            score=not args.no_score,
        )
    )
    for line in report.lines:
        print(line)
    for line in report.refused:
        print(f"refused: {line}")
    where = args.project if args.out is None else report.out
    print(f"next: coco-sql evolve {where} --budget 30 --seed 1")
    return 0


def cmd_init_aifo(args: argparse.Namespace) -> int:
    from coco_sql import api
    from coco_sql.engines.snowflake.aifo import parse_spec

    text = read_program(args.spec)
    spec = parse_spec(text)
    options = json.loads(args.options) if args.options else {}
    if not isinstance(options, dict):
        raise ConfigError(
            '--options is a JSON object of coco_task options, e.g. \'{"id_column": "ticket_id"}\''
        )
    options["spec"] = text
    if args.function is not None:
        options["ai_function"] = read_program(args.function)
    named = spec.signature[0] if spec.signature else spec.dataset
    name = args.name or re.sub(r"\W", "_", named.rsplit(".", 1)[-1])
    if not TASK_NAME.fullmatch(name):
        raise ConfigError(f"--name: {name!r} is not a task name (a letter or _, then letters, digits or _)")
    source = args.source or spec.dataset.rsplit(".", 1)[-1]
    row = api.register_task(name, source, options, db=args.db)
    low, high = spec.iterations
    models = len(spec.models)
    print(
        f"task {row['task']}: {row['rows']} rows of {source} (train {row['train']}, val {row['val']}, "
        f"test {row['test']}), metric {spec.metric}, {models} model(s)"
    )
    print(
        f"budget {spec.budget}: about {low}-{high} proposals per model in Snowflake; the same search here: "
        f"coco-sql evolve {name} --db {args.db} --budget {high * models} --mutator prompt_only; "
        f"coco-sql's own: coco-sql evolve {name} --db {args.db} --budget {high * models}"
    )
    print(
        f"recorded, not used: optimization.reflection_model ({spec.reflection_model}) and strategy "
        f"({spec.strategy}): the offline search calls no model to propose, and its champion is the cheapest "
        "program within one standard error of the best (--champion best: the best whatever it costs)"
    )
    return 0
