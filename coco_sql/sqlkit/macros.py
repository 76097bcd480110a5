"""SQL primitives as DuckDB scalar macros, carried at the top of the program and expanded inline before validation.

A SQL program with primitives reads

    CREATE MACRO p_lock(p1) AS p1 = 4;
    CREATE MACRO p_valid(d, a, b, c) AS d IN (a, b, c);
    SELECT id, CASE WHEN p_lock(p1) THEN 0 ELSE 1 END AS label FROM input

and runs as it is in DuckDB. Why a scalar macro and not a CTE: a guard or a feature is an expression over one
row's columns, which is exactly what the offline AST operators edit (CASE WHEN conditions, WHERE conjuncts, the
prompt arguments of AI functions); a call is visible on the AST as a function call, so a call set (PACE,
"Primitive-Aware Operators": C(A), the primitives program A calls) is one walk over the query; and inline
expansion means deployment to Snowflake, which has no macros, needs no DDL. A CTE is a relation, not a
reusable expression: it could not be "called" from two places with different columns.

Before validation the SQL language expands every call `name(x, y)` in the query inline (each parameter replaced
by its parenthesised argument), so the sandbox runs exactly one SELECT and every allow-list check applies to the
macro bodies as they run: `Program.source` keeps the macros and the calls, `Program.runnable` / `Program.tree`
are the expanded, validated query.

The macro statements are always DuckDB syntax (`CREATE [OR REPLACE] [TEMP|TEMPORARY] MACRO name(a, b) AS
expression`): sqlglot's Snowflake reader cannot parse CREATE MACRO. So this module splits the text into
statements itself (on the semicolon tokens of sqlglot's tokenizer, which skips those inside strings and
comments), reads each macro's header with the DuckDB reader, and parses the body and the query in the task's
dialect, so a Snowflake task writes Snowflake expressions in its macros too.

Rules (each a one-line `CandidateRejected`), from the paper's EAP contract ("self-contained, restricted to the
target's inputs, unable to call another EAP"): macros are scalar (no `AS TABLE`), come before the one query, have
distinct names that are no built-in function, use only their parameters (no other column, no subquery), do not
call another macro, are called with as many arguments as they have parameters, and number at most `MAX_MACROS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from coco_sql.errors import CandidateRejected
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.allowlist import AI_SIGNATURES, BASE_FUNCTIONS
from coco_sql.sqlkit.parsing import parse_statement
from coco_sql.sqlkit.rejection import one_line

MAX_MACROS = 8
"""At most this many macros in one program (the library's k bounds how many of them are primitives)."""

_MACRO_WORD = re.compile(r"\bmacro\b", re.IGNORECASE)
_MODIFIERS = ("OR", "REPLACE", "TEMP", "TEMPORARY")


@dataclass(frozen=True)
class Macro:
    """One `CREATE MACRO` statement: its lower-case name and parameters, its body (parsed in the task's dialect)
    and the statement's text as written (without the semicolon)."""

    name: str
    params: tuple[str, ...]
    body: exp.Expression
    text: str

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(self.params)})"


def _reject(message: str) -> CandidateRejected:
    return CandidateRejected(one_line(message))


def has_macro_word(code: str) -> bool:
    """The cheap pre-check: a program without the word MACRO has no macros (and pays nothing more)."""
    return _MACRO_WORD.search(code) is not None


def _segments(code: str, dialect: str) -> list[tuple[str, list[Token]]]:
    """The statements of `code` as (text, tokens), split on top-level semicolons; empty statements dropped."""
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(code)
    except TokenError as error:
        raise _reject(f"could not parse candidate: {error}") from None
    segments: list[tuple[str, list[Token]]] = []
    start, current = 0, list[Token]()
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if current:
                segments.append((code[start : token.start].strip(), current))
            start, current = token.end + 1, []
        else:
            current.append(token)
    if current:
        segments.append((code[start:].strip(), current))
    return segments


def _is_macro_statement(tokens: list[Token]) -> bool:
    """CREATE [OR REPLACE] [TEMP|TEMPORARY] MACRO ..."""
    if tokens[0].token_type != TokenType.CREATE:
        return False
    words = [t.text.upper() for t in tokens[1:6]]
    rest = [w for w in words if w not in _MODIFIERS]
    return bool(rest) and rest[0] == "MACRO"


def _body_start(tokens: list[Token], text: str) -> int:
    """Index of the first body token: the one after the AS that follows the parameter list."""
    depth, i = 0, 0
    while i < len(tokens) and tokens[i].token_type != TokenType.L_PAREN:
        i += 1
    for j in range(i, len(tokens)):
        kind = tokens[j].token_type
        depth += kind == TokenType.L_PAREN
        depth -= kind == TokenType.R_PAREN
        if depth == 0:
            if j + 1 < len(tokens) and tokens[j + 1].token_type == TokenType.ALIAS and j + 2 < len(tokens):
                return j + 2
            break
    raise _reject(
        f"could not parse macro {_first_words(text)!r}: expected CREATE MACRO name(a, b) AS expression"
    )


def _first_words(text: str, n: int = 4) -> str:
    return " ".join(text.split()[:n])


def _parse_macro(code: str, tokens: list[Token], dialect: str) -> Macro:
    text = code[tokens[0].start : tokens[-1].end + 1]
    body_at = _body_start(tokens, text)
    header = code[tokens[0].start : tokens[body_at - 1].start]
    try:
        created = sqlglot.parse_one(f"{header} AS NULL", read=SANDBOX_DIALECT)
    except (ParseError, TokenError):
        raise _reject(
            f"could not parse macro header {one_line(header)!r}: expected CREATE MACRO name(a, b) with plain "
            "parameter names (no defaults)"
        ) from None
    function = created.this
    if not (
        isinstance(created, exp.Create)
        and created.kind == "MACRO"
        and isinstance(function, exp.UserDefinedFunction)
    ):
        raise _reject(f"could not parse macro header {one_line(header)!r}")
    name = (function.this.name if isinstance(function.this, exp.Expression) else function.name).lower()
    params = tuple(p.name.lower() for p in function.expressions)
    if tokens[body_at].token_type == TokenType.TABLE:
        raise _reject(f"macro {name} is a table macro (AS TABLE): a primitive must be a scalar expression")
    body_text = code[tokens[body_at].start : tokens[-1].end + 1]
    try:
        body = sqlglot.parse_one(body_text, read=dialect)
    except (ParseError, TokenError) as error:
        raise _reject(f"could not parse the body of macro {name}: {one_line(str(error), 160)}") from None
    if isinstance(body, exp.Query) or body.find(exp.Query) is not None:
        raise _reject(
            f"macro {name} holds a subquery: a primitive is a scalar expression over its parameters"
        )
    if len(set(params)) != len(params):
        raise _reject(f"macro {name} repeats a parameter name")
    stray = sorted(
        {c.name.lower() for c in body.find_all(exp.Column) if c.table or c.name.lower() not in params}
    )
    if stray:
        raise _reject(
            f"macro {name} uses {', '.join(stray)}, which {'is' if len(stray) == 1 else 'are'} not among its "
            f"parameters ({', '.join(params) or 'none'}): a primitive reads only its parameters"
        )
    _check_name(name, dialect)
    return Macro(name, params, body, text)


def _check_name(name: str, dialect: str) -> None:
    """A macro must not shadow a function or be a keyword: its calls would not be told apart from the
    built-in's, or would not parse."""
    try:
        call = sqlglot.parse_one(f"{name}(1)", read=dialect)
    except (ParseError, TokenError):
        call = None
    if not isinstance(call, exp.Anonymous) or name.upper() in BASE_FUNCTIONS or name.upper() in AI_SIGNATURES:
        raise _reject(f"macro name {name} is a built-in function or keyword; name primitives p_<something>")


def split_macros(code: str, dialect: str) -> tuple[tuple[Macro, ...], str]:
    """(the macros, the query's text) of a program; CandidateRejected for a macro that breaks a rule of the
    module docstring. A program without macros gives `((), code)` unchanged."""
    if not has_macro_word(code):
        return (), code
    segments = _segments(code, dialect)
    if not any(_is_macro_statement(tokens) for _, tokens in segments):
        return (), code
    macros: list[Macro] = []
    query: str | None = None
    for text, tokens in segments:
        if _is_macro_statement(tokens):
            macro = _parse_macro(code, tokens, dialect)
            if query is not None:
                raise _reject(f"CREATE MACRO {macro.name} comes after the query: macros come first")
            if any(m.name == macro.name for m in macros):
                raise _reject(f"macro {macro.name} is defined twice")
            macros.append(macro)
        elif tokens[0].token_type == TokenType.CREATE:
            raise _reject(
                f"{_first_words(text, 2)} is not allowed: only CREATE MACRO statements may precede the query"
            )
        elif query is None:
            query = text
        else:
            raise _reject(
                f"a statement follows the query ({_first_words(text)!r}...): a program is its macros and one query"
            )
    if query is None:
        raise _reject("the program defines macros but has no query after them")
    if len(macros) > MAX_MACROS:
        raise _reject(f"the program defines {len(macros)} macros (at most {MAX_MACROS})")
    names = {m.name for m in macros}
    for macro in macros:
        inner = sorted({c.name.lower() for c in _calls(macro.body) if c.name.lower() in names})
        if inner:
            raise _reject(
                f"macro {macro.name} calls macro {', '.join(inner)}: a primitive must not call another"
            )
    return tuple(macros), query


def _calls(tree: exp.Expression) -> list[exp.Anonymous]:
    """The unqualified calls of unknown functions in `tree` (where a macro call can be)."""
    return [n for n in tree.find_all(exp.Anonymous) if isinstance(n.this, str) and not _qualified(n)]


def _qualified(node: exp.Expression) -> bool:
    """`schema.f(x)`: a function of a schema, never a macro of the program."""
    return isinstance(node.parent, exp.Dot) and node.parent.expression is node


_ATOMS = (exp.Column, exp.Literal, exp.Paren, exp.Func, exp.Boolean, exp.Null)


def _parenthesised(node: exp.Expression) -> exp.Expression:
    """`node` as an operand anywhere: atoms (columns, literals, calls) as they are, anything else in parens."""
    return (
        node
        if isinstance(node, _ATOMS) and not isinstance(node, exp.Connector | exp.Binary)
        else exp.Paren(this=node)
    )


def called_macros(query: exp.Expression, names: frozenset[str] | set[str]) -> frozenset[str]:
    """The names among `names` (lower-case) that `query` calls."""
    return frozenset(c.name.lower() for c in _calls(query) if c.name.lower() in names)


def expand(query: exp.Expression, macros: tuple[Macro, ...] | list[Macro]) -> exp.Expression:
    """`query` with every call of a macro replaced by its body, each parameter replaced by the parenthesised
    argument (a copy; `query` is left as it is). Names match case-insensitively. CandidateRejected for a call
    with the wrong number of arguments."""
    by_name = {m.name: m for m in macros}
    if not by_name:
        return query

    def substitute(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Anonymous) or not isinstance(node.this, str) or _qualified(node):
            return node
        macro = by_name.get(node.name.lower())
        if macro is None:
            return node
        arguments = node.expressions
        if len(arguments) != len(macro.params):
            raise _reject(
                f"{macro.name} takes {len(macro.params)} argument{'s' * (len(macro.params) != 1)} "
                f"({', '.join(macro.params)}), called with {len(arguments)}"
            )
        bound = dict(zip(macro.params, arguments, strict=True))

        def bind(inner: exp.Expression) -> exp.Expression:
            if isinstance(inner, exp.Column) and not inner.table and inner.name.lower() in bound:
                return _parenthesised(bound[inner.name.lower()].copy())
            return inner

        return _parenthesised(macro.body.copy().transform(bind, copy=False))

    return query.copy().transform(substitute, copy=False)


def expand_program(code: str, dialect: str) -> str | None:
    """The program's query with its macros expanded, as text in `dialect`; None when it has no macros (then
    `code` is the query). This is what runs, what a warehouse without macros gets, and the export's inlined
    form."""
    macros, query_text = split_macros(code, dialect)
    if not macros:
        return None
    query = parse_statement(query_text, dialect)
    return expand(query, macros).sql(dialect=dialect)


def render_macro(name: str, params: tuple[str, ...] | list[str], body: exp.Expression, dialect: str) -> str:
    """The `CREATE MACRO name(a, b) AS body;` statement of a primitive (its body written in `dialect`)."""
    return f"CREATE MACRO {name}({', '.join(params)}) AS {body.sql(dialect=dialect)};"


def normalised(macro: Macro, dialect: str) -> str:
    """A macro's definition written the one way (no OR REPLACE / TEMP, sqlglot's formatting): two copies of a
    primitive are the same definition when these are equal."""
    return render_macro(macro.name, macro.params, macro.body, dialect)
