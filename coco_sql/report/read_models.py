"""Read models: the answers to a user's questions about runs, built once from the store's named report queries
(`store.report_sql`) and used by the CLI, the SQL procedures and the HTML report alike.

Each function takes a `Warehouse` and returns plain data (dataclasses, or lists of dicts of JSON-able values).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coco_sql.errors import StoreError
from coco_sql.store import Warehouse


@dataclass(frozen=True)
class Champion:
    run_id: int
    program_id: str
    language: str
    dialect: str
    code: str
    val_score: float


@dataclass(frozen=True)
class CostReport:
    """A run's model spending. `phases`: the AI functions' search (train, val and the mutator's draft tests) and
    report (the test scores of the seed and the champion), and apart from them `mutator`, the mutator's own chat
    models; each with calls, provider calls, cache hits, errors and tokens, and the tokens it would have taken
    without the cache. A phase the run did not spend on is absent. `agents`: the mutator phase by model role
    (agent, reflector, proposer, a baseline's name) and model. `deploy`: what the champion costs per 1,000 rows
    when run for real (no cache), from its own evaluations; None when it makes no AI calls."""

    run_id: int
    phases: dict[str, dict[str, Any]]
    deploy: dict[str, Any] | None
    agents: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "phases": self.phases, "agents": self.agents, "deploy": self.deploy}


def status(store: Warehouse) -> list[dict[str, Any]]:
    """One row per run: run_id, task, seed, budget, status, iterations committed, best validation score."""
    return store.report("run_overview", {})


def champion(store: Warehouse, run_id: int) -> Champion:
    """The valid program with the best validation score (ties: earliest). StoreError when there is none."""
    found = store.champion(run_id)
    if found is None:
        raise StoreError(f"run {run_id} has no valid program")
    program, score = found
    return Champion(run_id, program.program_id, program.language, program.dialect, program.code, score)


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
    found = store.champion(run_id)
    deploy = None
    if found is not None:
        program_id = found[0].program_id
        (usage,) = store.report("deploy_usage", {"program_id": program_id})
        if usage["calls"] is not None and usage["rows"]:
            per = 1000.0 / float(usage["rows"])
            deploy = {
                "program_id": program_id,
                "calls_per_1000_rows": float(usage["calls"]) * per,
                "input_tokens_per_1000_rows": float(usage["input_tokens"]) * per,
                "output_tokens_per_1000_rows": float(usage["output_tokens"]) * per,
            }
    return CostReport(run_id, phases, deploy, agents)


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
