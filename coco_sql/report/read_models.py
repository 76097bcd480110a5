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
