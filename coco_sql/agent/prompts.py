"""The agent's prompts: versioned jinja2 templates shipped in the package (`templates/*.j2`).

Each template's first line is a Jinja comment `{# version: N #}`. A rendered prompt carries `name@N`, which every
model call records with its turn (`AgentTurn.template`), so a transcript says which wording produced it. Change a
template's text, raise its version. Rendering is strict: a missing variable is an error, not an empty string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

import jinja2

_VERSION = re.compile(r"\A\{#\s*version:\s*(\d+)\s*#\}")


@dataclass(frozen=True)
class Prompt:
    text: str
    ref: str  # 'name@version'


def render(name: str, **context: Any) -> Prompt:
    """Template `name` (without `.j2`) rendered with `context`."""
    source, version = _source(name)
    text = _environment().from_string(source).render(**context).strip()
    return Prompt(text, f"{name}@{version}")


@cache
def _source(name: str) -> tuple[str, int]:
    text = (files("coco_sql.agent") / "templates" / f"{name}.j2").read_text(encoding="utf-8")
    found = _VERSION.match(text)
    if found is None:
        raise ValueError(f"template {name!r} does not start with '{{# version: N #}}'")
    return text, int(found.group(1))


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False
    )
