"""Bind AI function calls to the DuckDB UDFs that `coco_sql.aifuncs` registers in every sandbox.

Cortex's AI functions take strings, arrays, objects and PROMPT() objects in the same argument positions, and
optional trailing arguments. A DuckDB Python UDF has one fixed signature. So, on the DuckDB tree that will run
(after every validator check, on a tree the validator owns):

- each AI call gets its full parameter list (missing optional ones are NULL) and every argument is passed as
  JSON (`to_json(arg)`), which keeps strings, lists and structs apart without guessing types;
- `PROMPT('... {0} ...', a, b)` becomes the object Snowflake's PROMPT returns: {"template": ..., "args": [...]}
  (a literal template with a placeholder that has no argument is refused, as in Snowflake);
- the aggregates AI_AGG and AI_SUMMARIZE_AGG become a scalar UDF over `list(expr)`, so GROUP BY works;
- the Cortex spellings SNOWFLAKE.CORTEX.COMPLETE / CLASSIFY_TEXT / SENTIMENT map to their own UDFs (their
  return shapes differ from the AI_* ones).

Which UDF each SQL name binds to, its parameters and return type come from `coco_sql.aifuncs.catalogue`, which
`aifuncs.duckdb_udfs` registers from too, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sqlglot import exp

from coco_sql.aifuncs.catalogue import BY_NAME, AiFunction, unfilled_placeholder
from coco_sql.errors import CandidateRejected
from coco_sql.sqlcheck.snowflake import function_name, positional_arguments, rewrite_named_arguments

UDFS: Mapping[str, AiFunction] = MappingProxyType(
    {name: function for name, function in BY_NAME.items() if function.udf is not None}
)
"""SQL name as written -> the catalogue entry of the function, for every function bound to a UDF."""


def _dotted(node: exp.Dot) -> str | None:
    if not isinstance(node.expression, exp.Func):
        return None
    parts = [p.name for p in node.this.flatten()] if isinstance(node.this, exp.Dot) else [node.this.name]
    return ".".join([*parts, function_name(node.expression)]).upper()


def _prompt_object(call: exp.Expression) -> exp.Expression:
    """PROMPT's object; a literal template with a placeholder beyond its arguments is refused here, as Snowflake
    refuses it (the UDFs check templates that are not literals)."""
    template, *args = positional_arguments(call)  # type: ignore[arg-type]
    if isinstance(template, exp.Literal) and template.is_string:
        error = unfilled_placeholder(template.this, len(args))
        if error is not None:
            raise CandidateRejected(error)
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


def _arguments(name: str, call: exp.Func) -> list[exp.Expression]:
    """The call's arguments by position. Named arguments of AI_* calls were made positional by the validator
    (`snowflake.rewrite_named_arguments`); those of a dotted Cortex call are placed here, by the same rule."""
    args = positional_arguments(call)
    if "." in name and any(isinstance(a, exp.Kwarg) for a in args):
        args = positional_arguments(rewrite_named_arguments(exp.Anonymous(this=name, expressions=args)))
    return args


def _bind(name: str, call: exp.Func) -> exp.Expression:
    """The UDF call (cast to JSON when it returns JSON text) that replaces an AI call named `name`."""
    function = UDFS[name]
    arity = len(function.params)
    args = _arguments(name, call)
    args += [exp.null()] * (arity - len(args))
    given = {
        param.name
        for param, arg in zip(function.params, args[:arity], strict=True)
        if not isinstance(arg, exp.Null)
    }
    udf = function.udf_for(given)
    if function.aggregate:
        args[0] = exp.Anonymous(this="list", expressions=[args[0]])
    bound: exp.Expression = exp.Anonymous(this=udf.name, expressions=[_as_json(a) for a in args[:arity]])
    if udf.returns.json:
        bound = exp.cast(bound, exp.DataType.build("JSON"))
    return bound


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
        if name in UDFS:
            node.replace(_bind(name, call))
    return tree
