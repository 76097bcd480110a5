"""YAML and JSON from a candidate (or a model's answer), parsed within bounds: one line for a document that is too
deep, too big or expands too far, never a RecursionError traceback and never minutes of work.

Why: PyYAML composes nodes recursively and CPython's JSON decoder recurses per nesting level, so 5,000 nested ``[``
is a RecursionError from either; an alias bomb (``&a [*b, *b]`` ...) is a small file that a walk expands into
millions of nodes. The bounds (`Bounds`) are checked while parsing (YAML: depth and node count as nodes are
composed; JSON: a linear scan of the nesting before the decoder runs) and over the parsed value (depth and size
with every alias expanded, as any later walk of it would see it). Each failure is `CandidateRejected` naming the
file (or what the text is) and the bound.

Imports only the standard library, PyYAML and `coco_sql.errors`: every kind that reads a candidate's YAML or JSON
uses it (dbt's project files, the agent spec, the outputs a program returns).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from coco_sql.errors import CandidateRejected


@dataclass(frozen=True)
class Bounds:
    """How deep and how big a parsed document may be (nesting levels; values with aliases expanded; characters)."""

    max_depth: int = 64
    max_nodes: int = 100_000
    max_chars: int = 2_000_000


DEFAULT_BOUNDS = Bounds()


class _Loader(yaml.SafeLoader):
    """The safe loader, refusing a node nested deeper than `bounds.max_depth` or more than `bounds.max_nodes` nodes
    while it composes them (PyYAML's composer recurses once per level)."""

    bounds: Bounds = DEFAULT_BOUNDS
    where: str = "the YAML"
    allow_aliases: bool = True

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if not self.allow_aliases and self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise CandidateRejected(
                f"{self.where} line {event.start_mark.line + 1}: anchors and aliases (*name) are not allowed"
            )
        self._nodes += 1
        if self._nodes > self.bounds.max_nodes:
            raise _too_many(self.where, self.bounds)
        self._depth += 1
        if self._depth > self.bounds.max_depth:
            raise _too_deep(self.where, self.bounds)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_yaml(
    where: str,
    text: str,
    bounds: Bounds = DEFAULT_BOUNDS,
    *,
    allow_aliases: bool = True,
    loader: type[yaml.SafeLoader] | None = None,
) -> Any:
    """One YAML document (safe loader) within `bounds`; a syntax error is one line naming `where` and the line.
    `loader`: a subclass of this module's loader with more checks of its own (it must derive from `yaml_loader()`)."""
    if len(text) > bounds.max_chars:
        raise CandidateRejected(f"{where}: {len(text):,} characters, over the limit of {bounds.max_chars:,}")
    cls = loader or _Loader
    bound = type("BoundedLoader", (cls,), {"bounds": bounds, "where": where, "allow_aliases": allow_aliases})
    try:
        document = yaml.load(text, Loader=bound)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise CandidateRejected(
            f"{where}{line}: YAML does not parse: {' '.join(str(problem).split())}"
        ) from None
    except RecursionError:  # a bound above the interpreter's own limit: still one line
        raise _too_deep(where, bounds) from None
    check_value(where, document, bounds)
    return document


def yaml_loader() -> type[yaml.SafeLoader]:
    """The bounded loader class, for a caller that adds checks of its own (subclass it, pass it as `loader`)."""
    return _Loader


def loads_json(where: str, text: str, bounds: Bounds = DEFAULT_BOUNDS) -> Any:
    """One JSON value within `bounds` (ValueError's message, as one line, when it is not JSON)."""
    if len(text) > bounds.max_chars:
        raise CandidateRejected(f"{where}: {len(text):,} characters, over the limit of {bounds.max_chars:,}")
    if json_depth(text) > bounds.max_depth:
        raise _too_deep(where, bounds)
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep(where, bounds) from None
    except ValueError as error:
        raise CandidateRejected(f"{where}: not JSON: {' '.join(str(error).split())}") from None
    check_value(where, value, bounds)
    return value


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text, outside strings (a linear scan; the decoder's own
    recursion is what it protects)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def check_value(where: str, value: Any, bounds: Bounds = DEFAULT_BOUNDS) -> None:
    """A parsed value's depth and size with every shared part (a YAML alias) counted where it appears: what a
    later recursive walk (a dump, a comparison) would meet."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > bounds.max_nodes:
            raise _too_many(where, bounds)
        if depth > bounds.max_depth:
            raise _too_deep(where, bounds)
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for pair in node.items() for child in pair)
        elif isinstance(node, list | tuple):
            stack.extend((child, depth + 1) for child in node)


def _too_deep(where: str, bounds: Bounds) -> CandidateRejected:
    return CandidateRejected(f"{where}: nested deeper than {bounds.max_depth} levels")


def _too_many(where: str, bounds: Bounds) -> CandidateRejected:
    return CandidateRejected(f"{where}: the document expands to more than {bounds.max_nodes:,} values")
