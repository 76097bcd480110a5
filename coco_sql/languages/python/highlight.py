"""Python in the report (`languages.base.Highlighter`): its tokens; a diff compares the code as written."""

from __future__ import annotations

import keyword
import re

from coco_sql.languages.highlighting import token_spans

_PYTHON = re.compile(
    r"""(?P<c>\#[^\n]*)
      |(?P<s>[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)
                             |"(?:\\.|[^"\\\n])*(?:"|$)|'(?:\\.|[^'\\\n])*(?:'|$)))
      |(?P<n>\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)
      |(?P<w>[A-Za-z_][A-Za-z0-9_]*)""",
    re.VERBOSE | re.MULTILINE,
)


class PythonHighlighter:
    def html(self, code: str) -> str:
        return token_spans(code, _PYTHON, lambda word: word in keyword.kwlist)

    def formatted(self, code: str, dialect: str) -> str:
        return code

    def written_lines(self, written: str, formatted: str, dialect: str) -> list[list[int]] | None:
        return None
