"""The Jinja environment that renders a candidate's templates: Jinja's sandbox, with its work and its values bounded.

A template is hostile, and the validator renders it in the dbt worker (under its memory bound and SIGKILL) but
also in this process (the warehouse path, check-deploy, the report), so the environment bounds itself:

- **work is counted, not timed**: every loop step (each ``{% for %}`` iterates through `counted`, the parsed
  template is rewritten for that: `_Instrument`), filter and ``*``/``+``/``%`` is a step, a call ten (a macro
  call costs about ten loop steps: 28 us against 1.2 us, measured at load 9); past `JinjaLimits.max_steps`
  the render is refused. A loop without a call (``{% for a in s %}{% for b in s %}``)
  counts like any other, and the verdict does not depend on the machine's load. A wall-clock deadline stays as a
  backstop for work no step sees (one huge sort).
- **values are bounded**: a string, list or dict made by a call, a filter, an operator or ``~`` may hold at most
  `max_value` items; an integer argument of a string method or filter at most `max_int_argument` (``'x'.ljust(N)``,
  ``center``, ``expandtabs`` allocate N at once); a format string may not hold a width or precision of 6 digits
  or more, nor repeat its fields past the value bound (``'{0}{0}...'.format(big)``), and ``replace`` on a string
  may not grow it past the bound in one step.
- ``range`` is capped (`max_range`), and ``**`` with an exponent above 64 is refused.

Each bound raises `CandidateRejected` with one line; the caller adds the file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import update_wrapper
from typing import Any

import jinja2
import jinja2.nodes as nodes
import jinja2.sandbox
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.visitor import NodeTransformer

from coco_sql.errors import CandidateRejected

STEPS = "__coco_steps"  # the global every for-loop's iterable passes through
CONCAT = "__coco_concat"  # the global every ``~`` becomes
INSTRUMENT_GLOBALS = frozenset({STEPS, CONCAT})
_WIDE = re.compile(r"\d{6,}")
# filters whose arguments can make a value far bigger than their input: widths, counts, format strings
_WIDTH_FILTERS = frozenset({"center", "indent", "wordwrap", "batch", "slice", "format", "replace", "join"})


@dataclass(frozen=True)
class JinjaLimits:
    max_steps: int = 1_000_000  # work over one project's render: a loop step, filter or operator 1, a call 10
    call_steps: int = 10  # a call (a macro's above all) costs about ten loop steps
    max_value: int = 1_000_000  # items in a string, list or dict the template makes
    max_range: int = 10_000
    max_int_argument: int = 10_000  # an integer argument of a string method or a filter


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple, dict, set, frozenset)) else 0


class _Instrument(NodeTransformer):
    """Every for-loop's iterable through `STEPS`, every ``~`` through `CONCAT`."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Call(nodes.Name(STEPS, "load"), [node.iter], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        items = nodes.List(list(node.nodes), lineno=node.lineno)
        return nodes.Call(nodes.Name(CONCAT, "load"), [items], [], None, None, lineno=node.lineno)


class BoundedEnvironment(jinja2.sandbox.SandboxedEnvironment):
    """Jinja's sandbox with the module docstring's bounds. `start(deadline_s)` before each render (of a project:
    the step count runs across its models)."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, limits: JinjaLimits | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.limits = limits or JinjaLimits()
        self.steps = 0
        self.deadline = float("inf")
        self.globals["range"] = self.capped_range
        self.globals[STEPS] = self.counted
        self.globals[CONCAT] = self.concat
        for name in ("lipsum", "cycler", "joiner"):
            self.globals.pop(name, None)
        self.filters = {name: self._bounded_filter(name, f) for name, f in self.filters.items()}

    def start(self, deadline_s: float) -> None:
        self.steps = 0
        self.deadline = time.monotonic() + deadline_s

    # -- work ------------------------------------------------------------------------------------------------
    def step(self, cost: int = 1) -> None:
        self.steps += cost
        if self.steps > self.limits.max_steps:
            raise CandidateRejected(
                f"the Jinja takes more than {self.limits.max_steps:,} steps (loops, calls, filters); simplify it"
            )
        if self.steps % 256 < cost:
            self.check_deadline()

    def check_deadline(self) -> None:
        if time.monotonic() > self.deadline:
            raise CandidateRejected("rendering took longer than its deadline")

    def counted(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.step()
            yield item

    def capped_range(self, *args: int) -> range:
        values = range(*args)
        if len(values) > self.limits.max_range:
            raise CandidateRejected(
                f"range() of {len(values)} items; at most {self.limits.max_range} allowed"
            )
        return values

    # -- values ----------------------------------------------------------------------------------------------
    def bounded(self, value: Any) -> Any:
        if _size(value) > self.limits.max_value:
            raise CandidateRejected(f"the Jinja builds a value of more than {self.limits.max_value:,} items")
        return value

    def concat(self, items: list[Any]) -> str:
        self.step()
        if sum(_size(item) for item in items) > self.limits.max_value:
            raise CandidateRejected(f"the Jinja builds a value of more than {self.limits.max_value:,} items")
        return "".join(str(item) for item in items)

    def _check_arguments(self, target: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A string method's or a width filter's arguments (`name` is the method's or filter's name; `target`
        the string it works on, if any): no huge integer, and no growth past the value bound in one step."""
        values = [*args, *kwargs.values()]
        integers = [abs(v) for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if integers and max(integers) > self.limits.max_int_argument:
            raise CandidateRejected(
                f"an argument of {max(integers)} is too large here (at most {self.limits.max_int_argument:,})"
            )
        if not isinstance(target, str):
            return
        biggest = max((_size(str(v)) for v in values), default=0)
        if name in ("format", "format_map", "do_format", "%"):
            if _WIDE.search(target):
                raise CandidateRejected("a format width or precision of 6 digits or more is not allowed")
            grown = max(target.count("{"), target.count("%")) * biggest
        elif name in ("replace", "do_replace") and len(args) >= 2:
            grown = (target.count(str(args[0])) if str(args[0]) else len(target) + 1) * _size(str(args[1]))
        elif name == "join":
            grown = len(target) * (_size(args[0]) if args else 0)
        else:
            grown = len(target) * max(integers, default=1)
        if len(target) + grown > self.limits.max_value * 10:
            raise CandidateRejected(f"the Jinja builds a value of more than {self.limits.max_value:,} items")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        __self.step(__self.limits.call_steps)
        method = getattr(__obj, "__wrapped__", __obj)
        target = getattr(method, "__self__", None)
        if isinstance(target, str):
            __self._check_arguments(target, getattr(method, "__name__", ""), args, kwargs)
        return __self.bounded(super().call(__context, __obj, *args, **kwargs))

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.step()
        if operator == "**" and isinstance(right, int) and abs(right) > 64:
            raise CandidateRejected(f"exponent {right} is too large (at most 64)")
        if operator == "*":
            sizes = [_size(x) for x in (left, right) if isinstance(x, (str, list, tuple))]
            counts = [x for x in (left, right) if isinstance(x, int) and not isinstance(x, bool)]
            if sizes and counts and sizes[0] * counts[0] > self.limits.max_range:
                raise CandidateRejected(f"a repeated sequence of more than {self.limits.max_range} items")
        if operator == "+" and _size(left) + _size(right) > self.limits.max_value:
            raise CandidateRejected(f"the Jinja builds a value of more than {self.limits.max_value:,} items")
        if operator == "%" and isinstance(left, str):
            values = (
                tuple(right.values())
                if isinstance(right, dict)
                else right
                if isinstance(right, tuple)
                else (right,)
            )
            self._check_arguments(left, "%", values, {})
        return self.bounded(super().call_binop(context, operator, left, right))

    def _bounded_filter(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def bounded_filter(*args: Any, **kwargs: Any) -> Any:
            self.step()
            # the filter's own arguments: after its context or environment, if it takes one, and its value
            plain = [a for a in args if not isinstance(a, (Context, EvalContext, jinja2.Environment))]
            value, rest = (plain[0], tuple(plain[1:])) if plain else (None, ())
            if name == "join":  # the separator, repeated once per item
                self._check_arguments(str(rest[0]) if rest else "", "join", (value,), {})
            elif name in _WIDTH_FILTERS:
                self._check_arguments(value, f"do_{name}", rest, kwargs)
            return self.bounded(function(*args, **kwargs))

        return update_wrapper(bounded_filter, function)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text: str = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            self._check_arguments(text, value.__name__, args, kwargs)
            return self.bounded(wrapped(*args, **kwargs))

        checked.__wrapped__ = value  # type: ignore[attr-defined]
        return checked

    # -- parsing ---------------------------------------------------------------------------------------------
    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        return _Instrument().visit(tree)


def bounded_environment(limits: JinjaLimits | None = None) -> BoundedEnvironment:
    """The environment a candidate's templates render in (``do`` and loop controls, strict undefined)."""
    return BoundedEnvironment(
        limits,
        extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"],
        undefined=jinja2.StrictUndefined,
    )
