"""What the HTML report shows about one run, gathered from the read models (`read_models`) and derived
(`analysis`): plain data for the template (`html.py`) and for the page's charts (one JSON document).

A run the report cannot show in full still gets a page: `Page.notes` says what is missing (no committed
iteration yet, a run that is still going or was interrupted, no valid program, no test scores yet).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from coco_sql.engine.champion import RULE_TEXT, Choice
from coco_sql.engine.deploy_cost import show_cost
from coco_sql.errors import StoreError
from coco_sql.plugins import kind
from coco_sql.report import analysis, data_quality, read_models
from coco_sql.report.highlight import diff, highlight
from coco_sql.report.parts import parts_view
from coco_sql.store import Warehouse

APPROACH_CHARS = 140  # an approach's text in the charts' hover lines (the lineage list shows it whole)
STATUS_LABELS = {"improved": "improved", "neutral": "no change", "regressed": "regressed", "failed": "failed"}


@dataclass
class Page:
    """Everything one report shows. `data` is the charts' JSON; the rest feeds the template."""

    run: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    lineage: list[dict[str, Any]] = field(default_factory=list)
    matrix: dict[str, Any] | None = None
    strategies: dict[str, Any] | None = None
    cost: dict[str, Any] = field(
        default_factory=lambda: {"splits": [], "phases": {}, "agents": [], "deploy": None, "iterations": None}
    )
    confusion: dict[str, Any] | None = None
    code: dict[str, Any] | None = None
    frontier: dict[str, Any] | None = None
    rule: dict[str, Any] | None = None  # the champion rule and what it chose (`_rule`)
    warnings: list[str] = field(default_factory=list)  # about the champion (`read_models.champion_warnings`)
    label_errors: list[dict[str, Any]] = field(default_factory=list)  # `data_quality.label_errors`
    guards: list[dict[str, Any]] = field(default_factory=list)  # `data_quality.guard_support`


def build(store: Warehouse, run_id: int) -> Page:
    """The page of run `run_id` (which must exist: `api.resolve_run`)."""
    run = read_models.run_info(store, run_id)
    page = Page(run=run)
    programs = read_models.programs(store, run_id)
    finished = run["status"] == "finished"
    if not programs:
        page.notes.append(
            f"Run {run_id} has no committed iteration yet: its seed program was never evaluated, so there is "
            "nothing to show. A run that is starting writes its seed first; an interrupted one continues with "
            "`coco-sql resume`."
        )
        return page
    if not finished:
        page.notes.append(_unfinished(store, run))
    by_id = {p["program_id"]: p for p in programs}
    seed = next((p for p in programs if not p["parent_id"]), programs[0])
    try:
        choice = read_models.choice(store, run_id)
        champion = by_id[choice.champion.program_id]
        page.rule = _rule(choice, by_id)
        page.warnings = read_models.champion_warnings(store, run_id)
    except StoreError:  # no valid program
        champion = None
        page.notes.append(
            f"Run {run_id} has no valid program (not even its seed), so there is no champion: the lineage, "
            "confusion matrix and code sections are empty. The programs' errors are in the `programs` table."
        )
    if champion is not None and champion["test_score"] is None:
        page.notes.append(
            "No test scores yet: the seed and the champion are scored on the test rows when the run finishes."
            if not finished
            else f"The champion {champion['program_id']} has no test score (the run's test scores were written "
            "for another program)."
        )
    if champion is not None:
        page.notes += _deploy_notes(champion)
    page.summary = _summary(programs, seed, champion)
    page.data["trajectory"] = _trajectory(programs, seed, champion)
    if champion is not None:
        page.lineage = _lineage(programs, champion)
        page.code = _code(seed, champion)
        page.confusion = analysis.confusion(
            read_models.split_rows(store, run_id, champion["program_id"], "val")
        )
    page.label_errors = data_quality.label_errors(
        store, run_id, None if champion is None else champion["program_id"]
    )
    page.guards = data_quality.guard_support(page.lineage)
    page.matrix = analysis.solve_matrix(programs, read_models.row_scores(store, run_id, "train"))
    if page.matrix is not None:
        page.data["matrix"] = page.matrix
    page.strategies = analysis.strategies(read_models.ledger(store, run_id), finished=finished)
    if page.strategies is not None:
        page.data["ledger"] = {k: v for k, v in page.strategies.items() if k != "table"}
        page.data["ledger"]["labels"] = STATUS_LABELS
    page.cost = _cost(store, run_id)
    if page.cost["iterations"]:
        page.data["cost"] = page.cost["iterations"]
    page.frontier = _frontier(store, run_id, None if champion is None else champion["program_id"])
    if page.frontier is not None:
        page.data["frontier"] = page.frontier["chart"]
    return page


def _rule(choice: Choice, by_id: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The champion rule in words, and what it chose: the best program and the champion, each with its
    validation score and deploy cost (`engine.champion`)."""
    return {
        "name": choice.rule,
        "text": RULE_TEXT[choice.rule],
        "standard_error": choice.standard_error,
        "floor": choice.best.val_score - choice.standard_error,
        "measure": choice.measure,
        "differs": choice.differs,
        "best": {**vars(choice.best), "cost_text": show_cost(choice.best.cost, choice.measure)},
        "champion": {**vars(choice.champion), "cost_text": show_cost(choice.champion.cost, choice.measure)},
        "share": choice.champion.cost / choice.best.cost if choice.best.cost > 0 else None,
        "best_test": by_id[choice.best.program_id]["test_score"],
    }


def _unfinished(store: Warehouse, run: dict[str, Any]) -> str:
    committed = run["last_iteration"]
    paused = [e for e in store.events(run["run_id"], "spend_limit_reached") if e.iteration >= committed]
    why = (
        "it stopped at its spend limit (`coco-sql resume --max-spend` continues it)"
        if paused
        else "it is still going, or was interrupted (`coco-sql resume` continues it)"
    )
    return (
        f"Run {run['run_id']} is not finished: {committed} of {run['budget']} iterations are committed and "
        f"{why}. This report shows what is committed so far."
    )


def _deploy_notes(champion: dict[str, Any]) -> list[str]:
    """A line when a Snowflake-dialect champion would not run in Snowflake (`coco-sql check-deploy` lists why):
    its kind checks the program as written when it deploys as it is (`Exporter.deploy_checked(form 'sql')`)."""
    exporter = kind(champion["language"]).exports
    if exporter is None or not exporter.deploy_checked("sql", champion["dialect"]):
        return []
    where = f"champion {champion['program_id']}"
    findings = exporter.check_deploy(champion["code"], champion["dialect"], None, where)
    if not findings:
        return []
    return [
        f"Not deployable: the champion {champion['program_id']} would not run in Snowflake "
        f"({len(findings)} finding(s), see `coco-sql check-deploy`): "
        + "; ".join(f.what for f in findings[:3])
    ]


def _summary(
    programs: list[dict[str, Any]], seed: dict[str, Any], champion: dict[str, Any] | None
) -> dict[str, Any]:
    valid = [p for p in programs if p["valid"]]
    scores = {p["program_id"]: p["val_score"] if p["valid"] else None for p in programs}
    improved = sum(
        1
        for p in programs
        if scores[p["program_id"]] is not None
        and scores.get(p["parent_id"]) is not None
        and scores[p["program_id"]] > scores[p["parent_id"]]  # type: ignore[operator]
    )
    return {
        "iterations": max(p["iteration"] for p in programs),
        "programs": len(programs),
        "valid": len(valid),
        "invalid": len(programs) - len(valid),
        "improved": improved,
        "seed": seed,
        "champion": champion,
        "champion_iteration": None if champion is None else champion["iteration"],
    }


def _trajectory(
    programs: list[dict[str, Any]], seed: dict[str, Any], champion: dict[str, Any] | None
) -> dict[str, Any]:
    """Columns over the programs, by iteration: each child's validation score (None when invalid), the best so
    far, the test scores that were reported, each program's parent (an index, -1 for none) and the champion's
    lineage (indexes)."""
    index = {p["program_id"]: i for i, p in enumerate(programs)}
    best: list[float | None] = []
    running: float | None = None
    for p in programs:
        if p["valid"] and p["val_score"] is not None:
            running = p["val_score"] if running is None else max(running, p["val_score"])
        best.append(running)
    path = (
        [index[p["program_id"]] for p in analysis.ancestry(programs, champion["program_id"])]
        if champion is not None
        else []
    )
    return {
        "x": [p["iteration"] for p in programs],
        "ids": [p["program_id"] for p in programs],
        "val": [p["val_score"] if p["valid"] else None for p in programs],
        "best": best,
        "test": [p["test_score"] for p in programs],
        "invalid": [0.0 if not p["valid"] else None for p in programs],
        "parent": [index.get(p["parent_id"], -1) if p["parent_id"] else -1 for p in programs],
        "approach": [_short(p["approach"]) for p in programs],
        "strategy": [p["strategy"] or "" for p in programs],
        "lineage": path,
        "seed": index[seed["program_id"]],
        "champion": None if champion is None else index[champion["program_id"]],
    }


def _lineage(programs: list[dict[str, Any]], champion: dict[str, Any]) -> list[dict[str, Any]]:
    """The champion's ancestry from the seed: each step's approach, scores, delta against its parent, how many
    children its parent had, and the diff of its code against its parent."""
    children = Counter(p["parent_id"] for p in programs if p["parent_id"])
    by_id = {p["program_id"]: p for p in programs}
    steps = []
    for program in analysis.ancestry(programs, champion["program_id"]):
        parent = by_id.get(program["parent_id"]) if program["parent_id"] else None
        change = (
            diff(parent["code"], program["code"], program["language"], dialect=program["dialect"],
                 old_as_written=not parent["parent_id"])  # the seed as the analyst wrote it
            if parent
            else None
        )  # fmt: skip
        delta = (
            program["val_score"] - parent["val_score"]
            if parent and program["val_score"] is not None and parent["val_score"] is not None
            else None
        )
        steps.append(
            {
                "program": program,
                "parent": parent,
                "delta": delta,
                "siblings": children[program["parent_id"]] if parent else 0,
                "diff": change,
            }
        )
    return steps


def _code(seed: dict[str, Any], champion: dict[str, Any]) -> dict[str, Any]:
    language = champion["language"]
    return {
        "language": language,
        "dialect": champion["dialect"] if kind(language).dialects else None,
        "champion": highlight(champion["code"].strip("\n"), language),
        "seed": highlight(seed["code"].strip("\n"), language),
        "diff": diff(
            seed["code"],
            champion["code"],
            language,
            context=3,
            dialect=champion["dialect"],
            old_as_written=True,
        ),
        "same": seed["program_id"] == champion["program_id"],
        "parts": parts_view(
            language, seed["code"], champion["code"]
        ),  # a kind of several files: graph, diffs
    }


def _cost(store: Warehouse, run_id: int) -> dict[str, Any]:
    report = read_models.cost(store, run_id)
    splits = read_models.cost_by_split(store, run_id)
    order = {"train": 0, "val": 1, "drafts": 2, "test": 3, "mutator": 4}
    splits.sort(key=lambda row: order.get(row["split"], 9))
    widest = max((row["calls"] for row in splits), default=0) or 1
    for row in splits:
        row["provider_share"] = row["provider_calls"] / widest
        row["cache_share"] = row["cache_hits"] / widest
        row["hit_rate"] = row["cache_hits"] / row["calls"] if row["calls"] else None
    per_iteration = read_models.cost_by_iteration(store, run_id)
    return {
        "splits": splits,
        "phases": report.phases,
        "agents": report.agents,
        "deploy": report.deploy,
        "iterations": {
            "x": [row["iteration"] for row in per_iteration],
            "provider_calls": [row["provider_calls"] for row in per_iteration],
            "cache_hits": [row["cache_hits"] for row in per_iteration],
            "tokens": [row["tokens"] for row in per_iteration],
        }
        if per_iteration
        else None,
    }


def _frontier(store: Warehouse, run_id: int, champion: str | None) -> dict[str, Any] | None:
    """The score/cost frontier (`read_models.cost_frontier`) and its scatter: every fully validated program by
    deploy cost per 1,000 rows (`x`, in the frontier's measure) with its validation score (`val`), the frontier's
    scores (`frontier`, None off it), ids, and the champion's index. None when no program costs anything (no AI
    calls: every program is a point at 0, and the frontier is the champion alone)."""
    candidates = read_models.program_costs(store, run_id)
    if not candidates:
        return None
    frontier = read_models.cost_frontier(store, run_id, programs=candidates)
    prices = read_models.run_prices(store, run_id)
    programs = []
    for program in candidates:
        amount = program["deploy_cost"].amount(frontier.measure, prices)
        if amount is not None:
            programs.append((amount, program["iteration"], program))
    if not any(amount > 0 for amount, _, _ in programs):
        return None
    programs.sort(key=lambda item: item[:2])
    on = {p["program_id"] for p in frontier.points}
    ids = [p["program_id"] for _, _, p in programs]
    return {
        "measure": frontier.measure,
        "programs": frontier.programs,
        "points": frontier.points,
        "champion": next((p for p in frontier.points if p["champion"]), None),
        "chart": {
            "measure": frontier.measure,
            "x": [amount for amount, _, _ in programs],
            "val": [p["val_score"] for _, _, p in programs],
            "frontier": [p["val_score"] if p["program_id"] in on else None for _, _, p in programs],
            "ids": ids,
            "champion": ids.index(champion) if champion in ids else None,
        },
    }


def _short(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= APPROACH_CHARS else text[: APPROACH_CHARS - 1] + "…"
