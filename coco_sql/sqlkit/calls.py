"""The function-call checks: every call a program makes is on the allow-list with a valid arity, and a scalar
expression calls nothing else (an engine adds its own call checks: `sqlkit.checks.DialectChecks`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from coco_sql.sqlkit.allowlist import (
    AI_SIGNATURES,
    BASE_FUNCTIONS,
    TRANSPILED_FUNCTIONS,
    TYPED_ARITY_CHECKED,
    Arity,
    rejection_reason,
)
from coco_sql.sqlkit.nodes import function_name, positional_arguments
from coco_sql.sqlkit.rejection import one_line, reject


class CallRules(Protocol):
    """What the call checks read of a `sqlkit.checks.ValidationSpec`: the task's extra functions, its dialect."""

    @property
    def allowed_functions(self) -> frozenset[str]: ...

    @property
    def dialect(self) -> str: ...


def dotted_name(node: exp.Dot) -> str | None:
    """``SNOWFLAKE.CORTEX.COMPLETE`` for a schema-qualified call, or None when the Dot is not a call."""
    if not isinstance(node.expression, exp.Func):
        return None
    parts = [p.name for p in node.this.flatten()] if isinstance(node.this, exp.Dot) else [node.this.name]
    return ".".join([*parts, function_name(node.expression)]).upper()


def _candidate_names(node: exp.Func) -> list[str]:
    """Names under which a call may be allowed: the written name, else class name and ``sql_names()``."""
    if isinstance(node, exp.Anonymous):
        return [node.name.upper()]
    return [type(node).__name__.upper(), *(n.upper() for n in node.sql_names())]


def _arity_for(name: str, extras: frozenset[str]) -> Arity | None:
    """The arity table entry for an allowed name; None when allowed without a known arity (task extras)."""
    if name in extras and name in AI_SIGNATURES:
        return AI_SIGNATURES[name].arity
    return BASE_FUNCTIONS.get(name)


def is_case_branch(node: exp.Expression) -> bool:
    """``If`` nodes inside CASE are WHEN/THEN branches, not IF() calls: they carry two arguments by design."""
    return isinstance(node, exp.If) and isinstance(node.parent, exp.Case)


def check_call_arity(display: str, call: exp.Expression, count: int, arity: Arity, dialect: str) -> None:
    """Reject a call with the wrong argument count, quoting the call (typed nodes may carry another name)."""
    low, high = arity
    if count < low or (high is not None and count > high):
        expected = f"{low}" if low == high else (f"at least {low}" if high is None else f"{low} to {high}")
        snippet = one_line(call.sql(dialect=dialect), limit=80)
        raise reject(f"function {display} takes {expected} argument(s), got {count}: {snippet}")


_OPERATOR_NODES = (exp.Binary, exp.Unary, exp.Predicate, exp.Connector)
"""Func nodes that are operators (AND, OR, EXISTS, ``->``, ``@>``...): pure, and shaped by the grammar."""


def iter_calls(tree: exp.Expression) -> Iterator[tuple[exp.Expression, str | None]]:
    """Every function call in the tree with its dotted name (for ``schema.fn(...)``) or None."""
    for node in tree.walk():
        if isinstance(node, exp.Dot):
            dotted = dotted_name(node)
            if dotted is not None:
                yield node, dotted
        elif isinstance(node, exp.Func) and not isinstance(node, _OPERATOR_NODES):
            if isinstance(node.parent, exp.Dot) and node.arg_key == "expression":
                continue  # the call part of schema.fn(...), reported with its dotted name above
            yield node, None


def ai_functions_called(source: str, dialect: str) -> list[str]:
    """The AI functions `source` calls (catalogue names, PROMPT included), in the order first met; [] when it
    does not parse (validation then says why). A task registered from rows enables its seed's own AI functions
    with this (issue 26): a seed that calls AI_CLASSIFY means the task is an AI_CLASSIFY task."""
    try:
        statements = [s for s in sqlglot.parse(source, read=dialect) if s is not None]
    except SqlglotError:
        return []
    found: list[str] = []
    for statement in statements:
        for node, dotted in iter_calls(statement):
            names = [dotted] if dotted is not None else _candidate_names(node)  # type: ignore[arg-type]
            name = next((n for n in names if n in AI_SIGNATURES or n == "PROMPT"), None)
            if name is not None and name not in found:
                found.append(name)
    return found


def check_functions(
    tree: exp.Expression,
    spec: CallRules,
    *,
    check_arity: bool,
    flatten_in_from: bool = False,
    dialect_names: bool = False,
    transpiled: bool = False,
) -> None:
    """Every call must be on the allow-list (base + ``spec.allowed_functions``), with a valid arity (check 4).

    Calls in table position (``FROM f(...)``) are left to :func:`check_tables`. ``flatten_in_from`` allows
    Snowflake's FLATTEN (an ``Explode`` node) directly under LATERAL / TABLE(), the only place it is valid;
    its arguments are still checked as they are walked like any other expression. With ``dialect_names`` plain
    calls are left to the engine's own check (`DialectChecks.check_written`: a Snowflake tree is checked against
    Snowflake's names);
    ``transpiled`` (the DuckDB tree of a Snowflake program) also allows ``TRANSPILED_FUNCTIONS``.
    """
    extras = spec.allowed_functions
    for node, dotted in iter_calls(tree):
        if dotted is not None:
            if dotted not in extras:
                raise reject(
                    f"function {dotted} is not allowed: schema-qualified calls are allowed only when the "
                    f"task enables them (enabled: {', '.join(sorted(extras)) or 'none'})"
                )
            call = node.expression
            arity = _arity_for(dotted, extras)
            if check_arity and arity is not None:
                check_call_arity(dotted, node, len(positional_arguments(call)), arity, spec.dialect)
            continue
        if not isinstance(node, exp.Func) or is_case_branch(node):
            continue
        if isinstance(node, exp.Explode) and flatten_in_from:
            if isinstance(node.parent, (exp.Lateral, exp.TableFromRows)):
                continue
            raise reject("FLATTEN is allowed only as a FROM source: LATERAL FLATTEN(INPUT => expr) AS f")
        if isinstance(node.parent, exp.Table) and node.arg_key == "this":
            continue  # a table function in FROM: check_tables rejects it (or accepts our json_each)
        if dialect_names:
            continue
        names = _candidate_names(node)
        known = BASE_FUNCTIONS.keys() | TRANSPILED_FUNCTIONS if transpiled else BASE_FUNCTIONS.keys()
        allowed = next((n for n in names if n in extras or n in known), None)
        display = function_name(node)
        if allowed is None:
            hint = f" (task extras: {', '.join(sorted(extras))})" if extras else ""
            raise reject(f"function {display} is not allowed: {rejection_reason(names)}{hint}")
        if not check_arity:
            continue
        if isinstance(node, exp.Anonymous) or allowed in TYPED_ARITY_CHECKED or allowed in AI_SIGNATURES:
            arity = _arity_for(allowed, extras)
            if arity is not None:
                check_call_arity(display, node, len(positional_arguments(node)), arity, spec.dialect)


def check_scalar_expression(query: exp.Query) -> None:
    """A wrapped bare expression is evaluated once per row, so a top-level aggregate cannot work there."""
    expression = query.selects[1]
    for agg in expression.find_all(exp.AggFunc):
        enclosing = agg.find_ancestor(exp.Window, exp.Select)
        if enclosing is None or enclosing is query:
            raise reject(
                f"aggregate {function_name(agg)} is not allowed in a bare expression (evaluated per row); "
                "write a full query with GROUP BY"
            )
