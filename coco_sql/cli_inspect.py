"""The `coco-sql` commands that read a store: status, cost, report and history. Each imports the API inside it,
so `coco-sql --help` loads none of it (issue 28)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import TYPE_CHECKING

from coco_sql.errors import ConfigError
from coco_sql.reflect.history import CLI_FLAGS, HistoryTools

if TYPE_CHECKING:
    from coco_sql.store.base import Warehouse


def cmd_status(args: argparse.Namespace) -> int:
    from coco_sql import api
    from coco_sql.cli_watch import running_elsewhere, status_from_mirror
    from coco_sql.errors import StoreError

    if running_elsewhere(args.db):  # opening the store now could make the running process's next open fail
        status_from_mirror(args.db)
        return 0
    try:
        runs = api.status(db=args.db)
    except StoreError as error:  # DuckDB's file lock: a run in another process holds the store
        if "Could not set lock" not in str(error):
            raise
        status_from_mirror(args.db)
        return 0
    if not runs:
        print(f"no runs in {args.db}")
        return 0
    print(f"{'run':>4} {'task':<16} {'seed':>5} {'iter':>9} {'best val':>9}  {'champion':<18} status")
    for run in runs:
        iterations = 0 if run["iterations"] is None else int(run["iterations"])
        best = "-" if run["best_val"] is None else f"{run['best_val']:.4f}"
        champion = "-" if run["champion_id"] is None else f"{run['champion_id']} {run['champion_val']:.4f}"
        findings = api.champion_deploy_findings(run["run_id"], db=args.db)
        flag = f"  NOT DEPLOYABLE ({len(findings)} finding(s): coco-sql check-deploy --run {run['run_id']})"
        other = run["best_id"] is not None and run["best_id"] != run["champion_id"]
        print(
            f"{run['run_id']:>4} {run['task']:<16} {run['seed']:>5} {iterations:>4}/{run['budget']:<4} "
            f"{best:>9}  {champion:<18} {run['status']}"
            + (f"  (best: {run['best_id']}; the champion is cheaper, within one SE)" if other else "")
            + (flag if findings else "")
        )
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    from coco_sql import api

    report = api.cost(args.run, db=args.db).as_dict()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if not report["phases"]:
        print(f"run {report['run_id']} made no model calls")
        _print_frontier(report["frontier"])
        return 0
    print(
        f"Model spending of run {report['run_id']}: the AI functions (search, report) and the mutator's own models "
        "(mutator); tokens in/out, 'w/o cache' = had every call gone to a provider"
    )
    print(f"{'phase':<8} {'calls':>9} {'provider':>9} {'cached':>9} {'errors':>7} {'tokens in':>11} "
          f"{'tokens out':>11} {'in w/o cache':>13} {'out w/o cache':>14}")  # fmt: skip
    for phase, p in report["phases"].items():
        print(
            f"{phase:<8} {p['calls']:>9,} {p['provider_calls']:>9,} {p['cache_hits']:>9,} {p['errors']:>7,} "
            f"{p['input_tokens']:>11,} {p['output_tokens']:>11,} {p['input_tokens_without_cache']:>13,} "
            f"{p['output_tokens_without_cache']:>14,}"
        )
    for agent in report["agents"]:
        print(
            f"  mutator {agent['agent']} on {agent['model']}: {agent['provider_calls']:,} model calls "
            f"({agent['cache_hits']:,} cached), {agent['input_tokens']:,} tokens in, "
            f"{agent['output_tokens']:,} out"
        )
    deploy = report["deploy"]
    if deploy:
        print(
            f"deploy: champion {deploy['program_id']} costs {deploy['calls_per_1000_rows']:,.0f} calls, "
            f"{deploy['input_tokens_per_1000_rows']:,.0f} tokens in and {deploy['output_tokens_per_1000_rows']:,.0f} "
            "out per 1,000 rows (no cache, estimated from its validation rows)"
            + ("" if deploy["usd_per_1000_rows"] is None else f": ${deploy['usd_per_1000_rows']:.6f}")
        )
    _print_frontier(report["frontier"])
    return 0


def _print_frontier(frontier: dict | None) -> None:
    """The score/cost frontier of `CostReport.as_dict()`, cheapest first."""
    if not frontier:
        return
    points = frontier["points"]
    print(
        f"score/cost frontier in {frontier['measure']} per 1,000 rows: {len(points)} of {frontier['programs']} "
        "programs are not beaten by a cheaper program with a higher validation score"
    )
    print(
        f"  {'program':<10} {'val':>7} {'cost':>16} {'calls':>10} {'tokens in':>12} {'tokens out':>11} {'usd':>10}"
    )
    for p in points:
        usd = "-" if p["usd_per_1000"] is None else f"{p['usd_per_1000']:.4f}"
        print(
            f"  {p['program_id']:<10} {p['val_score']:>7.4f} {p['cost_text']:>16} {p['calls_per_1000']:>10,.0f} "
            f"{p['input_tokens_per_1000']:>12,.0f} {p['output_tokens_per_1000']:>11,.0f} {usd:>10}"
            + ("  champion" if p["champion"] else "")
        )


def cmd_report(args: argparse.Namespace) -> int:
    from coco_sql import api

    report = api.report(args.run, db=args.db)
    try:
        args.out.write_text(report.html, encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot write {args.out}: {error.strerror}") from None
    for note in report.notes:
        print(f"coco-sql: note: {note}", file=sys.stderr)
    print(
        f"wrote {args.out} ({len(report.html.encode()) / 1024:,.0f} KB): run {report.run_id} of {report.task}"
    )
    return 0


HISTORY_ALIASES = {"primitives": "get_primitives"}  # `coco-sql history primitives --run ID`


def cmd_history(args: argparse.Namespace) -> int:
    from coco_sql.plugins import open_store

    with contextlib.closing(open_store(args.db, read_only=True)) as store:
        run_id = _run_id(store, args)
        options = {name: getattr(args, name) for name in CLI_FLAGS}
        result = HistoryTools(store, run_id).call(
            HISTORY_ALIASES.get(args.tool, args.tool),
            **{name: value for name, value in options.items() if value is not None},
        )
    print(json.dumps(result, indent=2))
    return 0


def _run_id(store: Warehouse, args: argparse.Namespace) -> int:
    """--run, or the newest run in the store; StoreError when there is none or it does not exist."""
    from coco_sql import api

    return api.resolve_run(store, args.run, args.db)
