"""Programs as HTML for the report: syntax highlighting of SQL and Python, and line diffs between two programs.

Highlighting is a small tokenizer (comments, strings, numbers, keywords, function names), done once here so the
page needs no highlighting library: each token becomes `<span class="t-KIND">` and everything is HTML-escaped.
A diff is `difflib`'s unified diff, each line highlighted on its own.
"""

from __future__ import annotations

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


def diff(old: str, new: str, language: str = "sql", *, context: int = 2, dialect: str | None = None) -> Diff:
    """The line diff from `old` to `new`, each line highlighted. Lines are matched ignoring their indentation
    (a re-indented line is context, shown as it is in `new`), and SQL in a `dialect` is compared as sqlglot
    formats it (when both sides parse), so a hand-formatted seed and its machine-written children differ only
    where their queries do."""
    if language == "sql" and dialect:
        old, new = _formatted(old, dialect), _formatted(new, dialect)
    a, b = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, [x.strip() for x in a], [x.strip() for x in b], autojunk=False)
    out = []
    added = removed = 0
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        out.append(
            f'<span class="d-hunk">@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@</span>'
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_line("ctx", " ", text, language) for text in b[j1:j2])
                continue
            out.extend(_line("del", "-", text, language) for text in a[i1:i2])
            out.extend(_line("add", "+", text, language) for text in b[j1:j2])
            removed += i2 - i1
            added += j2 - j1
    return Diff("".join(out), added, removed)


def _line(kind: str, mark: str, text: str, language: str) -> str:
    return f'<span class="d-{kind}">{mark}{highlight(text, language)}</span>'


def _formatted(code: str, dialect: str) -> str:
    """`code` pretty-printed by sqlglot in its own dialect; unchanged when it does not parse."""
    import sqlglot

    try:
        return "\n".join(sqlglot.transpile(code, read=dialect, write=dialect, pretty=True))
    except (sqlglot.errors.SqlglotError, ValueError):
        return code
