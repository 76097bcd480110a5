"""The `prompt_only` baseline: the search Snowflake's AI-function optimizer makes, in coco-sql's harness.

Snowflake's optimizer (AI_FUNCTION_OPTIMIZATION, `engines.snowflake.aifo`) rewrites the prompt and the model
configuration of a function's one AI call and keeps candidates on a quality/cost frontier; it adds no SQL around
the call and no second call. This mutator searches exactly that space, with the same harness as every other
mutator (the same splits, draft tests on training rows only, the same near-best pick and cost weight, the same
champion rule), so that the two searches are compared on the same task:

- an AI_CLASSIFY call (the packs' seeds): what Cortex builds its prompt from. Few-shot `examples` (targeted
  failures, failing rows, every row of a label it misses, every training row; `max_examples` caps them, 0: no
  cap, as the offline mutator), dropping the examples the others contradict, a diverse subset of many, label
  descriptions mined from the training rows, and `output_mode` for a multi-label task (`ai_edits`; its keyword
  and similarity guards, which put SQL in front of the call, are not tried). AI_CLASSIFY names no model, so
  there is no model to choose. `task_description` is not varied: the embedded model refuses it.
- an AI_COMPLETE call (what the optimizer itself tunes): its model among the configured ones (the spec's
  `optimization.models`, read from the task, and setting `models`), and its prompt: a list of the answers, label descriptions, few-shot
  examples in the prompt, a smaller example set (`prompt_edits`).

Drafts are scored as the AI-pipeline search scores them: cross-fitted, so that no training row used as an
example grades itself (AI_CLASSIFY: a variant without it predicts it; AI_COMPLETE: such rows are left out of both
the parent's and the draft's score). Never learned here, by construction: a guard, a cascade, an embedding proxy
or head, any second AI call. Deterministic given the run's seed (everything random is the injected RNG).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from coco_sql.errors import EvaluationError
from coco_sql.evaluate import Outcome
from coco_sql.languages.sql.aifo import AifoSettings
from coco_sql.languages.sql.mutate.ai_edits import TrainingRow, ai_edits, classify_calls
from coco_sql.languages.sql.mutate.ai_pipeline import (
    AI_COST_WEIGHT,
    AI_NEAR_BEST,
    AI_NEAR_BEST_ROWS,
    AiDraft,
    Worth,
    cross_fitted,
    embeddings,
    is_multi_label,
    labels_of,
    render,
    training_views,
)
from coco_sql.languages.sql.mutate.edits import Edit, enclosing_select, scope_probe
from coco_sql.languages.sql.mutate.prompt_edits import (
    CompleteView,
    complete_calls,
    example_texts,
    one_line,
    prompt_edits,
    row_text_sql,
)
from coco_sql.mutate.base import MutationRequest, Proposal
from coco_sql.mutate.drafts import DraftLoop
from coco_sql.reflect.environment import DraftEnvironment

NAME = "prompt_only"
Scoring = Callable[[exp.Expression, Outcome], float]  # a draft's honest training score (module docstring)
CLASSIFY_PROMPT_EDITS = frozenset(
    {"few_shot", "prune_examples", "shrink_examples", "describe_label", "output_mode"}
)


class PromptOnlyMutator:
    """The `prompt_only` mutator (module docstring)."""

    name = NAME

    def __init__(
        self,
        max_drafts: int = 32,
        max_examples: int = 0,
        models: Sequence[str] = (),
        cost_weight: float = AI_COST_WEIGHT,
    ) -> None:
        self.max_drafts = max_drafts
        self.max_examples = max_examples
        self.models = tuple(dict.fromkeys(models))
        self.cost_weight = cost_weight

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        env = request.env
        try:
            query = sqlglot.parse_one(request.parent.code, read=env.dialect)
        except SqlglotError:
            return Proposal(
                request.parent.code, "parent does not parse", exhausted="the parent does not parse"
            )
        parent = env.test_draft(request.parent.code)
        failing = [r.instance_id for r in parent.rows if r.score < 1.0]
        targets = list(request.context.targets) or [failing[int(i)] for i in rng.permutation(len(failing))]
        if classify_calls(query):
            edits, score = self._classify(query, env, parent, targets, rng)
        elif complete_calls(query):
            if not failing:  # the prompt answers every training row: nothing a rewrite could fix here
                return Proposal(
                    request.parent.code,
                    "no training row to fix",
                    exhausted="the AI_COMPLETE prompt answers every training row",
                )
            spec = AifoSettings.of(env.task.settings)
            models = tuple(dict.fromkeys([*self.models, *(spec.models if spec is not None else ())]))
            edits, score = self._complete(query, env, parent, targets, models, rng)
        else:
            return Proposal(
                request.parent.code, "no AI call to tune", exhausted="no AI_CLASSIFY or AI_COMPLETE call"
            )
        edits = [e for e in edits if e.approach not in request.context.tried]
        parent_score = score(query, parent)

        def test(draft: AiDraft, code: str) -> Worth:
            outcome = env.test_draft(code)
            gain = score(draft.child, outcome) - parent_score if outcome.ok else float("-inf")
            return Worth(outcome, gain, gain + self._saving(parent, outcome))

        loop: DraftLoop[AiDraft, Worth] = DraftLoop(
            lambda draft: render(draft.child, env),
            test,
            lambda measured: (measured.worth,),
            skip=[request.parent.code],
        )
        loop.run(AiDraft(edit, edit.apply(query)) for edit in edits[: self.max_drafts])
        policy = replace(
            AI_NEAR_BEST, absolute=max(AI_NEAR_BEST.absolute, AI_NEAR_BEST_ROWS / max(len(parent.rows), 1))
        )
        chosen = loop.pick(rng, policy)
        if chosen is None:
            return Proposal(
                request.parent.code, "no applicable prompt edit", exhausted="no applicable prompt edit"
            )
        return Proposal(
            code=chosen.code,
            approach=chosen.draft.edit.approach,
            strategy="prompt_only",
            notes={
                "drafts_tested": len(loop.trials),
                "hypotheses": {NAME: len(edits)},
                "net_gain": chosen.result.gain,
                "worth": chosen.result.worth,
                "best_gain": max(trial.result.gain for trial in loop.trials),
                "cross_fitted": True,
            },
        )

    def _classify(
        self,
        query: exp.Expression,
        env: DraftEnvironment,
        parent: Outcome,
        targets: Sequence[str],
        rng: np.random.Generator,
    ) -> tuple[list[Edit], Scoring]:
        """AI_CLASSIFY: `ai_edits`' prompt edits, scored cross-fitted (`ai_pipeline.cross_fitted`)."""
        views = training_views(query, env, parent)
        texts = {row.instance_id: row.text for view in views.values() for row in view.rows}
        vectors = embeddings(env, views)
        fitted = cross_fitted(query, env, texts, parent)
        predicted = {row.instance_id: labels_of(row.output) for row in fitted.rows}
        views = {
            i: replace(
                v,
                rows=tuple(replace(r, predicted=predicted.get(r.instance_id, ())) for r in v.rows),
                vectors=vectors,
            )
            for i, v in views.items()
        }
        multi = is_multi_label(env.output_type)
        edits = [
            e
            for e in ai_edits(
                query, views, targets, rng=rng, multi_label=multi, max_examples=self.max_examples
            )
            if e.operator in CLASSIFY_PROMPT_EDITS
        ]

        def score(tree: exp.Expression, outcome: Outcome) -> float:
            return (fitted if tree is query else cross_fitted(tree, env, texts, outcome)).score

        return edits, score

    def _complete(
        self,
        query: exp.Expression,
        env: DraftEnvironment,
        parent: Outcome,
        targets: Sequence[str],
        models: Sequence[str],
        rng: np.random.Generator,
    ) -> tuple[list[Edit], Scoring]:
        """AI_COMPLETE: `prompt_edits`, each draft scored on the training rows that are no example of it or of
        the parent."""
        views = _complete_views(query, env, parent)
        edits = prompt_edits(query, views, targets, models, rng, self.max_examples)
        texts = {row.instance_id: row.text for view in views.values() for row in view.rows}
        parent_examples = example_texts(query)

        def score(tree: exp.Expression, outcome: Outcome) -> float:
            held = parent_examples | example_texts(tree)
            rows = [r for r in outcome.rows if texts.get(r.instance_id) not in held]
            return sum(r.score for r in rows) / max(len(rows), 1)

        return edits, score

    def _saving(self, parent: Outcome, child: Outcome) -> float:
        """As the AI-pipeline search weighs a cut in deploy tokens per row (`ai_pipeline`)."""
        before, after = _tokens_per_row(parent), _tokens_per_row(child)
        if not self.cost_weight or not child.ok or before <= 0:
            return 0.0
        return self.cost_weight * max(0.0, (before - after) / before)


def _tokens_per_row(outcome: Outcome) -> float:
    usage = outcome.usage
    if usage is None or not outcome.ids:
        return 0.0
    spent = sum(
        x.input_tokens + x.cached_input_tokens + x.output_tokens + x.cached_output_tokens
        for x in usage.lines.values()
    )
    return spent / len(outcome.ids)


def _complete_views(query: exp.Expression, env: DraftEnvironment, parent: Outcome) -> dict[int, CompleteView]:
    """For each AI_COMPLETE call: the text each training row gives its prompt, with gold and predicted labels."""
    gold = {row.instance_id: labels_of(row.expected) for row in parent.rows}
    predicted = {row.instance_id: labels_of(row.output) for row in parent.rows}
    views: dict[int, CompleteView] = {}
    for index, call in enumerate(complete_calls(query)):
        select = enclosing_select(call)
        scope = scope_probe(query, select) if select is not None else None
        text_sql = row_text_sql(call)
        if scope is None or text_sql is None:
            continue
        try:
            result = env.probe(f"SELECT CAST(id AS VARCHAR), {text_sql} FROM ({scope}) AS s")
        except EvaluationError:
            continue
        rows = tuple(
            TrainingRow(str(i), one_line(str(text)), gold.get(str(i), ()), predicted.get(str(i), ()))
            for i, text in result.rows
            if text is not None and str(i) in gold
        )
        views[index] = CompleteView(rows, text_sql, {})
    return views
