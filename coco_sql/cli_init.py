"""`coco-sql init`: a task from what a user already has.

`coco-sql init dbt PROJECT` makes a task folder from a dbt project as it stands: the dbt kind's own source of
`init` (`languages/dbt/cli.py`), which the registry names (`plugin_loader.BUILTIN_INIT_SOURCES`; an installed
kind adds its own as an entry point of group `coco_sql.init`).

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
from collections.abc import Sequence
from pathlib import Path

from coco_sql.cli_common import read_program
from coco_sql.cli_help import (
    add_db,
    add_installed_commands,
    add_plugin_commands,
    command,
    command_word,
    parser_class,
)
from coco_sql.errors import ConfigError
from coco_sql.options import TASK_NAME
from coco_sql.plugin_loader import BUILTIN_INIT_SOURCES, INIT_GROUP


def add_parsers(commands: argparse._SubParsersAction, argv: Sequence[str] | None = None) -> None:
    """`init` and its sources: `aifo`, then the kinds' (`BUILTIN_INIT_SOURCES`, and installed ones when the
    command line is `init` with a source none of these is, or is not known: `argv` None)."""
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
    add_plugin_commands(kinds, INIT_GROUP, BUILTIN_INIT_SOURCES)
    if argv is None or command_word(argv) == "init":
        add_installed_commands(kinds, INIT_GROUP, command_word(argv, 1))
    kinds.help = f"what to read: {' or '.join(kinds.choices)}"


def cmd_init_aifo(args: argparse.Namespace) -> int:
    from coco_sql import api
    from coco_sql.plugins import deploy_engine

    text = read_program(args.spec)
    spec = deploy_engine().ai_optimizer().parse_spec(text)  # Snowflake's AI_FUNCTION_OPTIMIZATION document
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
