"""The edits operators use to move primitives between programs: add the definitions a program calls, prune the
ones it no longer calls, rename the calls of one primitive to another, and refactor a sub-expression into a call
(PACE's P1/P2 mechanics; the kind-specific forms are the `sql_*` functions the SQL adapter calls)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from coco_sql.errors import CandidateRejected
from coco_sql.primitives.calls import adapter, call_set, definitions
from coco_sql.primitives.library import Primitive, PrimitiveLibrary
from coco_sql.sqlkit.macros import split_macros
from coco_sql.sqlkit.parsing import parse_statement


def _sql_parts(primitive: Primitive, dialect: str) -> tuple[tuple[str, ...], exp.Expression]:
    macros, _ = split_macros(f"{primitive.code.rstrip().rstrip(';')};\nSELECT 1", dialect)
    return macros[0].params, macros[0].body


def with_definitions(
    code: str, language: str, primitives: list[Primitive] | tuple[Primitive, ...], *, dialect: str = "duckdb"
) -> str:
    """`code` carrying the definitions of `primitives` it does not define yet (by name). SQL: their CREATE MACRO
    statements before the program's; Python: their imports and defs after the module's docstring and imports.
    A definition already present is left as it is (`contracts.verify` reports it if it is not the library's)."""
    return adapter(language).with_definitions(code, primitives, dialect=dialect)


def sql_with_definitions(code: str, primitives: Sequence[Primitive], dialect: str) -> str:
    macros, _ = split_macros(code, dialect)
    have = {m.name for m in macros}
    new = [p.code.strip().rstrip(";") + ";" for p in primitives if p.name not in have]
    return "\n".join([*new, code.lstrip("\n")]) if new else code


def prune_definitions(code: str, language: str, library: PrimitiveLibrary, *, dialect: str = "duckdb") -> str:
    """`code` without the definitions of library primitives it no longer calls."""
    names = library.names(language)
    calls = call_set(code, language, names, dialect=dialect)
    unused = set(definitions(code, language, dialect=dialect)) & (set(names) - calls)
    if not unused:
        return code
    return adapter(language).remove_definitions(code, unused, dialect=dialect)


def sql_remove_definitions(code: str, names: set[str], dialect: str) -> str:
    macros, query = split_macros(code, dialect)
    kept = [f"{m.text};" for m in macros if m.name not in names]
    return "\n".join([*kept, query]) + ("\n" if code.endswith("\n") else "")


def arity(primitive: Primitive) -> int:
    """The number of parameters in a primitive's signature `p_x(a, b)`."""
    inside = primitive.signature.partition("(")[2].rstrip().removesuffix(")")
    return len([p for p in inside.split(",") if p.strip()])


def replace_calls(
    code: str, language: str, target: Primitive, replacement: Primitive, *, dialect: str = "duckdb"
) -> str | None:
    """`code` with every call of `target` renamed to `replacement` (P2's mechanical core), or None when the two
    take different numbers of arguments or `code` does not call `target`. Definitions are not touched: follow
    with `with_definitions` and `prune_definitions`."""
    if arity(target) != arity(replacement) or target.language != replacement.language:
        return None
    return adapter(language).replace_calls(code, target, replacement, dialect=dialect)


def sql_replace_calls(code: str, target: Primitive, replacement: Primitive, dialect: str) -> str | None:
    """`replace_calls` for SQL: the calls found among the dialect's tokens."""
    tokens = Dialect.get_or_raise(dialect).tokenize(code)
    spans = [
        (t.start, t.end)
        for i, t in enumerate(tokens)
        if t.text.lower() == target.name
        and i + 1 < len(tokens)
        and tokens[i + 1].token_type == TokenType.L_PAREN
        and not (i > 0 and tokens[i - 1].text.upper() == "MACRO")
        and not (i > 0 and tokens[i - 1].token_type == TokenType.DOT)
    ]
    if not spans:
        return None
    for start, end in reversed(spans):
        code = code[:start] + replacement.name + code[end + 1 :]
    return code


def refactor_into_call(code: str, primitive: Primitive, *, dialect: str = "duckdb") -> str | None:
    """A SQL program with every occurrence of `primitive`'s body over its own parameter names (the guard it was
    extracted from, say) replaced by a call `p_x(col, ...)`, and the definition added: a behaviour-preserving
    use of the primitive (an offline P1 insertion). None when the body does not occur."""
    params, body = _sql_parts(primitive, dialect)
    pattern = body.sql(dialect=dialect)
    macros, query_text = split_macros(code, dialect)
    query = parse_statement(query_text, dialect)
    hits = 0

    def swap(node: exp.Expression) -> exp.Expression:
        nonlocal hits
        if isinstance(node, exp.Column | exp.Literal | exp.Identifier):
            return node
        inner = node.this if isinstance(node, exp.Paren) else node  # an expanded call is parenthesised
        bare = inner.copy().transform(
            lambda n: exp.column(n.name.lower()) if isinstance(n, exp.Column) else n
        )
        if bare.sql(dialect=dialect) != pattern:
            return node
        columns = {c.name.lower(): c for c in inner.find_all(exp.Column)}
        if any(p not in columns for p in params):
            return node
        hits += 1
        return exp.Anonymous(this=primitive.name, expressions=[columns[p].copy() for p in params])

    rewritten = query.transform(swap)
    if not hits:
        return None
    program = "\n".join(
        [
            *(f"{m.text};" for m in macros),
            rewritten.sql(dialect=dialect, pretty=True, normalize_functions=False),
        ]
    )
    try:
        return sql_with_definitions(program, [primitive], dialect)
    except CandidateRejected:
        return None
