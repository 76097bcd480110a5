"""The bill of a query's AI calls on a warehouse, counted in the same query with AI_COUNT_TOKENS.

On DuckDB coco-sql's own AI runtime answers every call and accounts it. On Snowflake, Cortex answers them, and
its own usage views report tokens hours later, per query. So the query itself carries its bill: `meter` rewrites
it so that, next to its own columns, it returns per-row counts for each AI call site, and `Metered.usage` sums
them into the `Usage` the DuckDB path records (`engines.duckdb.ai.billing`: per row a call answers, its input and output
tokens; AI_COUNT_TOKENS is the documented source, "Cost considerations for Cortex AI Functions" says which
tokens bill: input and output for functions that generate text, input only for AI_EMBED and AI_SIMILARITY).

What a call site costs, per row it runs on (`meter_rules`):

    AI_CLASSIFY(x, categories, config)  in:  tokens(x) + tokens of each category ('label: description')
                                             + tokens of each example's input and of its labels' JSON
                                        out: tokens of the answer's JSON, {"labels": [...]}
    AI_COMPLETE(model, prompt, ...)     in:  AI_COUNT_TOKENS('ai_complete', model, prompt)  out: of the answer
    AI_EMBED(model, x)                  in:  AI_COUNT_TOKENS('ai_embed', model, x)
    AI_SIMILARITY(a, b[, config])       in:  AI_COUNT_TOKENS('ai_similarity', a, b[, config])
    AI_FILTER(x), AI_SENTIMENT(x, ...)  in:  AI_COUNT_TOKENS(function, x)   (AI_FILTER's out: of its answer)

exactly `billing.bill_classify`'s formula for AI_CLASSIFY, so on the embedded stand-in of local testing (whose
AI_COUNT_TOKENS is e5's tokenizer, as billing's) the totals are the DuckDB path's. A row whose input is NULL
is not a call. Constant parts (categories, examples) are counted once per query in a scalar subquery.

Which rows a call runs on. A call in the projection of the query's outermost SELECT is lifted: that SELECT's
FROM, joins and WHERE move into a derived table that computes `CASE WHEN <guard> THEN <call> END` once per row,
where the guard is what the CASE / IFF arms around the call decide (evaluated in order, as both engines do),
and the SELECT reads the answer from there. So the call runs on exactly the rows it ran on before, once, and
its answer is there to be counted. A call whose guard or arguments use another call's answer (a cascade: a
similarity threshold in front of a classification) is lifted one level later. A call elsewhere (a CTE that
embeds the examples' rows) bills input tokens only (AI_EMBED, AI_SIMILARITY, AI_SENTIMENT): it is counted by
a scalar subquery over the same FROM and WHERE, which must not call an AI function itself (it would run it
twice: Snowflake may inline a CTE at every reference).

What cannot be metered is refused (`Unmetered`, one line), and the query does not run: a call in WHERE, JOIN,
GROUP BY, ORDER BY or an aggregate; a text-generating call outside the outermost SELECT; one in a SELECT with
GROUP BY, DISTINCT, LIMIT or `*`; a PROMPT(...) input; the functions without a rule (AI_EXTRACT, AI_AGG,
AI_SUMMARIZE_AGG, AI_TRANSLATE and the SNOWFLAKE.CORTEX spellings). The conservative reading: a call coco-sql
cannot bill is a call it does not make, so --max-spend and --max-cost never miss Cortex spending.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from coco_sql.engines.snowflake.meter_rules import INPUT_ONLY, RULES, Rule, Unmetered, literal, tokens
from coco_sql.llm.usage import ProviderCall, Usage
from coco_sql.sqlkit.nodes import function_name, positional_arguments

PREFIX = "__coco_m"
_LIFTED = "__coco_l"
_COLUMN = "__coco_c"
_FREE = frozenset({"AI_COUNT_TOKENS", "PROMPT"})  # not calls to a model
_NOT_LIFTABLE = ("group", "having", "qualify", "distinct", "limit", "offset")

__all__ = ["Metered", "Site", "Unmetered", "meter"]


@dataclass(frozen=True)
class Site:
    """One AI call of the query and the result columns that carry its bill (`<key>_n`, `_i`, `_o`, `_c`)."""

    key: str
    function: str
    model: str | None  # its model argument, when it names one as a literal
    lifted: bool  # per-row columns (summed); else one value repeated on every row


@dataclass(frozen=True)
class Metered:
    """The query with its bill's columns appended to its outermost SELECT (`columns`, in order)."""

    query: exp.Query
    sites: tuple[Site, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(f"{s.key}_{part}" for s in self.sites for part in ("n", "i", "o", "c"))

    def usage(self, values: Mapping[str, Sequence[Any]], model_of: Callable[[str, str | None], str]) -> Usage:
        """The bill as the DuckDB path records it: one provider call per (function, model), its rows answered
        and tokens. `values`: each meter column's values over the result's rows; `model_of(function, model)`
        names the model that answered (the engine's)."""
        usage = Usage()
        totals: dict[tuple[str, str], list[int]] = {}
        for site in self.sites:
            column = {part: [_count(v) for v in values.get(f"{site.key}_{part}", ())] for part in "nioc"}
            if site.lifted:
                calls, tokens_in, tokens_out = (sum(column[p]) for p in "nio")
            else:
                calls, tokens_in, tokens_out = (column[p][0] if column[p] else 0 for p in "nio")
            constant = column["c"][0] if column["c"] else 0
            line = totals.setdefault((site.function, model_of(site.function, site.model)), [0, 0, 0])
            line[0] += calls
            line[1] += tokens_in + calls * constant
            line[2] += tokens_out
        for (function, model), (calls, tokens_in, tokens_out) in totals.items():
            if calls:
                usage.miss(
                    ProviderCall(function, model, "warehouse", calls, tokens_in, tokens_out, 0.0), calls
                )
        return usage


def meter(query: exp.Query) -> Metered:
    """`query` (Snowflake dialect, owned by the caller: it is changed) with its bill's columns; Unmetered when an
    AI call cannot be billed (module docstring). A query without AI calls comes back unchanged."""
    calls = [node for node in query.walk() if isinstance(node, exp.Func) and _billed(node) is not None]
    if not calls:
        return Metered(query, ())
    if not isinstance(query, exp.Select):
        raise Unmetered("AI calls in a UNION cannot be metered on the warehouse; write one SELECT")
    ai_ctes = _ai_ctes(query)
    top: list[tuple[exp.Func, list[exp.Expression]]] = []
    nested: list[tuple[exp.Func, exp.Select, list[exp.Expression]]] = []
    for call in calls:
        if any(
            isinstance(a, exp.Anonymous) and a.name.upper() == "PROMPT" for a in positional_arguments(call)
        ):
            raise Unmetered(f"{function_name(call)} of a PROMPT(...) cannot be metered; pass the text itself")
        select, guard = _placement(call)
        if select is query:
            top.append((call, guard))
        else:
            nested.append((call, select, guard))
    sites: list[Site] = []
    columns: list[exp.Expression] = []
    for k, (call, select, guard) in enumerate(nested):
        site, made = _counted_site(f"{PREFIX}{k}", call, select, guard, ai_ctes)
        sites.append(site)
        columns += made
    if top:
        lifted = _lift(query, top, len(nested))
        sites += lifted
    query.select(*columns, copy=False)
    return Metered(query, tuple(sites))


# -- where a call is, and when it runs -------------------------------------------------------------------------
def _billed(node: exp.Func) -> str | None:
    """The function's name when `node` is a call Cortex bills; Unmetered for an AI function without a rule."""
    if isinstance(node.parent, exp.Dot) and node.arg_key == "expression":
        dotted = node.parent.sql(dialect="snowflake").upper()
        if dotted.startswith("SNOWFLAKE.CORTEX."):
            raise Unmetered(
                f"{dotted.split('(')[0]} cannot be metered on the warehouse; use the AI_* function"
            )
        return None
    name = function_name(node)
    if name in RULES:
        return name
    if name.startswith("AI_") and name not in _FREE:
        raise Unmetered(f"{name} cannot be metered on the warehouse (no AI_COUNT_TOKENS form bills it)")
    return None


def _placement(call: exp.Func) -> tuple[exp.Select, list[exp.Expression]]:
    """The SELECT whose projection holds `call`, and the conditions under which the call runs there."""
    guard: list[exp.Expression] = []
    node: exp.Expression = call
    while True:
        parent = node.parent
        if parent is None:
            raise Unmetered(f"{function_name(call)} is outside a SELECT's columns and cannot be metered")
        if isinstance(parent, exp.Select):
            if node.arg_key != "expressions":
                raise Unmetered(
                    f"{function_name(call)} in a {node.arg_key.upper()} clause cannot be metered; compute it as "
                    "a column first"
                )
            return parent, guard
        if isinstance(parent, exp.AggFunc | exp.Window | exp.Lambda | exp.Subquery | exp.Query):
            raise Unmetered(f"{function_name(call)} inside {type(parent).__name__} cannot be metered")
        guard[:0] = _arm_conditions(parent, node)
        node = parent


def _arm_conditions(parent: exp.Expression, node: exp.Expression) -> list[exp.Expression]:
    """What must hold for `node`, a child of `parent`, to be evaluated: CASE arms are tried in order."""
    if isinstance(parent, exp.If) and isinstance(parent.parent, exp.Case):  # a WHEN arm of a CASE
        case = parent.parent
        arms = case.args.get("ifs") or []
        before = [_not_true(_arm_test(case, a)) for a in arms[: arms.index(parent)]]
        return [*before, _true(_arm_test(case, parent))] if node.arg_key == "true" else before
    if isinstance(parent, exp.Case) and node.arg_key == "default":
        return [_not_true(_arm_test(parent, a)) for a in parent.args.get("ifs") or []]
    if isinstance(parent, exp.If):  # IFF(condition, then, else)
        if node.arg_key == "true":
            return [_true(parent.this)]
        if node.arg_key == "false":
            return [_not_true(parent.this)]
    return []


def _arm_test(case: exp.Case, arm: exp.If) -> exp.Expression:
    operand = case.this
    return arm.this if operand is None else exp.EQ(this=operand, expression=arm.this)


def _true(condition: exp.Expression) -> exp.Expression:
    return exp.Coalesce(this=exp.paren(condition, copy=False), expressions=[exp.false()])


def _not_true(condition: exp.Expression) -> exp.Expression:
    return exp.Not(this=_true(condition))


def _all(conditions: Sequence[exp.Expression]) -> exp.Expression:
    return exp.and_(*conditions, copy=False) if conditions else exp.true()


# -- calls counted beside the query (input tokens only) ---------------------------------------------------------
def _counted_site(
    key: str, call: exp.Func, select: exp.Select, guard: list[exp.Expression], ai_ctes: set[str]
) -> tuple[Site, list[exp.Expression]]:
    function = function_name(call)
    if function not in INPUT_ONLY:
        raise Unmetered(
            f"{function} outside the outermost SELECT cannot be metered (its answer bills too): call it in the "
            "final SELECT"
        )
    args = positional_arguments(call)
    rule = RULES[function]
    pieces = [
        *args,
        *guard,
        *(select.args.get(k) for k in ("from_", "where")),
        *(select.args.get("joins") or []),
    ]
    if any(p is not None and _uses_ai(p, ai_ctes) for p in pieces):
        raise Unmetered(
            f"{function} in a SELECT that reads another AI call's answer cannot be metered outside the "
            "outermost SELECT"
        )
    runs = _all(
        [_copy(c) for c in guard] + [exp.Is(this=_copy(args[rule.live]), expression=exp.null()).not_()]
    )
    count = exp.Coalesce(this=rule.count([_copy(a) for a in args]), expressions=[exp.Literal.number(0)])

    def total(value: exp.Expression) -> exp.Expression:
        summed = exp.Sum(
            this=exp.Case(ifs=[exp.If(this=runs.copy(), true=value)], default=exp.Literal.number(0))
        )
        scan = exp.Select(expressions=[summed])
        for arg in ("from_", "where", "joins"):
            if select.args.get(arg):
                scan.set(arg, _copy(select.args[arg]))
        return exp.Coalesce(this=exp.Subquery(this=scan), expressions=[exp.Literal.number(0)])

    columns = [
        total(exp.Literal.number(1)).as_(f"{key}_n"),
        total(count).as_(f"{key}_i"),
        exp.Literal.number(0).as_(f"{key}_o"),
        exp.Literal.number(0).as_(f"{key}_c"),
    ]
    return Site(key, function, _model(call, rule), lifted=False), columns


def _ai_ctes(query: exp.Select) -> set[str]:
    """The CTEs (of the outermost WITH) that call an AI function, directly or through another such CTE."""
    with_ = query.args.get("with_")
    found: set[str] = set()
    for cte in with_.expressions if with_ is not None else []:
        if _uses_ai(cte.this, found):
            found.add(cte.alias_or_name.lower())
    return found


def _uses_ai(node: exp.Expression | list[Any], ai_ctes: set[str]) -> bool:
    nodes = node if isinstance(node, list) else [node]
    for item in nodes:
        for inner in item.walk():
            if isinstance(inner, exp.Func) and function_name(inner) in RULES:
                return True
            if isinstance(inner, exp.Table) and inner.name.lower() in ai_ctes:
                return True
    return False


# -- calls lifted out of the outermost SELECT ----------------------------------------------------------------
def _lift(query: exp.Select, top: list[tuple[exp.Func, list[exp.Expression]]], first: int) -> list[Site]:
    """Rewrite `query` in place (module docstring): its FROM, joins and WHERE move into derived tables, one
    level per depth of calls that use other calls' answers, and its columns read their answers."""
    for clause in _NOT_LIFTABLE:
        if query.args.get(clause):
            raise Unmetered(
                f"AI calls in a SELECT with {clause.upper()} cannot be metered; move the call into a CTE"
            )
    if any(isinstance(p, exp.Star) or p.find(exp.Star, exp.Subquery, exp.AggFunc, exp.Window) for p in
           query.expressions):  # fmt: skip
        raise Unmetered("AI calls beside *, a subquery, an aggregate or a window cannot be metered")
    keys = {id(call): f"{PREFIX}{first + k}" for k, (call, _) in enumerate(top)}
    for call, _ in top:
        call.meta["coco_site"] = keys[id(call)]
    order = query.args.get("order")
    sources: dict[tuple[str, str], exp.Column] = {}  # each source column read, as first written
    for column in [
        c for node in [*query.expressions, *([order] if order else [])] for c in node.find_all(exp.Column)
    ]:
        key = (column.table.lower(), column.name)
        sources.setdefault(key, column)
        column.meta["coco_column"] = f"{_COLUMN}{list(sources).index(key)}"
    depth = {id(call): 0 for call, _ in top}
    for _ in top:  # a call's level: one past the deepest call its arguments and guard read
        for call, guard in top:
            inner = [n for part in (*positional_arguments(call), *guard) for n in part.walk()]
            depth[id(call)] = 1 + max([depth[id(n)] for n in inner if id(n) in depth], default=-1)
    levels = max(depth.values()) + 1
    derived = exp.Select(expressions=[c.copy().as_(c.meta["coco_column"]) for c in sources.values()])
    for arg in ("from_", "joins", "where"):
        if query.args.get(arg):
            derived.set(arg, query.args[arg])
            query.set(arg, None)
    sites: list[Site] = []
    for level in range(levels):
        reader = f"{_LIFTED}{level - 1}"  # what `derived` reads at this level (the original FROM at level 0)
        for call, guard in [(c, g) for c, g in top if depth[id(c)] == level]:
            key, function = keys[id(call)], function_name(call)
            rule = RULES[function]
            args = [_read(a, level, reader) for a in positional_arguments(call)]
            runs = _all([_read(c, level, reader) for c in guard])
            live = exp.and_(runs.copy(), exp.Is(this=args[rule.live].copy(), expression=exp.null()).not_())
            count = exp.Coalesce(
                this=rule.count([a.copy() for a in args]), expressions=[exp.Literal.number(0)]
            )
            derived.select(
                exp.Case(ifs=[exp.If(this=runs, true=_read(call, level, reader, inner=True))]).as_(
                    f"{key}_a"
                ),
                _if(live, exp.Literal.number(1)).as_(f"{key}_n"),
                _if(live.copy(), count).as_(f"{key}_i"),
                _constant(rule.constants(args) if rule.constants else []).as_(f"{key}_c"),
                copy=False,
            )
            sites.append(Site(key, function, _model(call, rule), lifted=True))
        if level < levels - 1:
            derived = exp.Select(expressions=[exp.Star()]).from_(derived.subquery(f"{_LIFTED}{level}"))
    reader = f"{_LIFTED}{levels - 1}"
    query.set("from_", exp.From(this=derived.subquery(reader)))
    projections = [_named(_read(p, levels, reader), p) for p in query.expressions]
    for site, (call, _) in zip(sites, sorted(top, key=lambda t: depth[id(t[0])]), strict=True):
        rule = RULES[site.function]
        answer = exp.column(f"{site.key}_a", table=reader)
        args = [_read(a, levels, reader) for a in positional_arguments(call)]
        output = rule.output(answer, args) if rule.output else exp.Literal.number(0)
        projections += [
            exp.column(f"{site.key}_n", table=reader).as_(f"{site.key}_n"),
            exp.column(f"{site.key}_i", table=reader).as_(f"{site.key}_i"),
            exp.Coalesce(this=output, expressions=[exp.Literal.number(0)]).as_(f"{site.key}_o"),
            exp.column(f"{site.key}_c", table=reader).as_(f"{site.key}_c"),
        ]
    query.set("expressions", projections)
    if order:
        query.set("order", _read(order, levels, reader))
    return sites


def _read(node: exp.Expression, level: int, reader: str, inner: bool = False) -> exp.Expression:
    """A copy of `node` reading the lifted table `reader`: source columns by their lifted names, the answers of
    calls lifted at an earlier level from their columns. With `inner`, `node` itself (a call lifted here) is
    kept and only its arguments are rewritten. Level 0 reads the original FROM: the copy is `node` as written."""
    copy = node.copy()
    if level == 0:
        return copy

    def swap(inner_node: exp.Expression) -> exp.Expression:
        site = inner_node.meta.get("coco_site")
        if site is not None and not (inner and inner_node is copy):
            return exp.column(f"{site}_a", table=reader)
        alias = inner_node.meta.get("coco_column") if isinstance(inner_node, exp.Column) else None
        return exp.column(alias, table=reader) if alias is not None else inner_node

    return copy.transform(swap, copy=False)


def _named(rewritten: exp.Expression, original: exp.Expression) -> exp.Expression:
    """`rewritten` under the output name `original` had (a bare column keeps its name, quoting included)."""
    if isinstance(original, exp.Alias) or not isinstance(original, exp.Column):
        return rewritten
    return exp.alias_(rewritten, original.this.copy())


def _copy(node: Any) -> Any:
    return [n.copy() for n in node] if isinstance(node, list) else node.copy()


def _if(condition: exp.Expression, value: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=condition, true=value)], default=exp.Literal.number(0))


def _constant(texts: list[str]) -> exp.Expression:
    """The tokens of `texts`, counted once per query (an uncorrelated scalar subquery), or 0."""
    if not texts:
        return exp.Literal.number(0)
    total: exp.Expression = exp.Literal.number(0)
    for text in texts:
        total = exp.Add(this=total, expression=tokens("ai_classify", exp.Literal.string(text)))
    return exp.Subquery(this=exp.Select(expressions=[total]))


def _model(call: exp.Func, rule: Rule) -> str | None:
    args = positional_arguments(call)
    if rule.model is not None and rule.model < len(args):
        value = literal(args[rule.model])
        return value if isinstance(value, str) else None
    if function_name(call) == "AI_SIMILARITY" and len(args) > 2:
        config = literal(args[2])
        return str(config["model"]) if isinstance(config, dict) and config.get("model") else None
    return None


def _count(value: Any) -> int:
    """A meter cell as an int: NULL (or a NaN from a frame) is 0."""
    try:
        return int(value) if value is not None and value == value else 0
    except (TypeError, ValueError):
        return 0
