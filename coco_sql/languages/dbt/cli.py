"""The dbt kind's own command, `coco-sql init dbt PROJECT`: a task folder made from a dbt project as it stands
(`init_task`): its sources, the models to score and the rows they should give. The command parses, calls the
library and prints the one-screen report.

A plug-in source of `coco-sql init` (`plugin_loader.BUILTIN_INIT_SOURCES`): the CLI adds its parser when it
builds its own, so this module imports only argparse and the CLI's help; the kind loads when the command runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from coco_sql.cli_help import command


def add_parser(kinds: argparse._SubParsersAction) -> None:
    """`init dbt`, added to `coco-sql init`'s sources."""
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
