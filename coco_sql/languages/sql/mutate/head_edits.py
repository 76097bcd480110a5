"""Head edits (issue 26): give a program's proxy the centroid head (`centroid_head`), as a part of its p or as
the whole of it, fitted on the training rows.

A proxy written before heads, or one whose fit kept the head out, would otherwise never get it: `tune_proxy`
steps only the genes of the parts a proxy has. Here the head's share and temperature are fitted leave-one-out
on the training rows around the proxy's own genes (`proxy_fit.head_grid`, in numpy from the same vectors), and
two edits are offered: the best mix (the head as a part of the vote and the words) and the best head alone
(replacing them). Each rewrites the proxy's CTEs from the plan read back from the program (`read_plan`): the
proxy is rewritten only when the SQL written from that plan and its genes is the proxy as it stands, so a
proxy edited by other means is left alone. The mutator then draft-tests the whole program, guards included,
like any other edit; the head's training predictions are leave-one-out by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sqlglot
from sqlglot import exp

from coco_sql.languages.sql.mutate.ai_edits import TrainingView
from coco_sql.languages.sql.mutate.edits import Edit
from coco_sql.languages.sql.mutate.linear_edits import linear_probabilities
from coco_sql.languages.sql.mutate.proxy_edits import prototype_vectors, written_genes
from coco_sql.languages.sql.mutate.proxy_fit import ProxyGenes, head_grid, scorer
from coco_sql.languages.sql.mutate.proxy_sql import ProxyPlan, proxy_ctes
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.sqlkit.literals import to_python

OPERATOR = "centroid_head"


def read_plan(proxy: exp.With, dialect: str) -> tuple[ProxyPlan, str, bool, str] | None:
    """(plan, the label column, multi-label, the embedding model) of a proxy as written, from its `proxy_q`
    (the model and the call's input), `proxy_e` (the label column, and whether it is a list) and `proxy_c`
    (the categories and their prototype texts); None when it has no embeddings or another shape."""
    ctes = {cte.alias_or_name: cte.this for cte in proxy.expressions}
    q, e, c = ctes.get("proxy_q"), ctes.get("proxy_e"), ctes.get("proxy_c")
    embed = q.find(exp.AIEmbed) if q is not None else None
    if embed is None or e is None or c is None or len(embed.expressions) != 2:
        return None
    model, argument = embed.expressions
    labels = next((p.this for p in e.expressions if p.alias_or_name == "labels"), None)
    multi = isinstance(labels, exp.Column)
    if not multi and isinstance(labels, exp.Array | exp.Anonymous):
        items = labels.expressions
        labels = items[0] if len(items) == 1 else None
    values = c.find(exp.Values)
    if not isinstance(model, exp.Literal) or not isinstance(labels, exp.Column) or values is None:
        return None
    try:
        categories = tuple(
            (str(to_python(a)), str(to_python(b))) for a, b in (t.expressions for t in values.expressions)
        )
    except ValueError:
        return None
    plan = ProxyPlan(0, "input", argument.sql(dialect=dialect), categories)
    return plan, labels.name, multi, model.this


def rewritten(
    proxy: exp.With, genes: ProxyGenes, dialect: str
) -> Callable[[exp.Expression], exp.Expression] | None:
    """The edit that writes `proxy` again with `genes` (parts added or dropped as they weigh), or None when the
    proxy is not what its plan and genes write (`read_plan`)."""
    found, now = read_plan(proxy, dialect), written_genes(proxy)
    if found is None or now is None:
        return None
    plan, column, multi, model = found

    def parsed(g: ProxyGenes, stored: str | None) -> exp.With | None:
        try:
            ctes = proxy_ctes(plan, column, multi, model, g, stored)
        except ValueError:  # the linear head needs the stored column
            return None
        return sqlglot.parse_one(f"{ctes} SELECT 1", read=dialect).args["with_"]

    written = proxy.sql(dialect=dialect)
    # the training rows' vectors embedded per query, or read from `example_vectors` for the call's column
    stored = next(
        (
            s
            for s in (None, exp.column(plan.input_sql).name)
            if _sql(parsed(now, s), dialect) == written  # None: that reading cannot write `now`
        ),
        "",
    )
    if stored == "":
        return None
    with_clause = parsed(genes, stored)
    if with_clause is None:
        return None

    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        child.set("with_", with_clause.copy())
        return child

    return apply


def _sql(clause: exp.With | None, dialect: str) -> str | None:
    return None if clause is None else clause.sql(dialect=dialect)


def head_edits(
    proxy: exp.With | None, views: Mapping[int, TrainingView], env: DraftEnvironment, multi_label: bool
) -> list[Edit]:
    """The head's edits for a program whose proxy has no head, or has it as a part (module docstring)."""
    genes = written_genes(proxy) if proxy is not None else None
    found = read_plan(proxy, env.dialect) if proxy is not None else None
    view = next(iter(views.values()), None)
    if proxy is None or genes is None or found is None or view is None or genes.head_weight == 1:
        return []
    plan = found[0]
    labels = [label for label, _ in plan.categories]
    prototypes = prototype_vectors(env, [text for _, text in plan.categories])
    by_linear = None
    if genes.linear_weight > 0:  # the linear head is a part: its out-of-fold p, as the fit had it
        column = exp.column(plan.input_sql).name
        by_linear = linear_probabilities(env, column, view.rows, dict(view.vectors), labels)
        if by_linear is None:
            return []
    score = (
        scorer(view.rows, view.vectors, prototypes, labels, by_linear) if (prototypes is not None) else None
    )
    if score is None:
        return []
    candidates = [g for g in head_grid(genes, multi_label) if genes.head_weight == 0 or g.head_weight == 1]
    edits = []
    for alone in (False, True):
        pool = [g for g in candidates if (g.head_weight == 1) == alone]
        if not pool:
            continue
        best = max(pool, key=score)  # the first of the best
        apply = rewritten(proxy, best, env.dialect)
        if apply is None:
            return []
        what = "alone, in place of the vote and the words" if alone else f"as {best.head_weight:.0%} of p"
        edits.append(
            Edit(
                OPERATOR,
                f"the proxy's centroid head {what} (tau_head {best.tau_head}, ratio {best.ratio}; "
                f"leave-one-out train score {score(best):.3f} against {score(genes):.3f})",
                apply,
            )
        )
    return edits


__all__ = ["OPERATOR", "head_edits", "read_plan", "rewritten"]
