"""Bind AI function calls to the DuckDB UDFs that `coco_sql.aifuncs` registers in every sandbox.

Cortex's AI functions take strings, arrays, objects and PROMPT() objects in the same argument positions, and
optional trailing arguments. A DuckDB Python UDF has one fixed signature. So, on the DuckDB tree that will run
(after every validator check, on a tree the validator owns):

- each AI call gets its full parameter list (missing optional ones are NULL) and every argument is passed as
  JSON (`to_json(arg)`), which keeps strings, lists and structs apart without guessing types;
- `PROMPT('... {0} ...', a, b)` becomes the object Snowflake's PROMPT returns: {"template": ..., "args": [...]};
- the aggregates AI_AGG and AI_SUMMARIZE_AGG become a scalar UDF over `list(expr)`, so GROUP BY works;
- the Cortex spellings SNOWFLAKE.CORTEX.COMPLETE / CLASSIFY_TEXT / SENTIMENT map to their own UDFs (their
  return shapes differ from the AI_* ones).

Names and arities come from `UDFS`, which `aifuncs.duckdb_udfs` registers from, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sqlglot import exp

from coco_sql.sqlcheck.snowflake import function_name, positional_arguments


@dataclass(frozen=True)
class UdfBinding:
    udf: str  # the DuckDB function `aifuncs.duckdb_udfs` registers
    arity: int  # its fixed parameter count (all JSON)
    aggregate: bool = False  # the first argument is aggregated with list()
    returns_json: bool = False  # the UDF returns JSON text, cast to JSON in SQL


# SQL name as written -> its binding
UDFS: Mapping[str, UdfBinding] = MappingProxyType(
    {
        "AI_COMPLETE": UdfBinding("AI_COMPLETE", 5),
        "AI_CLASSIFY": UdfBinding("AI_CLASSIFY", 3, returns_json=True),
        "AI_FILTER": UdfBinding("AI_FILTER", 2),
        "AI_EXTRACT": UdfBinding("AI_EXTRACT", 2, returns_json=True),
        "AI_SENTIMENT": UdfBinding("AI_SENTIMENT", 2, returns_json=True),
        "AI_SIMILARITY": UdfBinding("AI_SIMILARITY", 3),
        "AI_EMBED": UdfBinding("AI_EMBED", 2),
        "AI_COUNT_TOKENS": UdfBinding("AI_COUNT_TOKENS", 3),
        "AI_AGG": UdfBinding("COCO_AI_AGG", 2, aggregate=True),
        "AI_SUMMARIZE_AGG": UdfBinding("COCO_AI_SUMMARIZE_AGG", 1, aggregate=True),
        "SNOWFLAKE.CORTEX.COMPLETE": UdfBinding("COCO_CORTEX_COMPLETE", 3),
        "SNOWFLAKE.CORTEX.CLASSIFY_TEXT": UdfBinding("COCO_CORTEX_CLASSIFY_TEXT", 3, returns_json=True),
        "SNOWFLAKE.CORTEX.SENTIMENT": UdfBinding("COCO_CORTEX_SENTIMENT", 1),
    }
)
# AI_COMPLETE with a response_format or show_details returns an object, not text.
COMPLETE_JSON = UdfBinding("COCO_AI_COMPLETE_JSON", 5, returns_json=True)


def _dotted(node: exp.Dot) -> str | None:
    if not isinstance(node.expression, exp.Func):
        return None
    parts = [p.name for p in node.this.flatten()] if isinstance(node.this, exp.Dot) else [node.this.name]
    return ".".join([*parts, function_name(node.expression)]).upper()


def _prompt_object(call: exp.Expression) -> exp.Expression:
    template, *args = positional_arguments(call)  # type: ignore[arg-type]
    return exp.Anonymous(
        this="json_object",
        expressions=[
            exp.Literal.string("template"),
            template,
            exp.Literal.string("args"),
            exp.Anonymous(this="json_array", expressions=list(args)),
        ],
    )


def _as_json(argument: exp.Expression) -> exp.Expression:
    if isinstance(argument, exp.Null):
        return argument
    return exp.Anonymous(this="to_json", expressions=[argument])


def bind_ai_calls(tree: exp.Expression) -> exp.Expression:
    """Rewrite the AI calls of `tree` in place (see the module docstring); returns the tree."""
    for node in list(tree.find_all(exp.Anonymous)):
        if node.name.upper() == "PROMPT":
            node.replace(_prompt_object(node))
    for node in list(tree.walk()):
        if isinstance(node, exp.Dot):
            name = _dotted(node)
            call = node.expression
        elif isinstance(node, exp.Func) and not (
            isinstance(node.parent, exp.Dot) and node.arg_key == "expression"
        ):
            name, call = function_name(node), node
        else:
            continue
        if name not in UDFS:
            continue
        binding = UDFS[name]
        args = [a.expression if isinstance(a, exp.Kwarg) else a for a in positional_arguments(call)]
        args += [exp.null()] * (binding.arity - len(args))
        if name == "AI_COMPLETE" and not all(isinstance(a, exp.Null) for a in args[3:]):
            binding = COMPLETE_JSON
        if binding.aggregate:
            args[0] = exp.Anonymous(this="list", expressions=[args[0]])
        bound: exp.Expression = exp.Anonymous(
            this=binding.udf, expressions=[_as_json(a) for a in args[: binding.arity]]
        )
        if binding.returns_json:
            bound = exp.cast(bound, exp.DataType.build("JSON"))
        node.replace(bound)
    return tree
