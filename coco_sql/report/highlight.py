"""Programs as HTML for the report: syntax highlighting of SQL and Python, and line diffs between two programs.

Highlighting is a small tokenizer (comments, strings, numbers, keywords, function names), done once here so the
page needs no highlighting library: each token becomes `<span class="t-KIND">` and everything is HTML-escaped.
A diff is `difflib`'s unified diff, each line highlighted on its own.
"""

from __future__ import annotations

import bisect
import difflib
import html
import keyword
import re
from dataclasses import dataclass

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
_PYTHON = re.compile(
    r"""(?P<c>\#[^\n]*)
      |(?P<s>[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)
                             |"(?:\\.|[^"\\\n])*(?:"|$)|'(?:\\.|[^'\\\n])*(?:'|$)))
      |(?P<n>\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)
      |(?P<w>[A-Za-z_][A-Za-z0-9_]*)""",
    re.VERBOSE | re.MULTILINE,
)
_CALL = re.compile(r"\s*\(")


def highlight(code: str, language: str = "sql") -> str:
    """`code` as HTML: escaped, with spans `t-c` (comment), `t-s` (string), `t-i` (quoted identifier), `t-n`
    (number), `t-k` (keyword) and `t-f` (a name called as a function)."""
    python = language == "python"
    pattern = _PYTHON if python else _SQL
    out: list[str] = []
    at = 0
    for match in pattern.finditer(code):
        out.append(html.escape(code[at : match.start()], quote=False))
        kind = match.lastgroup or ""
        text = match.group()
        if kind == "w":
            if (text in keyword.kwlist) if python else (text.upper() in SQL_KEYWORDS):
                kind = "k"
            elif _CALL.match(code, match.end()):
                kind = "f"
            else:
                kind = ""
        out.append(
            f'<span class="t-{kind}">{html.escape(text, quote=False)}</span>'
            if kind
            else html.escape(text, quote=False)
        )
        at = match.end()
    out.append(html.escape(code[at:], quote=False))
    return "".join(out)


@dataclass(frozen=True)
class Diff:
    """A unified diff as HTML lines (`<span class="d-add">`, `d-del`, `d-ctx`, `d-hunk`) and its line counts."""

    html: str
    added: int
    removed: int

    @property
    def empty(self) -> bool:
        return self.added == 0 and self.removed == 0


def diff(
    old: str,
    new: str,
    language: str = "sql",
    *,
    context: int = 2,
    dialect: str | None = None,
    old_as_written: bool = False,
) -> Diff:
    """The line diff from `old` to `new`, each line highlighted. Lines are matched ignoring their indentation
    (a re-indented line is context, shown as it is in `new`), and SQL in a `dialect` is compared as sqlglot
    formats it (when both sides parse), so a hand-formatted seed and its machine-written children differ only
    where their queries do. With `old_as_written`, the removed lines are shown as `old` was written (the seed as
    the analyst wrote it, not sqlglot's rewrite of it: `_written_lines`), numbered as there."""
    written = old
    if language == "sql" and dialect:
        old, new = _formatted(old, dialect), _formatted(new, dialect)
    sources = _written_lines(written, old, dialect) if old_as_written and dialect and old != written else None
    a, b = old.splitlines(), new.splitlines()
    original = written.splitlines()
    matcher = difflib.SequenceMatcher(None, [x.strip() for x in a], [x.strip() for x in b], autojunk=False)
    out = []
    added = removed = 0
    shown: set[int] = set()  # lines of `written` already shown as removed
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        start, length = first[1] + 1, last[2] - first[1]
        if sources is not None:
            span = [k for i in range(first[1], last[2]) for k in sources[i]]
            start, length = (min(span) + 1, max(span) - min(span) + 1) if span else (1, 0)
        out.append(
            f'<span class="d-hunk">@@ -{start},{length} +{first[3] + 1},{last[4] - first[3]} @@</span>'
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_line("ctx", " ", text, language) for text in b[j1:j2])
                continue
            if sources is None:
                gone = a[i1:i2]
            else:
                lines = sorted({k for i in range(i1, i2) for k in sources[i]} - shown)
                shown.update(lines)
                gone = [original[k] for k in lines]
            out.extend(_line("del", "-", text, language) for text in gone)
            out.extend(_line("add", "+", text, language) for text in b[j1:j2])
            removed += len(gone)
            added += j2 - j1
    return Diff("".join(out), added, removed)


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


def _line(kind: str, mark: str, text: str, language: str) -> str:
    return f'<span class="d-{kind}">{mark}{highlight(text, language)}</span>'


def _formatted(code: str, dialect: str) -> str:
    """`code` pretty-printed by sqlglot in its own dialect; unchanged when it does not parse."""
    import sqlglot

    try:
        return "\n".join(sqlglot.transpile(code, read=dialect, write=dialect, pretty=True))
    except (sqlglot.errors.SqlglotError, ValueError):
        return code
