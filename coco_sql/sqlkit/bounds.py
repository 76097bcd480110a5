"""SQL from a candidate parsed within bounds: one line for text that is too big or nested too deep, never a
RecursionError traceback and never minutes of sqlglot.

sqlglot's parser, generator and optimizer recurse once or more per level of nesting: 800 nested parentheses,
CASEs, function calls, subqueries or NOTs are a RecursionError (measured with sqlglot 30 under Python's default
limit of 1,000 frames; 400 still pass). Its optimizer's ``qualify`` costs time quadratic in a chain's length
(a 2,400-term ``OR`` chain took 12 s, 1,200 terms 3.5 s, 600 terms 1 s, on a loaded 2-core machine), while
a flat CASE of 4,800 arms (29,000 nodes) took 3 s. So, before and after the parse (`SqlBounds`):

- the text: at most `max_chars` characters and `max_tokens` tokens (sqlglot's tokenizer is not recursive);
- the nesting of brackets and CASE ... END over the tokens: at most `max_nesting` levels, checked before the
  parser recurses;
- the tree: at most `max_nodes` nodes, at most `max_depth` levels along any path (a binary chain counts each
  link), at most `max_nesting * 4` levels of other nodes (a NOT chain has no bracket); walked iteratively.

`parse_bounded` applies them around ``sqlglot.parse``, and `recursion_guard` turns a RecursionError that gets
past them (a deeper caller's stack) into the same one-line rejection.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from coco_sql.errors import CandidateRejected


@dataclass(frozen=True)
class SqlBounds:
    """How big and how deep a candidate's SQL may be (see the module docstring for the measurements)."""

    max_chars: int = 1_000_000
    max_tokens: int = 200_000
    max_nesting: int = 128
    max_nodes: int = 60_000
    max_depth: int = 1_000


DEFAULT_SQL_BOUNDS = SqlBounds()
_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END})


def too_deep(what: str = "the SQL") -> CandidateRejected:
    return CandidateRejected(f"{what} is nested too deeply to check (simplify it: fewer nested levels)")


@contextmanager
def recursion_guard(what: str = "the SQL") -> Iterator[None]:
    """A RecursionError inside becomes the one-line rejection of SQL nested too deeply."""
    try:
        yield
    except RecursionError:
        raise too_deep(what) from None


def check_text(source: str, dialect: str, bounds: SqlBounds = DEFAULT_SQL_BOUNDS) -> None:
    """The text's size, token count and nesting (brackets, CASE ... END), before anything recurses over it.
    A text the tokenizer refuses is left to the parser's own message."""
    if len(source) > bounds.max_chars:
        raise CandidateRejected(
            f"the SQL has {len(source):,} characters; at most {bounds.max_chars:,} allowed"
        )
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(source)
    except TokenError:
        return
    if len(tokens) > bounds.max_tokens:
        raise CandidateRejected(f"the SQL has {len(tokens):,} tokens; at most {bounds.max_tokens:,} allowed")
    depth = 0
    for token in tokens:
        if token.token_type in _OPEN:
            depth += 1
            if depth > bounds.max_nesting:
                raise CandidateRejected(
                    f"the SQL nests brackets or CASE more than {bounds.max_nesting} levels deep (line {token.line})"
                )
        elif token.token_type in _CLOSE:
            depth = max(depth - 1, 0)


def check_tree(tree: exp.Expression, bounds: SqlBounds = DEFAULT_SQL_BOUNDS) -> None:
    """The parsed tree's size and depth, walked without recursion."""
    stack: list[tuple[exp.Expression, int, int]] = [(tree, 1, 1)]
    seen = 0
    other_limit = bounds.max_nesting * 4
    while stack:
        node, depth, other = stack.pop()
        seen += 1
        if seen > bounds.max_nodes:
            raise CandidateRejected(f"the SQL has more than {bounds.max_nodes:,} parts; simplify it")
        if other > other_limit:
            raise too_deep()
        if depth > bounds.max_depth:
            raise CandidateRejected(
                f"the SQL chains more than {bounds.max_depth} terms in one expression (a OR b OR ...); simplify it"
            )
        step = 0 if isinstance(node, exp.Binary) else 1
        for child in node.iter_expressions():
            stack.append((child, depth + 1, other + step))


def parse_bounded(source: str, dialect: str, bounds: SqlBounds = DEFAULT_SQL_BOUNDS) -> list[exp.Expression]:
    """``sqlglot.parse(source, read=dialect)`` (statements that are not None) within `bounds`. ParseError and
    TokenError pass through for the caller's own message; every bound is a one-line CandidateRejected."""
    check_text(source, dialect, bounds)
    with recursion_guard():
        statements = [s for s in sqlglot.parse(source, read=dialect) if s is not None]
    for statement in statements:
        check_tree(statement, bounds)
    return statements


__all__ = [
    "DEFAULT_SQL_BOUNDS",
    "ParseError",
    "SqlBounds",
    "TokenError",
    "check_text",
    "check_tree",
    "parse_bounded",
    "recursion_guard",
    "too_deep",
]
