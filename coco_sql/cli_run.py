"""The `coco-sql` commands that run the loop: evolve and resume, with their progress and the summary after a
run. Split from `cli.py`, which adds their parsers in its command order; thin like the rest of the command."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from coco_sql.cli_common import RunProgress, ai_config, next_steps
from coco_sql.cli_help import (
    add_ai_options,
    add_db,
    add_json,
    add_quiet,
    add_run,
    add_spend_options,
    command,
    pack_default,
)
from coco_sql.engine.spend import price_option
from coco_sql.errors import CocoError, ConfigError
from coco_sql.options import RUN_OPTIONS

if TYPE_CHECKING:
    from coco_sql.engine import RunSummary


def add_evolve_parser(commands: argparse._SubParsersAction) -> None:
    evolve = command(
        commands, "evolve", "evolve a task's seed program into a better one",
        "Each iteration picks a parent, changes it, tests the child on training rows, scores it on validation "
        "rows and keeps it if it earns a place. Test rows are scored once, at the end. Every step is a row in "
        "--db; stop it at any time and continue with --resume.",
    )  # fmt: skip
    evolve.add_argument(
        "task", help="task pack name (coco-sql tasks) or directory, or a task registered in --db"
    )
    evolve.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="N",
        help=f"iterations (default: {RUN_OPTIONS.default('budget')})",
    )
    evolve.add_argument(
        "--seed", type=int, default=0, metavar="N", help="the run's seed: same seed, same run"
    )
    add_db(evolve)
    evolve.add_argument("--resume", action="store_true", help="continue the task's latest run in --db")
    evolve.add_argument(
        "--run", type=int, default=None, metavar="ID", help="with --resume: the run to continue (default: the "
        "latest)"
    )  # fmt: skip
    evolve.add_argument(
        "--target", type=float, default=None, metavar="SCORE",
        help="stop once the best validation score reaches this (default: run the whole budget)",
    )  # fmt: skip
    search = evolve.add_argument_group("search")
    search.add_argument(
        "--islands", type=int, default=None, metavar="N", help="MAP-Elites islands " + pack_default("islands")
    )
    search.add_argument(
        "--policy", default=None,
        help="how parents are picked: lp_roster, map_elites, rare_capability, pareto or best "
        + pack_default("policy"),
    )  # fmt: skip
    search.add_argument(
        "--targeting", choices=("infogain", "uniform"), default=None,
        help="how the rows to fix are picked " + pack_default("targeting"),
    )  # fmt: skip
    search.add_argument(
        "--minibatch", type=int, default=None, metavar="ROWS",
        help="work on this many sampled rows per iteration, and score a child on every row only if it gains on "
        "them; 0 is off " + pack_default("minibatch"),
    )  # fmt: skip
    search.add_argument(
        "--primitives", choices=("on", "off"), default=None,
        help="keep a library of reusable parts (PACE) " + pack_default("primitives"),
    )  # fmt: skip
    search.add_argument(
        "--primitive-k", type=int, default=None, metavar="K",
        help="with --primitives on: at most K per program " + pack_default("primitive_k"),
    )  # fmt: skip
    search.add_argument(
        "--admission", choices=("map_elites", "jp"), default=None,
        help="how a child enters the archive: beat its cell, or raise J_p " + pack_default("admission"),
    )  # fmt: skip
    search.add_argument(
        "--champion", choices=("cheapest_within_se", "best"), default=RUN_OPTIONS["champion"].default,
        help="which program wins: the cheapest to deploy within one standard error of the best score, or the best",
    )  # fmt: skip
    search.add_argument(
        "--max-cost", default=None, metavar="LIMIT",
        help="never admit a child whose deploy cost per 1,000 rows is over this: '500 calls', '20000 tokens' or "
        "'$0.05' (dollars need --price; default: no limit)",
    )  # fmt: skip
    mutator = evolve.add_argument_group("mutator")
    mutator.add_argument(
        "--mutator", default=RUN_OPTIONS["mutator"].default,
        help="what proposes changes: offline (no model), agent (a coding agent on --model), gepa_like, "
        "openevolve_like, or prompt_only (SQL: only the AI calls' prompts change, as Snowflake's optimizer does)",
    )  # fmt: skip
    mutator.add_argument(
        "--model", default=None, metavar="MODEL",
        help="the agent's chat model, e.g. openai/gpt-4o-mini (default: none; needed by --mutator agent)",
    )  # fmt: skip
    mutator.add_argument(
        "--mutator-setting", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the mutator, e.g. max_turns=8 or history=false (repeatable; default: none; "
        "CALL coco_help('offline mutator') lists them)",
    )  # fmt: skip
    mutator.add_argument(
        "--max-drafts", type=int, default=None, metavar="N",
        help="drafts the offline mutator tests on training rows per iteration (default: 32)",
    )  # fmt: skip
    mutator.add_argument("--parent-local", action="store_true", help="ablation: the mutator sees no history")
    mutator.add_argument("--no-probe", action="store_true", help="ablation: no live probes or draft tests")
    add_spend_options(evolve)
    add_json(evolve, "end stdout with one JSON line: the run's summary")
    add_quiet(evolve, "no progress lines")
    add_ai_options(evolve)
    evolve.set_defaults(handler=cmd_evolve)


def add_resume_parser(commands: argparse._SubParsersAction) -> None:
    resume = command(
        commands, "resume", "continue a run to a larger --budget or --max-spend",
        "A run that was interrupted, or paused at its spend limit, goes on from its last committed iteration; "
        "the result equals an uninterrupted run's.",
    )  # fmt: skip
    add_db(resume)
    add_run(resume)
    resume.add_argument(
        "--task", default=None, help="task pack name or directory (default: the run's task, found by name)"
    )
    resume.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="N",
        help="a larger number of iterations (default: the run's)",
    )
    add_spend_options(resume)
    add_json(resume, "end stdout with one JSON line: the run's summary")
    add_quiet(resume)
    add_ai_options(resume)
    resume.set_defaults(handler=cmd_resume)


def cmd_evolve(args: argparse.Namespace) -> int:
    from coco_sql import api

    if args.resume:
        return cmd_resume(args)
    if args.run is not None:
        raise ConfigError("--run only makes sense with --resume")
    settings: dict[str, object] = {}
    if args.max_drafts is not None:
        settings["max_drafts"] = args.max_drafts
    if args.no_probe:
        settings["probe"] = False
    if args.model is not None:
        settings["model"] = args.model
    settings.update(setting_option(text) for text in args.mutator_setting)
    options = {
        "seed": args.seed,
        "mutator": args.mutator,
        "mutator_settings": settings,
        "history": not args.parent_local,
        "target": args.target,
        "max_spend": args.max_spend,
        "prices": dict(price_option(price) for price in args.price),
        "max_cost": args.max_cost,
        "champion": args.champion,
    }
    searched = {  # the flags a pack's [run] table may set: given only when the command line sets them
        "islands": args.islands,
        "policy": args.policy,
        "targeting": args.targeting,
        "minibatch": args.minibatch,
        "primitives": None if args.primitives is None else args.primitives == "on",
        "primitive_k": args.primitive_k,
        "admission": args.admission,
    }
    options.update({name: value for name, value in searched.items() if value is not None})
    progress = RunProgress(args.db, args.task, quiet=args.quiet)
    with _mirrored(progress):
        summary = api.evolve(
            args.task,
            db=args.db,
            budget=RUN_OPTIONS.default("budget") if args.budget is None else args.budget,
            options=options,
            ai=ai_config(args),
            progress=progress,
        )
    code = _print_summary(summary, args)
    progress.finished(summary)  # after the last read of the store
    return code


def setting_option(text: str) -> tuple[str, object]:
    """`NAME=VALUE` of --mutator-setting: true/false, integers and decimals become those; the rest is text."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise ConfigError(f"--mutator-setting takes NAME=VALUE, got {text!r}")
    value = value.strip()
    lowered = value.lower()
    if lowered in ("true", "false"):
        return name.strip(), lowered == "true"
    for kind in (int, float):
        try:
            return name.strip(), kind(value)
        except ValueError:
            pass
    return name.strip(), value


def cmd_resume(args: argparse.Namespace) -> int:
    from coco_sql import api

    progress = RunProgress(args.db, quiet=args.quiet)
    with _mirrored(progress):
        summary = api.resume(
            args.run,
            db=args.db,
            task=args.task,
            budget=args.budget,
            max_spend=args.max_spend,
            prices=dict(price_option(price) for price in args.price),
            ai=ai_config(args),
            progress=progress,
        )
    code = _print_summary(summary, args)
    progress.finished(summary)  # after the last read of the store
    return code


def _print_summary(summary: RunSummary, args: argparse.Namespace) -> int:
    from coco_sql import api

    print(
        f"run {summary.run_id}: champion {summary.champion_id}  "
        f"val {summary.seed_val_score:.3f} -> {summary.champion_val_score:.3f}  "
        f"test {_fmt(summary.seed_test_score)} -> {_fmt(summary.champion_test_score)}",
        file=sys.stderr if args.json else sys.stdout,
    )
    out = sys.stderr if args.json else sys.stdout
    if summary.best_id and summary.best_id != summary.champion_id:
        print(
            f"run {summary.run_id}: the best validation score is {summary.best_id}'s, {summary.best_val_score:.4f}; "
            f"the champion is the cheapest program within one standard error of it (the best: --champion best)",
            file=out,
        )
    if summary.stopped:
        print(f"run {summary.run_id} stopped: {summary.stopped}", file=out)
    warnings = api.champion_warnings(summary.run_id, db=args.db)
    for warning in warnings:  # e.g. a champion's SQL over 8 KB
        print(f"warning: {warning}", file=sys.stderr if args.json else sys.stdout)
    print("next: " + "\n      ".join(next_steps(summary, args.db)), file=out)
    if args.json:
        print(json.dumps({**summary.as_dict(), "warnings": warnings}))
    return 0


@contextlib.contextmanager
def _mirrored(progress: RunProgress) -> Iterator[None]:
    """A run that ends in an error (or Ctrl-C) says so in its progress mirror, then the error goes on."""
    progress.starting()
    try:
        yield
    except (CocoError, KeyboardInterrupt) as error:
        progress.failed(error)
        raise


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
