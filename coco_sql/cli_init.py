"""`coco-sql init KIND PATH`: a project as it stands made into a task (for now, kind `dbt`: `languages.dbt.init_task`).

Thin like the rest of the command: parse, call the library, print the one-screen report.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands: argparse._SubParsersAction) -> None:
    init = commands.add_parser("init", help="make a task from a project folder as it stands (dbt)")
    init.add_argument("kind", choices=("dbt",), help="the kind of project (dbt)")
    init.add_argument("project", type=Path, help="the project folder (dbt_project.yml)")
    init.add_argument(
        "--expected",
        type=Path,
        help="the rows the pipeline should give: a golden DuckDB file, or a folder of CSV / Parquet files named "
        "after the models, or one such file",
    )
    init.add_argument("--data", type=Path, help="a DuckDB file holding the sources (default: the profile's)")
    init.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="MODEL[:KEY,...]",
        help="a model to score, with its key columns (default: the models found in --expected that no other "
        "found model reads; keys from unique tests or the rows)",
    )
    init.add_argument("--entity", help="the source column the splits partition: source.table.column")
    init.add_argument("--name", help="the task's name (default: the project's)")
    init.add_argument("--out", type=Path, help="the task folder (default: PROJECT/.coco/NAME)")
    init.add_argument("--force", action="store_true", help="replace a task made there before")
    init.add_argument("--no-score", action="store_true", help="do not score the seed (no dbt run)")
    init.set_defaults(handler=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
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
