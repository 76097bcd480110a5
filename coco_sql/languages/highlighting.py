"""Token spans for the report's code: one small tokenizer that each kind's highlighter
(`languages.base.Highlighter`) feeds with its own token pattern and keywords, so the page needs no highlighting
library. Each token becomes `<span class="t-KIND">` and everything is HTML-escaped."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

_CALL = re.compile(r"\s*\(")


def token_spans(code: str, pattern: re.Pattern[str], is_keyword: Callable[[str], bool]) -> str:
    """`code` as HTML: escaped, with spans `t-c` (comment), `t-s` (string), `t-i` (quoted identifier), `t-n`
    (number), `t-k` (keyword) and `t-f` (a name called as a function). `pattern` names its groups c, s, i, n
    and w (a word: a keyword, a called name, or plain)."""
    out: list[str] = []
    at = 0
    for match in pattern.finditer(code):
        out.append(html.escape(code[at : match.start()], quote=False))
        kind = match.lastgroup or ""
        text = match.group()
        if kind == "w":
            if is_keyword(text):
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
