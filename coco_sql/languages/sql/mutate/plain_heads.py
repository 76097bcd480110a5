"""The plain heads, early in every run (issue 38): the linear head alone and the centroid head alone, each the
whole answer, as children of the run's first iterations, so that the champion rule compares every richer
program with the plain classifiers a user would otherwise deploy.

Why the search needs this. Which genes the proxy's fit (`proxy_fit.fit`) chooses is decided on the training
rows alone, and on a hundred-odd rows the plain heads and the mixed proxies are usually within a few rows of
each other: the fit's first choice is partly noise. The validation rows are an independent sample, and the
champion rule (`engine.champion`: the cheapest program within one standard error of the best validation
score, and among equal costs the best score) only chooses among programs that were evaluated on them. Measured
on dialog_topics, the one-table path's split (122 training rows): the fit chose words + linear head (leave-one-
out 0.926, validation 0.894, test 0.901), the centroid head alone was 0.902 leave-one-out but 0.927 on
validation and 0.917 on test; it was never a child, so the champion (test 0.901) stayed under the centroid.

The rule (`due`, `pending`, `significantly_worse`), for a program that calls AI_CLASSIFY on a text column with
a linear head (`linear_edits.linear_column`):

- a proposal from the second iteration on whose run history is all in view (every earlier iteration in the
  ledger; with the history off the mutator knows no run and nothing is forced) tests the plain heads that no
  earlier iteration proposed, made from the run's seed (`plain_head_edits`: the seed with the head alone
  answering every row, whatever the parent; the same text and SQL from any parent);
- it proposes the first of them, in the fit's order, that is not significantly worse on the training rows
  than the draft the search would have proposed: a one-sided sign test over the rows where the two differ
  (w rows the draft wins, l rows the head wins: significantly worse when P(Binomial(w + l, 1/2) >= w) <= 0.05);
- otherwise the search's own pick stands. Each plain head is thus a child at most once, in the first
  iterations after the first: two iterations of the budget, and none when the heads are plainly worse.

The first iteration stays the search's own pick (the best draft from the seed: at budget 1 that is the
answer). Everything here reads training rows only, and the ledger and iteration number are run state: the same
task and seed give the same children through the CLI and `CALL coco_evolve`, and a resumed run the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb

import numpy as np
from sqlglot import exp

from coco_sql.core.outcome import Outcome
from coco_sql.languages.sql.linear_head import embed_model
from coco_sql.languages.sql.mutate.ai_edits import TrainingView, classify_calls, read_spec
from coco_sql.languages.sql.mutate.edits import Edit
from coco_sql.languages.sql.mutate.linear_edits import linear_column
from coco_sql.languages.sql.mutate.proxy_edits import (
    PLAIN_OPERATOR,
    describe_genes,
    fitted,
    plain_description,
    plan,
    proxy_ctes,
    with_proxy,
)
from coco_sql.languages.sql.mutate.proxy_fit import ProxyGenes, plain_name
from coco_sql.reflect.context import ContextBundle
from coco_sql.reflect.environment import DraftEnvironment

NAMES = ("linear", "centroid")
SIGNIFICANCE = 0.05


def due(context: ContextBundle, iteration: int) -> bool:
    """Whether a proposal at `iteration` may force a plain head: from the second iteration on, with the whole
    run in the ledger (module docstring)."""
    return context.history and iteration >= 2 and len(context.ledger) >= iteration - 1


def proposed(notes: Sequence[str | None]) -> set[str]:
    """The plain heads (`NAMES`) that ledger notes (children's approaches) show as proposed."""
    found = set()
    for note in notes:
        for name in NAMES:
            if note and f"{PLAIN_OPERATOR}: " in note and f"the {name} head alone answers" in note:
                found.add(name)
    return found


def pending(context: ContextBundle) -> list[str]:
    """The plain heads no earlier iteration proposed."""
    done = proposed([note.note for note in context.ledger])
    return [name for name in NAMES if name not in done]


def plain_genes(scored: Sequence[tuple[ProxyGenes, float]]) -> list[tuple[str, ProxyGenes]]:
    """The fit's best genes of each plain head, in the fit's order (best first)."""
    found: dict[str, ProxyGenes] = {}
    for genes, _ in scored:
        name = plain_name(genes)
        if name is not None and name not in found:
            found[name] = genes
    return list(found.items())


def plain_head_edits(
    root: exp.Expression, views: Mapping[int, TrainingView], env: DraftEnvironment, multi_label: bool
) -> list[tuple[str, Edit]]:
    """(name, edit) for each plain head of each AI_CLASSIFY call of `root` (the run's seed) that has a linear
    head: the seed with the head answering every row. The edit ignores the program it is applied to."""
    if "AI_EMBED" not in env.allowed_functions:
        return []
    model = embed_model(env.dialect)
    found: list[tuple[str, Edit]] = []
    for index, view in views.items():
        linear = linear_column(root, index, env)
        where = plan(root, index, env.dialect, 0) if linear is not None else None
        if where is None:
            continue
        for name, genes in plain_genes(fitted(where, view, env, multi_label, linear)):
            ctes = proxy_ctes(where, env.output_column, multi_label, model, genes, linear)
            child = with_proxy(where, ctes, 0.0, env.dialect, [])(root)
            examples = _examples(root, index)
            description = plain_description(index, name, describe_genes(genes), examples)
            found.append((name, Edit(PLAIN_OPERATOR, description, lambda _parent, c=child: c.copy())))
    return found


def _examples(root: exp.Expression, index: int) -> int:
    """How many few-shot examples call `index` of `root` carries."""
    spec = read_spec(classify_calls(root)[index])
    return len((spec.config.get("examples") or []) if spec is not None else [])


def sign_test(head: Outcome, draft: Outcome) -> tuple[int, int, float]:
    """(w, l, p): the rows where `draft` scores higher than `head`, the rows where `head` does, and
    P(Binomial(w + l, 1/2) >= w), over the training rows both scored."""
    theirs = dict(zip(draft.ids, draft.scores.tolist(), strict=True))
    wins = losses = 0
    for instance_id, score in zip(head.ids, head.scores.tolist(), strict=True):
        other = theirs.get(instance_id)
        if other is None or np.isclose(other, score):
            continue
        wins, losses = (wins + 1, losses) if other > score else (wins, losses + 1)
    n = wins + losses
    p = sum(comb(n, k) for k in range(wins, n + 1)) / 2**n if n else 1.0
    return wins, losses, p


def significantly_worse(head: Outcome, draft: Outcome, level: float = SIGNIFICANCE) -> bool:
    """Whether `head` scores significantly below `draft` on the training rows (`sign_test`'s p <= `level`)."""
    return not head.ok or sign_test(head, draft)[2] <= level


__all__ = [
    "NAMES",
    "due",
    "pending",
    "plain_genes",
    "plain_head_edits",
    "proposed",
    "sign_test",
    "significantly_worse",
]
