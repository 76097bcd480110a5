"""PACE's mechanics on a SQL program (the SQL half of `primitives`): a primitive is a scalar DuckDB macro carried
before the program's one query (`sqlkit.macros`). C(A) is the set of library macros the QUERY calls (a
macro defined but never called is not in it); a definition's normal form is the macro written by sqlglot; the
edits add and remove definitions, rename calls among the dialect's tokens, and fold a primitive's body back into
a call (an offline P1 insertion). The kind's adapter (`languages.sql.primitives`) hands them to PACE."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from coco_sql.errors import CandidateRejected
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.primitives.library import Primitive
from coco_sql.sqlkit.macros import called_macros, normalised, split_macros
from coco_sql.sqlkit.parsing import parse_statement


def sql_call_set(code: str, names: frozenset[str], dialect: str) -> frozenset[str]:
    _, query_text = split_macros(code, dialect)
    return called_macros(parse_statement(query_text, dialect), frozenset(n.lower() for n in names))


def sql_definitions(code: str, dialect: str) -> dict[str, str]:
    macros, _ = split_macros(code, dialect)
    return {m.name: normalised(m, dialect) for m in macros}


def sql_library_definition(primitive: Primitive, dialect: str) -> str:
    macros, _ = split_macros(f"{primitive.code.rstrip().rstrip(';')};\nSELECT 1", dialect)
    return normalised(macros[0], dialect)


def sql_parts(primitive: Primitive, dialect: str) -> tuple[tuple[str, ...], exp.Expression]:
    macros, _ = split_macros(f"{primitive.code.rstrip().rstrip(';')};\nSELECT 1", dialect)
    return macros[0].params, macros[0].body


def sql_with_definitions(code: str, primitives: Sequence[Primitive], dialect: str) -> str:
    macros, _ = split_macros(code, dialect)
    have = {m.name for m in macros}
    new = [p.code.strip().rstrip(";") + ";" for p in primitives if p.name not in have]
    return "\n".join([*new, code.lstrip("\n")]) if new else code


def sql_remove_definitions(code: str, names: set[str], dialect: str) -> str:
    macros, query = split_macros(code, dialect)
    kept = [f"{m.text};" for m in macros if m.name not in names]
    return "\n".join([*kept, query]) + ("\n" if code.endswith("\n") else "")


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


def refactor_into_call(code: str, primitive: Primitive, *, dialect: str = SANDBOX_DIALECT) -> str | None:
    """A SQL program with every occurrence of `primitive`'s body over its own parameter names (the guard it was
    extracted from, say) replaced by a call `p_x(col, ...)`, and the definition added: a behaviour-preserving
    use of the primitive (an offline P1 insertion). None when the body does not occur."""
    params, body = sql_parts(primitive, dialect)
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
