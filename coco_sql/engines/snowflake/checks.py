"""Snowflake's own checks of a program (the engine's `checks` part, `sqlkit.checks.DialectChecks`): every call of a
Snowflake-dialect program is a Snowflake function (:mod:`~coco_sql.engines.snowflake.functions`) or an AI function
the task enables, under the name written, with an argument count Snowflake accepts; the program is then
transpiled to the DuckDB tree the sandbox runs (:mod:`~coco_sql.engines.snowflake.transpile`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from coco_sql.engines.snowflake.functions import EMBED_MODELS, SNOWFLAKE_FUNCTIONS, WrittenCalls, rejection
from coco_sql.engines.snowflake.transpile import JSON_EACH, snowflake_to_duckdb
from coco_sql.sqlkit.allowlist import AI_SIGNATURES, EXTERNAL_ACCESS, NON_DETERMINISTIC, rejection_reason
from coco_sql.sqlkit.calls import check_call_arity, is_case_branch, iter_calls
from coco_sql.sqlkit.nodes import positional_arguments
from coco_sql.sqlkit.rejection import reject

if TYPE_CHECKING:
    from coco_sql.sqlkit.checks import ValidationSpec


class SnowflakeChecks:
    """What a Snowflake program is checked and translated with, beside the shared checks (`sqlkit.checks`)."""

    table_functions: tuple[str, ...] = (
        JSON_EACH,
    )  # FLATTEN's translation, the one table function a program has

    def check_written(self, tree: exp.Expression, spec: ValidationSpec, source: str) -> None:
        check_snowflake_functions(tree, spec, source)

    def to_duckdb(self, tree: exp.Expression, json_columns: frozenset[str]) -> exp.Expression:
        return snowflake_to_duckdb(tree, json_columns)


CHECKS = SnowflakeChecks()


def check_snowflake_functions(tree: exp.Expression, spec: ValidationSpec, source: str) -> None:
    """Snowflake dialect: every call is a Snowflake function (:mod:`~coco_sql.engines.snowflake.functions`) or an
    AI function the task enables, under the name written, with an argument count Snowflake accepts. A local name
    is refused with its Snowflake alternative, so the program runs unchanged when deployed."""
    extras = spec.allowed_functions
    written = WrittenCalls(source)
    for name in written.local_names():
        raise reject(rejection(name))
    for node, dotted in iter_calls(tree):
        if dotted is not None:
            continue  # schema-qualified Cortex calls: check_functions rules on them
        if not isinstance(node, exp.Func) or is_case_branch(node):
            continue
        if isinstance(node, exp.Explode) or (isinstance(node.parent, exp.Table) and node.arg_key == "this"):
            continue  # FLATTEN and table functions: check_functions and check_tables rule on them
        name = written.name(node)
        count = written.arity(node)
        if name in NON_DETERMINISTIC or name in EXTERNAL_ACCESS:
            raise reject(f"function {name} is not allowed: {rejection_reason([name])}")
        if name in AI_SIGNATURES:
            if name not in extras:
                raise reject(f"function {name} is not allowed: {rejection_reason([name])}")
            check_call_arity(name, node, count, AI_SIGNATURES[name].arity, spec.dialect)
            _check_embed_model(name, node)
            continue
        function = SNOWFLAKE_FUNCTIONS.get(name)
        if function is None:
            raise reject(rejection(name))
        check_call_arity(name, node, count, function.arity, spec.dialect)


def _check_embed_model(name: str, call: exp.Func) -> None:
    """AI_EMBED names one of Snowflake's embedding models."""
    model = unserved_embed_model(call) if name == "AI_EMBED" else None
    if model is not None:
        raise reject(
            f"AI_EMBED model {model!r} is not a Snowflake embedding model; use one of "
            f"{', '.join(sorted(EMBED_MODELS))} (a run maps it to a local model)"
        )


def unserved_embed_model(call: exp.Func) -> str | None:
    """The model an AI_EMBED call names as a literal when Snowflake does not serve it; None otherwise (a computed
    name is left to the run)."""
    args = positional_arguments(call)
    named = [a.expression for a in args if isinstance(a, exp.Kwarg) and a.this.name.lower() == "model"]
    model = named[0] if named else (args[0] if args and not isinstance(args[0], exp.Kwarg) else None)
    if isinstance(model, exp.Literal) and model.is_string and model.this not in EMBED_MODELS:
        return model.this
    return None
