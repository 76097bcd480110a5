"""Snowflake -> DuckDB transpilation, plus the fix-ups sqlglot 30 lacks.

sqlglot transpiles most Snowflake SQL (IFF, REGEXP_LIKE, ARRAY_CONSTRUCT, QUALIFY, CTEs) correctly. Three
constructs come out wrong or unrunnable, so we rewrite them on the Snowflake AST before generating DuckDB SQL:

(a) ``v:field::string`` becomes ``CAST(v -> '$.field' AS TEXT)``, which keeps the JSON quotes (``"abc"``)
    where Snowflake returns ``abc``. We use ``->>`` (text extraction) instead, and cast that for other types.
(b) ``LATERAL FLATTEN(input => expr) f`` becomes invalid DuckDB (upstream tobymao/sqlglot#5295). We generate
    ``json_each(expr) AS f(...)``; ``f.value`` is then the element as JSON; ``f.value::string`` is unquoted.
(c) named arguments (``AI_COMPLETE(model => 'x', prompt => p)``) do not bind to DuckDB Python UDFs: they are
    made positional by :mod:`coco_sql.sqlkit.named_arguments` (it applies to both dialects).
(d) bracket indexing on a VARIANT (``x['labels'][0]``) becomes ``x['labels'][1]``: sqlglot shifts the index to
    DuckDB's 1-based lists, but the VARIANT is JSON in DuckDB, whose indexes stay 0-based. A bracket chain with an
    object key, or over a value that is JSON (a VARIANT path, PARSE_JSON, an AI function's JSON result, a cast to
    VARIANT, or a CTE column holding one), becomes a VARIANT path ``x -> '$.labels[0]'`` instead.
(e) ``VECTOR(FLOAT, n)`` has no DuckDB type: it becomes ``FLOAT[]``, the type AI_EMBED returns locally.
(f) the calls sqlglot translates wrongly get the translation their entry of
    :mod:`~coco_sql.engines.snowflake.functions` gives (ARRAY_SIZE, ARRAY_CONTAINS, ARRAY_TO_STRING, GET, the
    VECTOR_* functions).

Each rewrite depends only on the tree it is given (it mutates and returns that tree, which the caller owns).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, traverse_scope

from coco_sql.engines.snowflake.functions import REWRITES, json_path
from coco_sql.errors import CandidateRejected
from coco_sql.sqlkit.ai_catalogue import BY_NAME as AI_FUNCTIONS
from coco_sql.sqlkit.nodes import function_name

JSON_EACH = "JSON_EACH"
"""The one table function a program may contain: generated from Snowflake FLATTEN, never written by users."""

# json_each returns (key, value, type, atom, id, parent, fullkey, path). Its `id` would make an unqualified
# `id` ambiguous next to input.id, so the generated alias renames it `seq` (nearest Snowflake FLATTEN column).
_JSON_EACH_COLUMNS = ("key", "value", "type", "atom", "seq", "parent", "fullkey", "path")

_TEXT_TYPES = frozenset({exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR})
_JSON_TYPES = frozenset(
    {exp.DataType.Type.JSON, exp.DataType.Type.VARIANT, exp.DataType.Type.OBJECT, exp.DataType.Type.ARRAY}
)


def _flatten_replacement(node: exp.Lateral | exp.TableFromRows, explode: exp.Explode) -> exp.Table:
    """Build ``json_each(input[, '$.path']) AS alias(key, value, ...)`` for one FLATTEN (fix-up b)."""
    args = [explode.this, *explode.expressions]
    source: exp.Expression | None = None
    path: str | None = None
    for position, arg in enumerate(args):
        if isinstance(arg, exp.Kwarg):
            key, value = arg.this.name.lower(), arg.expression
        else:
            key, value = ("input", "path")[position] if position < 2 else "?", arg
        if key == "input":
            source = value
        elif key == "path" and isinstance(value, exp.Literal) and value.is_string:
            path = value.this
        else:
            raise CandidateRejected(
                f"FLATTEN argument {key.upper()} is not supported; "
                "use FLATTEN(INPUT => expr[, PATH => 'a.b'])"
            )
    if source is None:
        raise CandidateRejected("FLATTEN needs an INPUT => expr argument")
    call_args: list[exp.Expression] = [source]
    if path:
        call_args.append(exp.Literal.string(path if path.startswith("$") else f"$.{path}"))
    alias = node.args.get("alias")
    alias_name = alias.name if isinstance(alias, exp.TableAlias) and alias.name else "flatten"
    return exp.Table(
        this=exp.Anonymous(this="json_each", expressions=call_args),
        alias=exp.TableAlias(
            this=exp.to_identifier(alias_name), columns=[exp.to_identifier(c) for c in _JSON_EACH_COLUMNS]
        ),
    )


def rewrite_flatten(tree: exp.Expression) -> tuple[exp.Expression, frozenset[str]]:
    """Replace every ``[LATERAL] FLATTEN`` / ``TABLE(FLATTEN(...))`` source; return tree and aliases."""
    aliases: set[str] = set()
    for node in list(tree.find_all(exp.Lateral, exp.TableFromRows)):
        explode = node.this
        if not isinstance(explode, exp.Explode):
            continue
        table = _flatten_replacement(node, explode)
        aliases.add(table.alias.lower())
        node.replace(table)
    return tree, frozenset(aliases)


def _is_flatten_value(node: exp.Expression, flatten_aliases: frozenset[str]) -> bool:
    """``f.value`` where ``f`` is a FLATTEN alias: a JSON element, like a Snowflake VARIANT."""
    return (
        isinstance(node, exp.Column)
        and node.name.lower() == "value"
        and node.table.lower() in flatten_aliases
    )


def rewrite_variant_casts(tree: exp.Expression, flatten_aliases: frozenset[str]) -> exp.Expression:
    """Cast VARIANT paths like Snowflake does (fix-up a): unquoted text, and typed values parsed from text.

    ``CAST(v -> '$.a' AS TEXT)`` -> ``v ->> '$.a'``;
    ``CAST(v -> '$.a' AS INT)`` -> ``CAST(v ->> '$.a' AS INT)`` (DuckDB cannot cast the JSON string ``"1"``
    to INT, Snowflake can). Casts to JSON-like types stay as they are.
    """
    for cast in list(tree.find_all(exp.Cast)):
        target = cast.to.this if isinstance(cast.to, exp.DataType) else None
        if target is None or target in _JSON_TYPES:
            continue
        inner = cast.this
        if isinstance(
            inner, exp.JSONExtract
        ):  # in a Snowflake tree: `v:a`, GET_PATH, GET or a VARIANT bracket
            text = exp.JSONExtractScalar(this=inner.this, expression=inner.expression)
        elif _is_flatten_value(inner, flatten_aliases):
            text = exp.JSONExtractScalar(
                this=inner.copy(), expression=exp.JSONPath(expressions=[exp.JSONPathRoot()])
            )
        else:
            continue
        if target in _TEXT_TYPES:
            cast.replace(text)
        else:
            cast.set("this", text)
    return tree


_MAX_RESOLVE_DEPTH = 8


def _is_json(
    node: exp.Expression, scopes: dict[int, Scope], json_columns: frozenset[str], depth: int = 0
) -> bool:
    """Whether `node` is a VARIANT (JSON in DuckDB) rather than a DuckDB list or struct (see fix-up d)."""
    while isinstance(node, (exp.Paren, exp.Alias)):
        node = node.this
    if isinstance(node, (exp.JSONExtract, exp.GetExtract, exp.ParseJSON)):
        return True
    if isinstance(node, exp.Cast):
        return isinstance(node.to, exp.DataType) and node.to.this in _JSON_TYPES - {exp.DataType.Type.ARRAY}
    if isinstance(node, exp.Func):
        function = AI_FUNCTIONS.get(function_name(node))
        return function is not None and any(udf.returns.json for udf in function.udfs)
    if isinstance(node, exp.Column) and depth < _MAX_RESOLVE_DEPTH:
        definitions = _column_definitions(node, scopes)
        if not definitions:
            return node.name.lower() in json_columns  # a column of the input relation
        return any(_is_json(e, scopes, json_columns, depth + 1) for e in definitions)
    return False


def _column_definitions(column: exp.Column, scopes: dict[int, Scope]) -> list[exp.Expression]:
    """The select expressions of the CTEs and subqueries the column reads, where it names one of them."""
    select = column.find_ancestor(exp.Select)
    scope = scopes.get(id(select)) if select is not None else None
    if scope is None:
        return []
    sources = [scope.sources.get(column.table)] if column.table else list(scope.sources.values())
    found = []
    for source in sources:
        if isinstance(source, Scope) and isinstance(source.expression, exp.Select):
            found += [e for e in source.expression.selects if e.alias_or_name.lower() == column.name.lower()]
    return found


def rewrite_variant_brackets(
    tree: exp.Expression, json_columns: frozenset[str] = frozenset()
) -> exp.Expression:
    """Turn bracket chains over a VARIANT into VARIANT paths (fix-up d); brackets over lists stay sqlglot's.
    `json_columns`: the input relation's columns that hold JSON (VARIANT, OBJECT, ARRAY)."""
    try:
        scopes = {id(scope.expression): scope for scope in traverse_scope(tree)}
    except OptimizeError:
        scopes = {}
    for node in list(tree.find_all(exp.Bracket)):
        if isinstance(node.parent, exp.Bracket) and node.arg_key == "this":
            continue  # an inner link: its outermost bracket rewrites the whole chain
        keys: list[exp.Expression] = []
        base: exp.Expression = node
        while isinstance(base, exp.Bracket):
            if len(base.expressions) != 1:
                break
            keys.insert(0, base.expressions[0])
            base = base.this
        if isinstance(base, exp.Bracket):
            continue
        keyed = any(isinstance(k, exp.Literal) and k.is_string for k in keys)
        path = json_path(keys)
        if path is None or not (keyed or _is_json(base, scopes, json_columns)):
            continue
        replacement = exp.JSONExtract(this=base, expression=path, variant_extract=True)
        if node is tree:
            return replacement
        node.replace(replacement)
    return tree


_FLOAT_TYPES = frozenset({exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE})


def rewrite_vector_types(tree: exp.Expression) -> exp.Expression:
    """`VECTOR(FLOAT, n)` -> `FLOAT[]` and `VECTOR(INT, n)` -> `INTEGER[]` (fix-up e)."""
    for node in list(tree.find_all(exp.DataType)):
        if node.this != exp.DataType.Type.VECTOR:
            continue
        element = node.expressions[0] if node.expressions else None
        is_float = not isinstance(element, exp.DataType) or element.this in _FLOAT_TYPES
        replacement = exp.DataType.build("FLOAT[]" if is_float else "INTEGER[]", dialect="duckdb")
        node.replace(replacement)
    return tree


def rewrite_catalogued_calls(tree: exp.Expression) -> exp.Expression:
    """Replace each call sqlglot transpiles wrongly by its catalogue translation (fix-up f)."""
    for node in list(tree.walk()):
        rewrite = REWRITES.get(type(node))
        if rewrite is None:
            continue
        replacement = rewrite(node)
        if replacement is node:
            continue
        if node is tree:
            tree = replacement
        else:
            node.replace(replacement)
    return tree


def snowflake_to_duckdb(tree: exp.Expression, json_columns: frozenset[str] = frozenset()) -> exp.Expression:
    """Transpile a Snowflake AST to a DuckDB AST, applying fix-ups (a), (b), (d), (e) and (f); (c) is applied by the
    caller.

    The DuckDB AST is obtained by generating DuckDB SQL and parsing it back: what we then check is exactly the
    text we will execute, not a Snowflake tree that merely claims to generate it.
    """
    tree, flatten_aliases = rewrite_flatten(tree)
    tree = rewrite_variant_brackets(tree, json_columns)
    tree = rewrite_vector_types(tree)
    tree = rewrite_catalogued_calls(tree)
    tree = rewrite_variant_casts(tree, flatten_aliases)
    duckdb_sql = tree.sql(dialect="duckdb")
    try:
        return sqlglot.parse_one(duckdb_sql, read="duckdb")
    except (
        sqlglot.errors.SqlglotError
    ) as error:  # a transpiler bug, not the candidate's fault: say so plainly
        raise CandidateRejected(
            f"could not transpile Snowflake SQL to DuckDB ({type(error).__name__}); rewrite the construct"
        ) from error
