"""Bind AI function calls to the DuckDB UDFs that the local AI functions (`engines.duckdb.ai.udfs`) register in
every sandbox.

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

Which UDF each SQL name binds to, its parameters and return type come from `coco_sql.sqlkit.ai_catalogue`, which
`engines.duckdb.ai.udfs` registers from too, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sqlglot import exp

from coco_sql.errors import CandidateRejected
from coco_sql.sqlkit.ai_catalogue import BY_NAME, AiFunction, unfilled_placeholder
from coco_sql.sqlkit.named_arguments import rewrite_named_arguments
from coco_sql.sqlkit.nodes import function_name, positional_arguments

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


_BY_UDF: Mapping[str, AiFunction] = MappingProxyType(
    {udf.name.upper(): function for function in UDFS.values() for udf in function.udfs}
)


def unbind_ai_calls(tree: exp.Expression) -> exp.Expression:
    """The inverse of `bind_ai_calls`, in place: each bound UDF call (every argument `to_json(...)` or NULL)
    becomes the AI call it was made from, with its arguments as written (no `to_json`, no `list(...)` around an
    aggregate's input, no trailing NULLs), and PROMPT's object becomes PROMPT again. For the mutator's probes
    (DuckDB text that may carry bound calls) run by a warehouse, whose AI functions are Cortex's own. Returns the
    tree."""
    for node in list(tree.walk()):
        if isinstance(node, exp.Cast) and _bound_function(node.this) is not None:
            node.replace(node.this)
    for node in list(tree.walk()):
        function = _bound_function(node)
        if function is None:
            continue
        args = [_unwrapped(a) for a in positional_arguments(node)]  # type: ignore[arg-type]
        if function.aggregate and isinstance(args[0], exp.Anonymous) and args[0].name.lower() == "list":
            args[0] = args[0].expressions[0]
        while len(args) > function.required and isinstance(args[-1], exp.Null):
            args.pop()
        node.replace(exp.Anonymous(this=function.name, expressions=args))
    return tree


def _bound_function(node: exp.Expression) -> AiFunction | None:
    """The AI function of a bound call: a UDF's name, every argument JSON or NULL, one per parameter."""
    if not isinstance(node, exp.Func) or isinstance(node.parent, exp.Dot):
        return None
    function = _BY_UDF.get(function_name(node))
    if function is None:
        return None
    args = positional_arguments(node)
    if len(args) != len(function.params) or not all(_is_json(a) or isinstance(a, exp.Null) for a in args):
        return None
    return function


def _is_json(argument: exp.Expression) -> bool:
    return isinstance(argument, exp.JSONFormat) or (
        isinstance(argument, exp.Anonymous) and argument.name.lower() == "to_json"
    )


def _unwrapped(argument: exp.Expression) -> exp.Expression:
    """A bound argument as written: `to_json(x)` is x, PROMPT's object is PROMPT(template, args...)."""
    if _is_json(argument):
        argument = argument.this if isinstance(argument, exp.JSONFormat) else argument.expressions[0]
    keys = argument.expressions if isinstance(argument, exp.Anonymous) else []
    if (
        argument.name.lower() == "json_object"
        and len(keys) == 4
        and [k.name for k in keys[0::2]] == ["template", "args"]
        and isinstance(keys[3], exp.Anonymous)
        and keys[3].name.lower() == "json_array"
    ):
        return exp.Anonymous(this="PROMPT", expressions=[keys[1], *keys[3].expressions])
    return argument
