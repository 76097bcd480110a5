"""Programs as HTML for the report: syntax highlighting, and line diffs between two programs.

Highlighting is the program kind's (`languages.base.Highlighter`, e.g. `languages.sql.highlight`); a kind
without one is shown escaped. A diff is `difflib`'s unified diff, each line highlighted on its own; a kind's
highlighter says which form of the programs it compares (SQL: sqlglot's, in the program's dialect).
"""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass

from coco_sql.languages.base import Highlighter
from coco_sql.plugins import kind


def _highlighter(language: str) -> Highlighter | None:
    return kind(language).highlight


def highlight(code: str, language: str = "sql") -> str:
    """`code` as HTML: escaped, with spans per token class where its kind highlights (`t-c` comment, `t-s`
    string, `t-i` quoted identifier, `t-n` number, `t-k` keyword, `t-f` a name called as a function)."""
    highlighter = _highlighter(language)
    return highlighter.html(code) if highlighter is not None else html.escape(code, quote=False)


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
    highlighter = _highlighter(language)
    if highlighter is not None and dialect:
        old, new = highlighter.formatted(old, dialect), highlighter.formatted(new, dialect)
    sources = (
        highlighter.written_lines(written, old, dialect)
        if highlighter is not None and old_as_written and dialect and old != written
        else None
    )
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


def _line(kind: str, mark: str, text: str, language: str) -> str:
    return f'<span class="d-{kind}">{mark}{highlight(text, language)}</span>'
