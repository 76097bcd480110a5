"""SQL in the report (`languages.base.Highlighter`): its tokens, and the form a diff compares (sqlglot's, in the
program's dialect), mapped back to the lines as written."""

from __future__ import annotations

import bisect
import difflib
import re

from coco_sql.languages.highlighting import token_spans

_SQL_KEYWORD_TEXT = """
    ALL AND ANY AS ASC BETWEEN BY CASE CAST CROSS CURRENT DESC DISTINCT ELSE END EXCEPT EXISTS FALSE FILTER
    FIRST FOLLOWING FROM FULL GROUP HAVING ILIKE IN INNER INTERSECT INTERVAL IS JOIN LAST LATERAL LEFT LIKE
    LIMIT NOT NULL NULLS OFFSET ON OR ORDER OUTER OVER PARTITION PRECEDING QUALIFY RANGE RECURSIVE RIGHT ROW
    ROWS SELECT SIMILAR THEN TRUE UNBOUNDED UNION USING VALUES WHEN WHERE WINDOW WITH
"""
SQL_KEYWORDS = frozenset(_SQL_KEYWORD_TEXT.split())
_SQL = re.compile(
    r"""(?P<c>--[^\n]*|/\*.*?(?:\*/|\Z))
      |(?P<s>'(?:[^']|'')*(?:'|\Z))
      |(?P<i>"(?:[^"]|"")*(?:"|\Z))
      |(?P<n>\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)
      |(?P<w>[A-Za-z_][A-Za-z0-9_$]*)""",
    re.DOTALL | re.VERBOSE,
)


class SqlHighlighter:
    def html(self, code: str) -> str:
        return token_spans(code, _SQL, lambda word: word.upper() in SQL_KEYWORDS)

    def formatted(self, code: str, dialect: str) -> str:
        return _formatted(code, dialect)

    def written_lines(self, written: str, formatted: str, dialect: str) -> list[list[int]] | None:
        return _written_lines(written, formatted, dialect)


def _written_lines(written: str, formatted: str, dialect: str) -> list[list[int]] | None:
    """For each line of `formatted` (sqlglot's form of `written`), the lines of `written` it comes from
    (0-based), or None when either does not tokenize.

    The two token streams are aligned (difflib over token type and text); a token sqlglot added or rewrote
    (`GET_PATH` for `:labels`) comes from the line of the next token it kept, else the last one. The lines of
    `written` without tokens (comments, blank lines) go with the next line that has some, so a comment is shown
    with what it annotates; a formatted line without tokens (sqlglot's `/* */` form of a comment) comes from the
    comment lines just above its next line's sources."""
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import SqlglotError

    try:
        tokenize = Dialect.get_or_raise(dialect).tokenize
        mine, theirs = tokenize(written), tokenize(formatted)
    except (SqlglotError, ValueError):
        return None
    mine_lines, their_lines = _line_of(written, mine), _line_of(formatted, theirs)
    matcher = difflib.SequenceMatcher(
        None,
        [(t.token_type, t.text.upper()) for t in mine],
        [(t.token_type, t.text.upper()) for t in theirs],
        autojunk=False,
    )
    origin: list[int | None] = [None] * len(theirs)
    for i, j, size in matcher.get_matching_blocks():
        for k in range(size):
            origin[j + k] = mine_lines[i + k]
    following: int | None = None
    for j in reversed(range(len(origin))):  # a rewritten token: the line of the next kept one
        following = origin[j] = origin[j] if origin[j] is not None else following
    preceding = next((o for o in reversed(origin) if o is not None), 0)
    sources: list[set[int]] = [set() for _ in formatted.splitlines()]
    for j, line in enumerate(their_lines):
        if line < len(sources):
            sources[line].add(preceding if origin[j] is None else origin[j])
    groups = {}  # a line of `written` with tokens -> the lines without tokens just before it (its comments)
    before = 0
    for line in sorted(set(mine_lines)):
        groups[line] = list(range(before, line))
        before = line + 1
    result: list[list[int]] = []
    following_sources: set[int] = set()
    for k in reversed(range(len(sources))):
        if sources[k]:  # its lines, with the comments just above them
            following_sources = sources[k]
            result.append(sorted({c for line in sources[k] for c in [*groups.get(line, []), line]}))
        else:  # a comment line: the comments above the next line's sources
            result.append(sorted({c for line in following_sources for c in groups.get(line, [])}))
    return result[::-1]


def _line_of(text: str, tokens: list) -> list[int]:
    """The 0-based line each token starts on."""
    breaks = [i for i, c in enumerate(text) if c == "\n"]
    return [bisect.bisect_left(breaks, t.start) for t in tokens]


def _formatted(code: str, dialect: str) -> str:
    """`code` pretty-printed by sqlglot in its own dialect; unchanged when it does not parse."""
    import sqlglot

    try:
        return "\n".join(sqlglot.transpile(code, read=dialect, write=dialect, pretty=True))
    except (sqlglot.errors.SqlglotError, ValueError):
        return code
