"""Stage `account`: what a run spends and where its AI rows go.

Who owns which budget (`engine.spend`): a mutator owns its per-mutation budgets; the run owns its spend limit
(`max_spend`), measured from the store's committed `ai_usage` rows after each iteration, and its deploy-cost
limit (`max_cost`), judged per child (`stages.judge`). This stage
- checks, before anything is written, that every model the run is configured to call has a price when a limit is
  in money (`check_start`, `check_resume`);
- stops a run once its spending reaches the limit (`spend_stop`), leaving it 'running' for a resume under a
  larger limit;
- drains the AI runtimes' new cache rows and the drafts' usage into each iteration's batch (`rows`), and saves
  the mutator's cache when a run stops mid-iteration (`save_chat_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coco_sql.engine.config import RunConfig
from coco_sql.engine.deploy_cost import check_cost_prices
from coco_sql.engine.run_state import RunState
from coco_sql.engine.spend import Spend, check_prices
from coco_sql.llm.routing import AiConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.mutate import Mutator
from coco_sql.mutate.base import declared_models
from coco_sql.store import Event, IterationBatch, Warehouse
from coco_sql.store.committer import Committer
from coco_sql.tasks import TaskPack


def run_models(
    config: RunConfig,
    task: TaskPack,
    ai_config: AiConfig | None,
    mutator: Mutator | None,
    *,
    ai_only: bool = False,
) -> list[str]:
    """The models the run is configured to call: the mutator's (its settings' `model` / `*_model`, or the
    `models` a ready-made `mutator` declares; not with `ai_only`) and, for a task with AI functions, theirs."""
    models = [] if ai_only else [*config.model_names(), *declared_models(mutator)]
    if task.uses_ai:
        ai = ai_config or AiConfig.from_environment()
        models += [m for m in (ai.classify_model, ai.completion_model, ai.embedding_model) if m]
    return models


def check_start(
    config: RunConfig, task: TaskPack, ai_config: AiConfig | None, mutator: Mutator | None
) -> None:
    """Before a run's first row: a price for every configured model under a limit in money (both limits)."""
    check_prices(config.spend_limit, config.prices, run_models(config, task, ai_config, mutator))
    check_cost_prices(
        config.cost_limit, config.prices, run_models(config, task, ai_config, mutator, ai_only=True)
    )


def check_resume(
    store: Warehouse, run_id: int, config: RunConfig, task: TaskPack, ai_config: AiConfig | None,
    mutator: Mutator | None,
) -> None:  # fmt: skip
    """Before a resume writes anything: with a spend limit, a price for every configured model and for every
    model that has spent so far."""
    if config.spend_limit is not None:
        check_prices(config.spend_limit, config.prices, run_models(config, task, ai_config, mutator))
        spent(store, run_id).amount(config.spend_limit, config.prices)


def spent(store: Warehouse, run_id: int) -> Spend:
    """What the run has spent so far, from its committed ai_usage rows (every split)."""
    return Spend.from_rows(store.report("run_spend", {"run_id": run_id}))


def ai_rows(ai: AiRuntime | None, program_id: str | None, drafts: Usage | None = None) -> dict[str, Any]:
    """IterationBatch fields for the AI work since the last batch: new cache rows and the drafts' usage.

    The program's own evaluations carry their usage; what else was spent (the mutator's draft tests and
    probes) is `drafts`, taken before those evaluations ran."""
    if ai is None:
        return {}
    responses, embeddings = ai.cache.drain()
    ai.take_spent()  # the evaluations' usage travels with them
    return {
        "ai_cache": tuple(responses),
        "ai_embeddings": tuple(embeddings),
        "drafts_usage": drafts,
        "drafts_program_id": program_id,
    }


@dataclass(frozen=True)
class Account:
    """Stage `account` for one run: its store and committer, the evaluator's AI runtime (`ai`) and the mutator's
    chat runtime (`chat`, None unless the mutator calls models)."""

    store: Warehouse
    committer: Committer
    run_id: int
    config: RunConfig
    ai: AiRuntime | None
    chat: AiRuntime | None

    def spend_stop(self, state: RunState) -> str | None:
        """With a spend limit, after the last committed iteration: None while the run's spending is under the
        limit; once it is reached, the `spend_limit_reached` event is written and the reason the run stops is
        returned. A limit makes each iteration commit before the next one starts, so the check reads every row
        spent so far."""
        limit = self.config.spend_limit
        if limit is None:
            return None
        self.committer.flush()
        spend = spent(self.store, self.run_id)
        amount = spend.amount(limit, self.config.prices)
        if amount < limit.amount:
            return None
        t = state.last_iteration
        event = Event(t, "spend_limit_reached", None, spend.payload(limit, self.config.prices))
        self.committer.submit(IterationBatch(self.run_id, t, events=(event,)))
        self.committer.flush()
        return (
            f"spend limit reached: {limit.show(amount)} of {limit} spent by iteration {t}; "
            "the run is paused (resume it with a larger --max-spend)"
        )

    def rows(self, program_id: str, drafts: Usage | None) -> dict[str, Any]:
        """An iteration's AI rows (`ai_rows`), with the mutator's new cache entries added."""
        rows = ai_rows(self.ai, program_id, drafts)
        if self.chat is not None:
            chat_cache, _ = self.chat.cache.drain()
            rows["ai_cache"] = (*rows.get("ai_cache", ()), *chat_cache)
        return rows

    def save_chat_cache(self) -> None:
        """Write the mutator's new cache entries outside an iteration (the run is stopping mid-iteration)."""
        if self.chat is None:
            return
        responses, _ = self.chat.cache.drain()
        if responses:
            last = self.store.last_iteration(self.run_id)
            self.store.write_iteration(IterationBatch(self.run_id, max(last, 0), ai_cache=tuple(responses)))
