"""A project's model and macro files as the repair mutator edits them: text with its Jinja masked, same length.

A model is SQL with Jinja in it (``{{ ref('x') }}``, a ``{{ config(...) }}`` header of any number of lines,
``{% if %}`` blocks); a macro file is ``{% macro %}`` definitions whose bodies are SQL fragments. The mutator
parses the SQL and edits it at token spans (`sqlkit.spans`), so the Jinja is masked first, keeping every
offset: an expression (``{{ ref('orders') }}``, ``{{ cents_to_dollars('amount') }}``) becomes an identifier of
its own length, and a tag, a comment or a ``config()``/``set`` expression becomes blanks (newlines kept). A
change computed on the masked text applies to the original text as it is; a change whose new text holds a
placeholder gets that placeholder's Jinja back (`EditableFile.unmask`). A change may not overlap masked Jinja
(`EditableFile.clean`): Jinja is never rewritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.spans import Change, SpannedSql, tokens_of

_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
_BLANKED_EXPR = re.compile(r"\{\{-?\s*(config|set|do)\b", re.S)
_MACRO = re.compile(r"\{%-?\s*macro\s+([A-Za-z_]\w*)\s*\(.*?%\}(.*?)\{%-?\s*endmacro\s*-?%\}", re.S)


@dataclass
class EditableFile:
    """One model or macro file: its text, the masked copy, and what each placeholder stands for."""

    path: str
    text: str
    masked: str
    holders: dict[str, str] = field(default_factory=dict)  # placeholder -> the Jinja expression it hides
    jinja: list[tuple[int, int]] = field(default_factory=list)  # the masked spans
    sql: SpannedSql | None = None  # a model that parses as one query
    macros: dict[str, tuple[int, int]] = field(default_factory=dict)  # a macro file: name -> its body's span

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1].removesuffix(".sql")

    def unmask(self, text: str) -> str:
        for holder, jinja in self.holders.items():
            text = text.replace(holder, jinja)
        return text

    def clean(self, change: Change) -> bool:
        """True when `change` touches no masked Jinja (its span may surround a placeholder it keeps)."""
        for start, end in self.jinja:
            if start < change.end and change.start < end:
                inside = self.masked[start:end]
                if inside.strip() and inside in self.holders and inside in change.text:
                    continue  # an expression kept as it was, inside a wrapped span
                return False
        return True

    def fragments(self) -> list[tuple[str, int, list]]:
        """Each macro body's (macro name, offset, tokens), for token edits in macro files."""
        found = []
        for name, (start, end) in self.macros.items():
            tokens = tokens_of(self.masked[start:end], SANDBOX_DIALECT)
            if tokens is not None:
                found.append((name, start, list(tokens)))
        return found


def mask(text: str) -> tuple[str, dict[str, str], list[tuple[int, int]]]:
    """(masked text of the same length, placeholder -> Jinja, the masked spans)."""
    holders: dict[str, str] = {}
    spans: list[tuple[int, int]] = []

    def hold(match: re.Match[str]) -> str:
        jinja = match.group(0)
        spans.append((match.start(), match.end()))
        blank = "".join(c if c == "\n" else " " for c in jinja)
        if not jinja.startswith("{{") or _BLANKED_EXPR.match(jinja):
            return blank
        name = f"_j{len(holders)}"
        if len(name) > len(jinja):
            return blank
        name += "_" * (len(jinja) - len(name))
        holders[name] = jinja
        return name

    return _JINJA.sub(hold, text), holders, spans


def model_file(path: str, text: str, dialect: str) -> EditableFile:
    """A model, masked; when its masked text does not parse because an ``{% if %}`` holds SQL that is not always
    there (``{% if is_incremental() %} where ... {% endif %}``), the blocks' bodies are blanked too (all of them,
    else only their ``elif``/``else`` branches): edits never touch blanked text."""
    masked, holders, spans = mask(text)
    sql = SpannedSql.parse(masked, dialect)
    for keep_first in (False, True):
        if sql is not None:
            break
        blanked, dropped = _without_branches(masked, text, keep_first)
        sql = SpannedSql.parse(blanked, dialect)
        if sql is not None:
            masked, spans = blanked, sorted(spans + dropped)
    return EditableFile(path, text, masked, holders, spans, sql)


_TAG = re.compile(r"\{%-?\s*(if|elif|else|endif)\b.*?-?%\}", re.S)


def _without_branches(masked: str, text: str, keep_first: bool) -> tuple[str, list[tuple[int, int]]]:
    """`masked` with the bodies of every ``{% if %}`` block blanked (or, `keep_first`, only the bodies after an
    ``elif`` or ``else``), and the spans blanked."""
    out, dropped, stack = list(masked), [], []
    for match in _TAG.finditer(text):
        word = match.group(1)
        if word == "if":
            stack.append([match.end(), False])
        elif stack:
            start, in_else = stack[-1]
            if not (keep_first and not in_else):
                dropped.append((start, match.start()))
            if word == "endif":
                stack.pop()
            else:
                stack[-1] = [match.end(), True]
    for start, end in dropped:
        out[start:end] = ["\n" if c == "\n" else " " for c in masked[start:end]]
    return "".join(out), dropped


def macro_file(path: str, text: str) -> EditableFile:
    """A macros/*.sql file: each ``{% macro name(...) %} body {% endmacro %}``'s body span (masked inside)."""
    bodies = {m.group(1): (m.start(2), m.end(2)) for m in _MACRO.finditer(text)}
    masked, holders, spans = mask(text)
    return EditableFile(path, text, masked, holders, spans, None, bodies)


def macro_calls(text: str) -> set[str]:
    """Names of the macros a file's Jinja expressions call (``{{ name(`` or ``{{ package.name(``)."""
    return set(re.findall(r"\{\{-?\s*(?:[A-Za-z_]\w*\.)?([A-Za-z_]\w*)\s*\(", text))
