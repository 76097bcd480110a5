"""Read models: the answers to a user's questions about runs, built once from the store's named report queries
(`store.report_sql`) and used by the CLI, the SQL procedures and the HTML report alike.

Each function takes a `Warehouse` and returns plain data (dataclasses, or lists of dicts of JSON-able values).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coco_sql.engine.champion import Choice, champion_of
from coco_sql.engine.deploy_cost import USD, cost_measure, parse_max_cost, program_costs, show_cost
from coco_sql.engine.spend import normalise_prices
from coco_sql.errors import ConfigError, StoreError
from coco_sql.plugins import kind
from coco_sql.store import Warehouse


@dataclass(frozen=True)
class Champion:
    """A program a user exports: the run's champion, its best, or the best within a deploy cost."""

    run_id: int
    program_id: str
    language: str
    dialect: str
    code: str
    val_score: float
    files: Mapping[str, str] = field(
        default_factory=dict
    )  # an export's files that ship with `code` (path -> text)


@dataclass(frozen=True)
class CostFrontier:
    """A run's score/cost Pareto frontier: the programs no other program dominates in (validation score higher,
    deploy cost per 1,000 rows lower), cheapest first.

    q dominates p iff cost(q) <= cost(p) and q ranks above p by score, where the ranking is the champion's:
    higher validation score, then the earlier iteration. So a program is on the frontier iff every program that
    ranks above it costs more; scanning by rank, keep each program cheaper than all kept before it. So two
    points may share a score: the later one is cheaper. The champion is on it (it is the cheapest program within
    one standard error of the best, `engine.champion`, so every program that ranks above it costs more; unless
    it is a seed over the run's `max_cost`, beaten by a child as cheap that the limit turned away), and the best
    program within a limit L is the last point whose cost is at most L.

    `measure` is the cost's unit: `usd` when the run's prices cover every model its programs spent tokens on,
    else `tokens` (input + output) when they spent any, else `calls`. The candidates are the valid programs
    evaluated on every validation row (`programs` of them). Each point: program_id, iteration, val_score, cost
    (in `measure`), calls / input and output tokens / usd (None unpriced) per 1,000 rows, champion (bool)."""

    run_id: int
    measure: str
    programs: int
    points: list[dict[str, Any]]

    def best_within(self, limit: float) -> dict[str, Any] | None:
        """The best-scoring program whose cost is at most `limit` (ties: the earliest), or None."""
        within = [p for p in self.points if p["cost"] <= limit]
        return within[-1] if within else None

    def as_dict(self) -> dict[str, Any]:
        return {"measure": self.measure, "programs": self.programs, "points": self.points}


@dataclass(frozen=True)
class CostReport:
    """A run's model spending. `phases`: the AI functions' search (train, val and the mutator's draft tests) and
    report (the test scores of the seed and the champion), and apart from them `mutator`, the mutator's own chat
    models; each with calls, provider calls, cache hits, errors and tokens, and the tokens it would have taken
    without the cache. A phase the run did not spend on is absent. `agents`: the mutator phase by model role
    (agent, reflector, proposer, a baseline's name) and model. `deploy`: what the champion costs per 1,000 rows
    when run for real (no cache): calls and tokens from its validation rows, as for every program (the view
    `deploy_costs`), and US dollars at the run's prices (None unpriced); None when it makes no AI calls.
    `frontier`: the score/cost frontier of the run's programs (`CostFrontier`), None when none was evaluated."""

    run_id: int
    phases: dict[str, dict[str, Any]]
    deploy: dict[str, Any] | None
    agents: list[dict[str, Any]] = field(default_factory=list)
    frontier: CostFrontier | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "phases": self.phases,
            "agents": self.agents,
            "deploy": self.deploy,
            "frontier": None if self.frontier is None else self.frontier.as_dict(),
        }


def status(store: Warehouse) -> list[dict[str, Any]]:
    """One row per run: run_id, task, seed, budget, status, iterations committed, best validation score
    (best_val) and its program (best_id), the champion (`engine.champion`: champion_id, champion_val) and the
    rule that chose it (champion_rule); the champion and best columns are None before a program is scored."""
    rows = store.report("run_overview", {})
    for row in rows:
        choice = champion_of(store, row["run_id"])
        row.update(
            {
                "champion_id": None if choice is None else choice.champion.program_id,
                "champion_val": None if choice is None else choice.champion.val_score,
                "best_id": None if choice is None else choice.best.program_id,
                "champion_rule": None if choice is None else choice.rule,
            }
        )
    return rows


def choice(store: Warehouse, run_id: int, rule: str | None = None) -> Choice:
    """The champion rule's choice for run `run_id` (`engine.champion.champion_of`; `rule` overrides the run's).
    StoreError when the run has no valid program."""
    found = champion_of(store, run_id, rule)
    if found is None:
        raise StoreError(f"run {run_id} has no valid program")
    return found


def champion(store: Warehouse, run_id: int, rule: str | None = None) -> Champion:
    """The run's champion by its rule (`engine.champion`; `rule` 'best' gives the unconstrained best). StoreError
    when there is none."""
    chosen = choice(store, run_id, rule).champion
    program = store.program(chosen.program_id)
    return Champion(
        run_id, program.program_id, program.language, program.dialect, program.code, chosen.val_score
    )


def leaderboard(store: Warehouse, run_id: int, n: int = 10) -> list[dict[str, Any]]:
    """The run's best programs by validation score, with train and (once reported) test scores."""
    return store.report("leaderboard", {"run_id": run_id, "n": n})


def lineage(store: Warehouse, program_id: str) -> list[dict[str, Any]]:
    """A program's ancestors, depth 1 = its parent, each with its approach and validation score."""
    return store.report("lineage", {"program_id": program_id})


def row_solvers(
    store: Warehouse, run_id: int, instance_id: str, split: str = "train"
) -> list[dict[str, Any]]:
    """The programs that solve one row (score >= 0.9, the papers' threshold), best first."""
    return store.report("row_solvers", {"run_id": run_id, "split": split, "instance_id": instance_id})


def cost(store: Warehouse, run_id: int) -> CostReport:
    """Run `run_id`'s spending by phase (search, report, mutator), the mutator's by role, and the champion's
    deploy cost (`CostReport`)."""
    phases = {
        row.pop("phase"): {k: 0 if v is None else v for k, v in row.items()}
        for row in store.report("cost_phases", {"run_id": run_id})
    }
    agents = [
        {k: 0 if v is None else v for k, v in row.items()}
        for row in store.report("cost_agents", {"run_id": run_id})
    ]
    programs = program_costs(store, run_id)
    found = champion_of(store, run_id)
    champion_id = None if found is None else found.champion.program_id
    deploy = None
    for program in programs:
        cost = program["deploy_cost"]
        if program["program_id"] == champion_id and cost.calls + cost.tokens > 0:
            deploy = {
                "program_id": champion_id,
                "calls_per_1000_rows": cost.calls,
                "input_tokens_per_1000_rows": cost.input_tokens,
                "output_tokens_per_1000_rows": cost.output_tokens,
                "usd_per_1000_rows": cost.usd(run_prices(store, run_id)),
            }
    frontier = cost_frontier(store, run_id, programs=programs) if programs else None
    return CostReport(run_id, phases, deploy, agents, frontier)


def run_prices(store: Warehouse, run_id: int) -> dict[str, tuple[float, float]]:
    """The run's prices (`RunConfig.prices`): model -> USD per 1M input and output tokens."""
    return normalise_prices(store.get_run(run_id).config.get("prices"))


def cost_frontier(
    store: Warehouse,
    run_id: int,
    measure: str | None = None,
    *,
    programs: list[dict[str, Any]] | None = None,
) -> CostFrontier:
    """The run's score/cost Pareto frontier (`CostFrontier`) over `programs` (default: `program_costs`), in
    `measure` (usd | tokens | calls; by default the run's `max_cost` unit if it has one, else the first of usd,
    tokens, calls its programs allow). ConfigError for dollars when a model that spent tokens has no price."""
    prices = run_prices(store, run_id)
    programs = program_costs(store, run_id) if programs is None else programs
    costs = [p["deploy_cost"] for p in programs]
    if measure is None:
        limit = store.get_run(run_id).config.get("max_cost")
        measure = cost_measure(costs, prices, None if limit is None else parse_max_cost(limit).unit)
    elif measure == USD:
        unpriced = sorted({m for c in costs for m in c.unpriced(prices)})
        if unpriced:
            raise ConfigError(
                f"run {run_id}'s programs spent tokens on {', '.join(map(repr, unpriced))}, which the run has no "
                "price for: give the cost in calls or tokens"
            )
    found = champion_of(store, run_id)
    champion_id = None if found is None else found.champion.program_id
    kept: list[dict[str, Any]] = []
    cheapest = math.inf
    for program in sorted(programs, key=lambda p: (-p["val_score"], p["iteration"])):
        cost = program["deploy_cost"]
        amount = cost.amount(measure, prices)
        if amount is not None and amount < cheapest:
            cheapest = amount
            kept.append(
                {
                    "program_id": program["program_id"],
                    "iteration": program["iteration"],
                    "val_score": program["val_score"],
                    "cost": amount,
                    "cost_text": show_cost(amount, measure),
                    **cost.as_dict(prices),
                    "champion": program["program_id"] == champion_id,
                }
            )
    return CostFrontier(run_id, measure, len(programs), kept[::-1])


def best_within(store: Warehouse, run_id: int, max_cost: object) -> Champion:
    """The best program of run `run_id` (validation score; ties: earliest) whose deploy cost per 1,000 rows is
    at most `max_cost` ('500 calls', '20000 tokens', '$0.05': `engine.deploy_cost`): one lookup on the frontier
    in the limit's unit. ConfigError when no program is that cheap, or for dollars the run cannot price."""
    limit = parse_max_cost(max_cost)
    frontier = cost_frontier(store, run_id, limit.unit)
    point = frontier.best_within(limit.amount)
    if point is None:
        cheapest = frontier.points[0] if frontier.points else None
        raise ConfigError(
            f"no program of run {run_id} costs at most {limit} per 1,000 rows"
            + (
                f" (the cheapest, {cheapest['program_id']}, costs {cheapest['cost_text']})"
                if cheapest
                else ""
            )
        )
    program = store.program(point["program_id"])
    return Champion(
        run_id, program.program_id, program.language, program.dialect, program.code, point["val_score"]
    )


def champion_warnings(store: Warehouse, run_id: int) -> list[str]:
    """One-line warnings about run `run_id`'s champion, the program a user would deploy; empty when none: a
    program as good on validation that costs less (possible under the rule 'best', never under the default:
    `engine.champion`), and a program over its kind's `KindPlugin.warn_bytes` (SQL: 8 KB). The CLI prints them after a run, the report
    shows them at the top."""
    program = champion(store, run_id)
    warnings = _cheaper_twin(store, program)
    size, limit = len(program.code.encode("utf-8")), kind(program.language).warn_bytes
    if limit is not None and size > limit:
        warnings.append(
            f"champion {program.program_id} of run {run_id} is {size / 1024:.1f} KB of SQL (over "
            f"{limit // 1024} KB): hard to review and, on a real model, costly per row; check "
            "for inline few-shot examples"
        )
    return warnings


def _cheaper_twin(store: Warehouse, program: Champion) -> list[str]:
    """A warning when a program scores as well as the champion on validation and costs less to deploy: the user
    would ship that one instead."""
    try:
        frontier = cost_frontier(store, program.run_id)
    except (ConfigError, StoreError):
        return []
    best = next((p for p in frontier.points if p["champion"]), None)
    twins = [
        p
        for p in frontier.points
        if best and p["val_score"] >= best["val_score"] and p["cost"] < best["cost"]
    ]
    if best is None or not twins:
        return []
    twin = twins[0]  # cheapest first
    places = 6 if frontier.measure == USD else 1  # as `show_cost` writes it, rounded up: the limit holds it
    limit = show_cost(math.ceil(twin["cost"] * 10**places) / 10**places, frontier.measure)
    return [
        f"program {twin['program_id']} scores as well as champion {program.program_id} on validation "
        f"({twin['val_score']:.4f}) at {twin['cost'] / best['cost']:.0%} of its deploy cost ({limit} against "
        f"{show_cost(best['cost'], frontier.measure)} per 1,000 rows): export it with --max-cost '{limit}'"
    ]


# -- the HTML report's read models (`coco_sql.report.html`) --------------------------------------------------
def run_info(store: Warehouse, run_id: int) -> dict[str, Any]:
    """The run's row (task, seed, budget, status, config, times) and its last committed iteration (-1: none)."""
    run = store.get_run(run_id)
    return {
        "run_id": run.run_id,
        "task": run.task,
        "seed": run.seed,
        "budget": run.budget,
        "status": run.status,
        "config": run.config,
        "created_at": None if run.created_at is None else run.created_at.isoformat(timespec="seconds"),
        "finished_at": None if run.finished_at is None else run.finished_at.isoformat(timespec="seconds"),
        "last_iteration": store.last_iteration(run_id),
    }


def programs(store: Warehouse, run_id: int) -> list[dict[str, Any]]:
    """Every program of the run by iteration: its record's fields (code included) and its validation, training
    and (once reported) test scores; a score is None where that split was not evaluated."""
    scores = {split: store.program_scores(run_id, split) for split in ("val", "train", "test")}
    rows = []
    for program in store.programs(run_id):
        row = {name: getattr(program, name) for name in program.__dataclass_fields__}
        for split, by_program in scores.items():
            found = by_program.get(program.program_id)
            row[f"{split}_score"] = None if found is None else found.score
        rows.append(row)
    return rows


def row_scores(store: Warehouse, run_id: int, split: str = "train") -> dict[str, dict[str, float]]:
    """program_id -> {instance_id: score} on `split`: the solve matrix."""
    return store.row_scores(run_id, split)


def ledger(store: Warehouse, run_id: int) -> list[dict[str, Any]]:
    """The strategy ledger by iteration: strategy, kind (hillclimb | direction), status (improved, neutral,
    regressed, failed), parent and child scores, delta, paradigm and note."""
    return [{name: getattr(e, name) for name in e.__dataclass_fields__} for e in store.ledger(run_id)]


def cost_by_split(store: Warehouse, run_id: int) -> list[dict[str, Any]]:
    """Calls, provider calls, cache hits, errors and tokens (with and without the cache) per split: train, val,
    test, drafts (the mutator's draft tests) and mutator (its own chat models). Empty: no model calls."""
    return [_zeroed(row) for row in store.report("cost_splits", {"run_id": run_id})]


def cost_by_iteration(store: Warehouse, run_id: int) -> list[dict[str, Any]]:
    """Provider calls, cache hits and tokens per iteration (iteration 0: the seed; the last also holds the test
    scores)."""
    return [_zeroed(row) for row in store.report("cost_iterations", {"run_id": run_id})]


def split_rows(store: Warehouse, run_id: int, program_id: str, split: str) -> list[dict[str, Any]]:
    """One program's rows on `split`: instance_id, score, output and expected (JSON text), error."""
    return store.report("split_rows", {"run_id": run_id, "program_id": program_id, "split": split})


def _zeroed(row: dict[str, Any]) -> dict[str, Any]:
    return {k: 0 if v is None else v for k, v in row.items()}
