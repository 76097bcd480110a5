"""SQL text edited where it changes: a sqlglot tree whose nodes map back to character spans of the text.

An edit that regenerates a whole query from its tree (``tree.sql(pretty=True)``) rewrites every line: comments
go, ``::varchar(100)`` becomes ``CAST(... AS TEXT)``, keywords change case. A person's diff of a one-token fix
is one token. So edits here are `Change`s, a span of the original text and its replacement, and `apply` writes
only those.

Spans come from the tokens. sqlglot records where an identifier, a literal and a function name came from
(``node.meta``: start, end); a node's span is its leaves' extent, grown to whole constructs: balanced
parentheses, the ``CASE`` ... ``END`` around a case, a leading ``CAST``/``INTERVAL``/``NOT``/``DISTINCT``, a
trailing ``::type`` or ``DESC``. Tokens (`SpannedSql.tokens`) give the rest: an operator between two operands,
a keyword before a join. Offsets are the text's own, so a caller may parse a masked copy of the same length
(Jinja expressions held as identifiers) and apply the changes to the original.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

_LEADING = {  # a node kind -> the word its text starts with, within a few tokens before its first leaf
    exp.Case: "CASE",
    exp.Interval: "INTERVAL",
    exp.TryCast: "TRY_CAST",
    exp.Cast: "CAST",
    exp.Not: "NOT",
    exp.Exists: "EXISTS",
}
_ORDER_WORDS = {"DESC", "ASC", "NULLS", "FIRST", "LAST"}
MAX_TEXT = 200_000  # characters: a longer file is not parsed for edits


@dataclass(frozen=True)
class Change:
    """Replace ``text[start:end]`` with `text`."""

    start: int
    end: int
    text: str


def apply(text: str, changes: Iterable[Change]) -> str:
    """`text` with every change applied; changes must not overlap (ValueError if they do)."""
    ordered = sorted(changes, key=lambda c: (c.start, c.end))
    out, at = [], 0
    for change in ordered:
        if change.start < at:
            raise ValueError("overlapping changes")
        out += [text[at : change.start], change.text]
        at = change.end
    return "".join(out) + text[at:]


class SpannedSql:
    """One query's text, its tokens and its tree, with `span` from a node back to the text."""

    def __init__(self, text: str, dialect: str) -> None:
        self.text, self.dialect = text, dialect
        self.tokens: list[Token] = sqlglot.tokenize(text, read=dialect)
        self.tree: exp.Expression = sqlglot.parse_one(text, read=dialect)
        self._starts = {t.start: i for i, t in enumerate(self.tokens)}
        self._ends = {t.end: i for i, t in enumerate(self.tokens)}
        self._ranges: dict[int, tuple[int, int] | None] = {}

    @classmethod
    def parse(cls, text: str, dialect: str) -> SpannedSql | None:
        """The parsed text, or None when it does not tokenize or parse as one statement (or is too long)."""
        if len(text) > MAX_TEXT:
            return None
        try:
            return cls(text, dialect)
        except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
            return None

    # -- spans -------------------------------------------------------------------------------------------
    def token_range(self, node: exp.Expression) -> tuple[int, int] | None:
        """The first and last token index of `node` (inclusive), or None when no leaf says where it is: its
        children's ranges and its own, grown to the construct's whole text."""
        key = id(node)
        if key not in self._ranges:
            self._ranges[key] = self._range(node)
        return self._ranges[key]

    def _range(self, node: exp.Expression) -> tuple[int, int] | None:
        found = [r for r in (self.token_range(c) for c in node.iter_expressions()) if r is not None]
        if "start" in node.meta:
            own = self._starts.get(node.meta["start"]), self._ends.get(node.meta["end"])
            if own[0] is not None and own[1] is not None:
                found.append((own[0], own[1]))
        if not found:
            return None
        i, j = min(r[0] for r in found), max(r[1] for r in found)
        if isinstance(node, exp.Func) and "start" not in node.meta:
            i = self._function_head(node, i)
        for kind, word in _LEADING.items():
            if isinstance(node, kind):
                back = next(
                    (k for k in range(i - 1, max(i - 4, -1), -1) if self.tokens[k].text.upper() == word), None
                )
                if back is not None:
                    i = back
                elif not isinstance(node, exp.Cast):  # a cast may be written x::type instead
                    return None
                break
        i, j = self._balance(i, j)
        if isinstance(node, exp.Case):
            j = self._matching_end(i, j)
        if isinstance(node, exp.Cast) and j + 1 < len(self.tokens):
            j = self._cast_suffix(j)
        if isinstance(node, exp.Ordered):
            while j + 1 < len(self.tokens) and self.tokens[j + 1].text.upper() in _ORDER_WORDS:
                j += 1
        return i, j

    def span(self, node: exp.Expression) -> tuple[int, int] | None:
        """`node`'s character span, half-open ``[start, end)``, or None."""
        found = self.token_range(node)
        if found is None:
            return None
        return self.tokens[found[0]].start, self.tokens[found[1]].end + 1

    def source(self, node: exp.Expression) -> str | None:
        """The text `node` was parsed from."""
        found = self.span(node)
        return None if found is None else self.text[found[0] : found[1]]

    def tokens_in(self, start: int, end: int) -> list[tuple[int, Token]]:
        """(index, token) of every token inside the character span ``[start, end)``."""
        return [(i, t) for i, t in enumerate(self.tokens) if t.start >= start and t.end < end]

    def between(self, left: exp.Expression, right: exp.Expression) -> list[tuple[int, Token]]:
        """The tokens after `left` ends and before `right` starts (an operator, a keyword)."""
        a, b = self.span(left), self.span(right)
        if a is None or b is None or a[1] > b[0]:
            return []
        return self.tokens_in(a[1], b[0])

    def replace_node(self, node: exp.Expression, text: str) -> Change | None:
        found = self.span(node)
        return None if found is None else Change(found[0], found[1], text)

    def replace_token(self, index: int, text: str) -> Change:
        token = self.tokens[index]
        return Change(token.start, token.end + 1, text)

    # -- internals -----------------------------------------------------------------------------------------
    def _function_head(self, node: exp.Func, i: int) -> int:
        """Back to a function's name when sqlglot left no position on the node (MAX, MIN, COUNT, ...: only
        their arguments have one): ``name (`` just before the first argument's token."""
        names = {name.upper() for name in node.sql_names()}
        if (
            i >= 2
            and self.tokens[i - 1].token_type == TokenType.L_PAREN
            and self.tokens[i - 2].text.upper() in names
        ):
            return i - 2
        return i

    def _balance(self, i: int, j: int) -> tuple[int, int]:
        depth = sum(_paren(t) for t in self.tokens[i : j + 1])
        while depth > 0 and j + 1 < len(self.tokens):
            j += 1
            depth += _paren(self.tokens[j])
        while depth < 0 and i > 0:
            i -= 1
            depth += _paren(self.tokens[i])
        return i, j

    def _matching_end(self, i: int, j: int) -> int:
        depth = 0
        for k in range(i, len(self.tokens)):
            kind = self.tokens[k].token_type
            depth += (kind == TokenType.CASE) - (kind == TokenType.END)
            if depth == 0 and k >= i:
                return max(k, j)
        return j

    def _cast_suffix(self, j: int) -> int:
        """Past ``::type`` (with its ``(16, 2)``) when one follows."""
        if self.tokens[j + 1].token_type != TokenType.DCOLON:
            return j
        j += 2
        if j + 1 < len(self.tokens) and self.tokens[j + 1].token_type == TokenType.L_PAREN:
            j = self._balance(j + 1, j + 1)[1]
        return min(j, len(self.tokens) - 1)


def _paren(token: Token) -> int:
    return {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)


def tokens_of(text: str, dialect: str) -> Sequence[Token] | None:
    """The tokens of a SQL fragment (a macro body), or None when it does not tokenize."""
    if len(text) > MAX_TEXT:
        return None
    try:
        return sqlglot.tokenize(text, read=dialect)
    except (sqlglot.errors.SqlglotError, ValueError):
        return None
