"""The offline mutator's proposal for programs that call AI_CLASSIFY: `ai_edits` and the learned proxy's
(`proxy_edits`: put one in front of the call, step its genes; `head_edits`: give it the centroid head), each
tested on the training rows.

1. read each call's input text on the training rows (`training_views`) and, for choosing diverse few-shot
   examples, their embeddings (one probe, cached by the run's embedding store);
2. score the parent cross-fitted (`cross_fitted`): a training row that a program uses as a few-shot example is
   trivially right in it, so such rows are predicted by a variant that does not hold them; the edits are mined
   from these predictions for the same reason;
3. test up to `max_drafts` edits the same way (the shared loop, `mutate.drafts`) and commit one of the near-best
   by worth (`choice`: gain plus the cost saving): a draw from the injected RNG among the drafts within a row or
   two of the best, so that seeds explore different edit orders (issue 15, part 5);
4. in the first iterations after the first, propose instead a plain head (the linear or the centroid head alone,
   made from the run's seed) that no iteration has proposed yet, unless it is significantly worse on the
   training rows than that pick (`plain_heads`): the champion rule then compares every richer program with them.

Only training rows are read. Everything random comes from the injected RNG.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from sqlglot import exp

from coco_sql.errors import EvaluationError
from coco_sql.evaluate import Outcome
from coco_sql.languages.sql.mutate.ai_edits import (
    ClassifySpec,
    TrainingRow,
    TrainingView,
    ai_edits,
    classify_calls,
    confusions,
    read_spec,
    set_f1,
    set_spec,
)
from coco_sql.languages.sql.mutate.edits import Edit, enclosing_select, scope_probe
from coco_sql.languages.sql.mutate.examples import MAX_EXAMPLES
from coco_sql.languages.sql.mutate.head_edits import OPERATOR as HEAD_OPERATOR
from coco_sql.languages.sql.mutate.head_edits import head_edits
from coco_sql.languages.sql.mutate.plain_heads import (
    due,
    pending,
    plain_head_edits,
    sign_test,
    significantly_worse,
)
from coco_sql.languages.sql.mutate.proxy_edits import (
    PLAIN_OPERATOR,
    gene_edits,
    proxy_edits,
    written_proxy,
)
from coco_sql.mutate.base import MutationRequest, Proposal
from coco_sql.mutate.choice import NearBest
from coco_sql.mutate.drafts import DraftLoop
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.search.label_noise import likely_errors
from coco_sql.sqlkit.ai_arguments import ArgumentError, category_prototypes

# Drafts within 15% of the best gain, or within 1.5 training rows' worth of score (the cross-fitted scores move
# by a row or two between equivalent edits), are drawn among; at most the top 3.
AI_NEAR_BEST = NearBest(relative=0.15, absolute=0.0, top=3)
AI_NEAR_BEST_ROWS = 1.5
# Deploy cost is an objective (issue 15, part 1): a draft's worth is its score gain plus this much per unit of
# relative saving in deploy tokens per row against the parent (halving the cost is worth 0.005, about a
# training row and a half of goemotions). Only a saving counts: a dearer draft is not held back (examples cost
# tokens on every row and give most of the score; `--max-cost` is the user's bound). 0: cost is ignored.
AI_COST_WEIGHT = 0.01
OWN_PROXY = frozenset(
    {"knn_proxy", "linear_head", "tune_proxy", HEAD_OPERATOR, PLAIN_OPERATOR}
)  # edits that write the proxy's CTEs themselves
# Edits that change only what the call is given: nothing to test when the call answers no training row.
CALL_CONFIG_EDITS = frozenset(
    {"few_shot", "prune_examples", "shrink_examples", "describe_label", "output_mode"}
)


@dataclass(frozen=True)
class AiDraft:
    """An edit applied to the parent: the child, and the parent's proxy CTEs it keeps (`render`; None when the
    edit writes its own or there is none)."""

    edit: Edit
    child: exp.Expression
    proxy: exp.With | None = None


@dataclass(frozen=True)
class Worth:
    """What testing an AI draft measured: its (cross-fitted) training outcome, its score gain over the parent's,
    and its worth, the gain plus the cost saving (`AI_COST_WEIGHT`), by which drafts are picked."""

    outcome: Outcome
    gain: float
    worth: float


@dataclass(frozen=True)
class AiPipelineSearch:
    """One AI-pipeline proposal (module docstring). `max_examples` caps the few-shot examples of each call."""

    max_drafts: int = 32
    max_targets: int = 3
    max_examples: int = MAX_EXAMPLES
    cost_weight: float = AI_COST_WEIGHT
    near_best: NearBest = AI_NEAR_BEST
    near_best_rows: float = AI_NEAR_BEST_ROWS

    def propose(
        self,
        request: MutationRequest,
        parent_query: exp.Expression,
        parent_outcome: Outcome,
        targets: Sequence[str],
        strategy: str,
        rng: np.random.Generator,
        root_query: exp.Expression | None = None,
    ) -> Proposal:
        """One child: a near-best draft (module docstring), or, in the first iterations, a plain head made from
        `root_query` (the run's seed: `plain_heads`)."""
        env, context = request.env, request.context
        proxy = written_proxy(request.parent.code, env.dialect)
        views = training_views(parent_query, env, parent_outcome)
        texts = {row.instance_id: row.text for view in views.values() for row in view.rows}
        vectors = embeddings(env, views)
        parent_fit = cross_fitted(parent_query, env, texts, parent_outcome if proxy else None, proxy)
        predicted = {row.instance_id: labels_of(row.output) for row in parent_fit.rows}
        views = {
            index: with_suspects(
                replace(
                    view,
                    rows=tuple(replace(r, predicted=predicted.get(r.instance_id, ())) for r in view.rows),
                    vectors=vectors,
                )
            )
            for index, view in views.items()
        }
        edits = [
            e
            # the proxy first: with the linear head it is offered from the seed on (issue 38), and a small
            # `max_drafts` must not crowd it out
            for e in proxy_edits(parent_query, views, env, is_multi_label(env.output_type), rng)
            + ai_edits(
                parent_query,
                views,
                targets,
                rng=rng,
                multi_label=is_multi_label(env.output_type),
                max_examples=self.max_examples,
            )
            + head_edits(proxy, views, env, is_multi_label(env.output_type))
            + gene_edits(proxy, len(texts), env.dialect, is_multi_label(env.output_type))
            if e.approach not in context.tried
        ]
        if proxy is not None and not answered_by_call(parent_outcome):  # the proxy answers every training row
            edits = [e for e in edits if e.operator not in CALL_CONFIG_EDITS]

        def applied(edit: Edit) -> AiDraft:
            return AiDraft(edit, edit.apply(parent_query), proxy if edit.operator not in OWN_PROXY else None)

        def test(draft: AiDraft, _: str) -> Worth:
            outcome = cross_fitted(draft.child, env, texts, proxy=draft.proxy)
            # The score difference itself (regressions weigh 1): a classifier edit that fixes 40 rows and
            # moves 10 others is progress, unlike a rule that fits the sample by breaking rows.
            gain = outcome.score - parent_fit.score if outcome.ok else float("-inf")
            return Worth(outcome, gain, gain + self._saving(parent_fit, outcome))

        loop: DraftLoop[AiDraft, Worth] = DraftLoop(
            lambda draft: render(draft.child, env, draft.proxy),
            test,
            lambda measured: (measured.worth,),
            skip=[request.parent.code],
        )
        loop.run(map(applied, edits[: self.max_drafts]))
        rows = max(len(parent_fit.rows), 1)
        policy = replace(self.near_best, absolute=max(self.near_best.absolute, self.near_best_rows / rows))
        chosen = loop.pick(rng, policy)
        if chosen is None:
            return Proposal(
                request.parent.code,
                "no applicable AI-pipeline edit",
                strategy,
                exhausted="no applicable AI-pipeline edit",
            )
        code, best = chosen.code, chosen.draft.edit
        outcome, gain, worth = chosen.result.outcome, chosen.result.gain, chosen.result.worth
        forced: dict[str, object] = {}
        if root_query is not None and due(context, request.iteration):
            found = plain_head(root_query, request, parent_outcome, vectors, texts, outcome)
            if found is not None:
                code, best, outcome, forced = found
                gain = outcome.score - parent_fit.score
                worth = gain + self._saving(parent_fit, outcome)
        return Proposal(
            code=code,
            approach=best.approach,
            strategy=strategy,
            notes={
                "targets": list(targets[: self.max_targets]),
                "hypotheses": {"ai_pipeline": len(edits)},
                "drafts_tested": len(loop.trials),
                "parent_train_score": parent_fit.score,
                "child_train_score": outcome.score,
                "net_gain": gain,
                "worth": worth,
                "best_gain": max(trial.result.gain for trial in loop.trials),
                "cross_fitted": True,
                **forced,
            },
        )

    def _saving(self, parent: Outcome, child: Outcome) -> float:
        """`cost_weight` x the child's relative cut in deploy tokens per row against the parent's, from the two
        training outcomes' AI usage; 0 when it costs as much or more, or without a cost to compare."""
        before, after = _tokens_per_row(parent), _tokens_per_row(child)
        if not self.cost_weight or not child.ok or before <= 0:
            return 0.0
        return self.cost_weight * max(0.0, (before - after) / before)


def plain_head(
    root: exp.Expression,
    request: MutationRequest,
    parent_outcome: Outcome,
    vectors: dict[str, np.ndarray],
    texts: dict[str, str],
    draft: Outcome,
) -> tuple[str, Edit, Outcome, dict[str, object]] | None:
    """The first plain head no earlier iteration proposed that is not significantly worse on the training rows
    than `draft`, the search's own pick (`plain_heads`): its code, edit, cross-fitted outcome and a note; None
    when there is none."""
    env = request.env
    names = pending(request.context)
    if not names:
        return None
    views = {
        i: replace(view, vectors=vectors) for i, view in training_views(root, env, parent_outcome).items()
    }
    for name, edit in plain_head_edits(root, views, env, is_multi_label(env.output_type)):
        child = edit.apply(root)
        code = render(child, env)
        if name not in names or code == request.parent.code:
            continue
        outcome = cross_fitted(child, env, texts)
        wins, losses, p = sign_test(outcome, draft)
        if not significantly_worse(outcome, draft):
            note = {"head": name, "draft_wins": wins, "head_wins": losses, "p": round(p, 6)}
            return code, edit, outcome, {"plain_head": note}
    return None


def with_suspects(view: TrainingView) -> TrainingView:
    """`view` with its likely label errors (`search.label_noise`): rows whose neighbours by embedding hold
    another label and none of theirs, and that the parent (cross-fitted) does not solve. They are never offered
    as few-shot examples and never counted when a guard is fitted."""
    rows = [r for r in view.rows if r.text in view.vectors]
    if not rows:
        return view
    vectors = np.stack([np.asarray(view.vectors[r.text], dtype=np.float64) for r in rows])
    unsolved = [set_f1(r.predicted, r.gold) < 1.0 for r in rows]
    flagged = likely_errors([r.gold for r in rows], vectors, unsolved)
    return replace(view, suspects=frozenset(rows[s.index].instance_id for s in flagged))


def answered_by_call(outcome: Outcome) -> int:
    """The rows an AI_CLASSIFY call answered in `outcome` (from the cache or the model)."""
    lines = outcome.usage.lines.items() if outcome.usage is not None else ()
    return sum(line.calls for (function, _), line in lines if "CLASSIFY" in function.upper())


def _tokens_per_row(outcome: Outcome) -> float:
    """What a program's AI calls bill per row: input and output tokens, cache hits included, as the deploy cost
    counts them (`engine.deploy_cost`)."""
    usage = outcome.usage
    if usage is None or not outcome.ids:
        return 0.0
    lines = usage.lines.values()
    spent = sum(
        x.input_tokens + x.cached_input_tokens + x.output_tokens + x.cached_output_tokens for x in lines
    )
    return spent / len(outcome.ids)


def is_multi_label(output_type: str) -> bool:
    """A contract that holds several labels per row (VARCHAR[]): the only kind where output_mode 'multi' fits."""
    return output_type.strip().upper().endswith("[]")


def render(query: exp.Expression, env: DraftEnvironment, proxy: exp.With | None = None) -> str:
    """`query` in the task's dialect; `proxy`: the parent's proxy CTEs as written (`proxy_edits.written_proxy`),
    which replace the query's own."""
    if proxy is not None:
        query = query.copy()
        query.set("with_", proxy.copy())
    return query.sql(dialect=env.dialect, pretty=True)


def embeddings(env: DraftEnvironment, views: dict[int, TrainingView]) -> dict[str, np.ndarray]:
    """Each training input's embedding by the run's embedding model (AI_EMBED with an empty model name is the
    run's configured one), for choosing diverse examples. One probe per call; the run's embedding cache already
    holds these texts, so it costs no model calls. Empty when the engine cannot embed (then examples are drawn
    at random per label)."""
    vectors: dict[str, np.ndarray] = {}
    for view in views.values():
        if not view.scope_sql:
            continue
        try:
            result = env.probe(
                f"SELECT CAST(({view.input_sql}) AS VARCHAR), "
                f"AI_EMBED(to_json(''), to_json(CAST(({view.input_sql}) AS VARCHAR))) FROM ({view.scope_sql}) AS s"
            )
        except EvaluationError:
            continue
        for text, vector in result.rows:
            if text is not None and vector:
                v = np.asarray(vector, dtype=np.float32)
                vectors[str(text)] = v / max(float(np.linalg.norm(v)), 1e-12)
    return vectors


def with_similarities(
    query: exp.Expression, index: int, view: TrainingView, env: DraftEnvironment, labels: int = 2
) -> TrainingView:
    """Probe AI_SIMILARITY(input, '<label: description>') on the training rows for the labels the parent
    misses most, so that a cascade guard's threshold can be tuned on them."""
    spec = read_spec(classify_calls(query)[index])
    if spec is None or not view.scope_sql:
        return view
    try:
        prototypes = dict(zip(*category_prototypes(spec.categories), strict=True))
    except ArgumentError:
        return view
    similarities: dict[str, tuple[str, dict[str, float]]] = {}
    for missed, _, _ in confusions(view.rows)[:labels]:
        text = prototypes.get(missed)
        if text is None or missed in similarities:
            continue
        literal = exp.Literal.string(text).sql(dialect=SANDBOX_DIALECT)
        sql = (
            f"SELECT CAST(id AS VARCHAR), AI_SIMILARITY(to_json(CAST(({view.input_sql}) AS VARCHAR)), "
            f"to_json({literal}), NULL) FROM ({view.scope_sql}) AS s"
        )
        try:
            result = env.probe(sql)
        except EvaluationError:
            continue
        similarities[missed] = (text, {str(i): float(v) for i, v in result.rows if v is not None})
    return replace(view, similarities=similarities)


def cross_fitted(
    query: exp.Expression,
    env: DraftEnvironment,
    texts: dict[str, str],
    full: Outcome | None = None,
    proxy: exp.With | None = None,
) -> Outcome:
    """The program's training outcome, with every row it uses as a few-shot example predicted out of fold.

    Rows whose text is an example are split in two folds by id; for each fold a variant without that
    fold's examples predicts it. Other rows keep the program's own prediction. Three draft tests at most,
    cheap on a warm cache; a program without such examples costs one. `full`: the program's own outcome on
    every training row, when the caller has it; `proxy`: as in `render`."""
    full = full if full is not None else env.test_draft(render(query, env, proxy))
    examples = {
        text for spec in map(read_spec, classify_calls(query)) if spec for text in spec.example_inputs
    }
    covered = sorted(i for i, text in texts.items() if text in examples)
    if not covered or not full.ok:
        return full
    rows = {row.instance_id: row for row in full.rows}
    for fold in (covered[0::2], covered[1::2]):
        held = {texts[i] for i in fold}
        variant = query.copy()
        for call in classify_calls(variant):
            spec = read_spec(call)
            if spec is not None and spec.config.get("examples"):
                kept = [
                    e for e in spec.config["examples"] if not (isinstance(e, dict) and e.get("input") in held)
                ]
                set_spec(call, ClassifySpec(spec.categories, {**spec.config, "examples": kept}))
        outcome = env.test_draft(render(variant, env, proxy))
        by_id = {row.instance_id: row for row in outcome.rows}
        for i in fold:
            if i in by_id:
                rows[i] = by_id[i]
    ordered = tuple(rows[row.instance_id] for row in full.rows)
    return replace(full, rows=ordered, score=sum(r.score for r in ordered) / max(len(ordered), 1))


def training_views(
    query: exp.Expression, env: DraftEnvironment, parent_outcome: Outcome
) -> dict[int, TrainingView]:
    """For each AI_CLASSIFY call: its input text on every training row, with gold and predicted labels."""
    gold = {row.instance_id: labels_of(row.expected) for row in parent_outcome.rows}
    predicted = {row.instance_id: labels_of(row.output) for row in parent_outcome.rows}
    views: dict[int, TrainingView] = {}
    for index, call in enumerate(classify_calls(query)):
        argument = call.this if isinstance(call, exp.AIClassify) else call.expressions[0]
        select = enclosing_select(call)
        scope = scope_probe(query, select) if select is not None else None
        if scope is None:
            continue
        input_sql = argument.sql(dialect=SANDBOX_DIALECT)
        try:
            result = env.probe(
                f"SELECT CAST(id AS VARCHAR), CAST(({input_sql}) AS VARCHAR) FROM ({scope}) AS s"
            )
        except EvaluationError:
            continue
        rows = tuple(
            TrainingRow(str(i), str(text), gold.get(str(i), ()), predicted.get(str(i), ()))
            for i, text in result.rows
            if text is not None and str(i) in gold
        )
        views[index] = TrainingView(rows, input_sql, scope)
    return views


def labels_of(cell: str | None) -> tuple[str, ...]:
    """A row's labels from its JSON output or expected value (a list, or one label)."""
    if cell is None:
        return ()
    try:
        value = json.loads(cell)
    except ValueError:
        return ()
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return () if value is None else (str(value),)


__all__ = [
    "AiDraft",
    "AiPipelineSearch",
    "Worth",
    "cross_fitted",
    "is_multi_label",
    "training_views",
    "with_similarities",
]
