"""An option as coco-sql declares it (`Option`: its type, range, default, example and one line of doc), a table of
them (`OptionTable`, printable as rows), a settings dataclass whose fields carry their option (`setting`,
`settings_table`), and the checks every layer shares (`as_object`, `check_task_name`). `coco_sql.options` holds the
tables themselves; this module imports nothing of coco-sql but its errors."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from coco_sql.errors import CocoError, ConfigError

MAX_SEED = 2**31 - 1  # a seed any model provider and numpy accept
MAX_AMOUNT = 1e15  # a spend or cost limit past this is no limit, and float() of a larger int may overflow
TASK_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""A registered task's name: an identifier (it names files in a temporary folder, rows and a view)."""
PACK_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
"""A task pack's name (its directory's); a task registered before `TASK_NAME` may have one too."""


@dataclass(frozen=True)
class Option:
    """One option. `kind` is integer | number | boolean | string | choice | strings | object | amount (a number or
    a text such as '200000 tokens', parsed by its owner). `low`/`high` bound integers and numbers (inclusive
    unless `open_low`/`open_high`); `choices` are a choice's values. None is accepted where `nullable` (it means
    the default, or off)."""

    name: str
    kind: str
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()
    nullable: bool = False
    example: str = ""  # a value as a user writes it in SQL, for `coco_help` and the README

    @property
    def type(self) -> str:
        """The type as a table shows it."""
        return {"strings": "list of strings", "amount": "number or text"}.get(self.kind, self.kind)

    @property
    def range(self) -> str:
        """The values it takes, as a table shows them: '[1, 64]', '(0, 3600]', 'exact | numeric', ''."""
        if self.choices:
            return " | ".join(self.choices)
        if self.low is None and self.high is None:
            return ""
        low = "" if self.low is None else _number(self.low)
        high = "" if self.high is None else _number(self.high)
        return f"{'(' if self.open_low else '['}{low}, {high}{')' if self.open_high else ']'}"

    def expects(self) -> str:
        """What a value must be, for messages: 'an integer in [1, 64]'."""
        within = f" in {self.range}" if self.range and not self.choices else ""
        return {
            "integer": f"an integer{within}",
            "number": f"a number{within}",
            "boolean": "true or false",
            "string": "a string",
            "choice": f"one of {', '.join(self.choices)}",
            "strings": "a list of strings",
            "object": "an object such as {'key': value}",
            "amount": f"a number up to {_number(MAX_AMOUNT)} or a text such as '200000 tokens'",
        }[self.kind]

    def check(
        self, value: Any, *, error: type[CocoError] = ConfigError, prefix: str = "", label: str | None = None
    ) -> Any:
        """`value` as the option holds it (an integral float as an int, an int as a float for a number); else
        `error` with one line: '<prefix><label> must be an integer in [1, 64] (got 100000000)', the label
        "option 'islands'" unless given (a setting, a command-line flag)."""
        if value is None and self.nullable:
            return None
        checked = self._checked(value)
        if checked is _BAD:
            label = label or f"option {self.name!r}"
            raise error(f"{prefix}{label} must be {self.expects()} (got {_shown(value)})")
        return checked

    def _checked(self, value: Any) -> Any:
        if self.kind in ("integer", "number"):
            return self._in_range(value)
        if self.kind == "boolean":
            return value if isinstance(value, bool) else _BAD
        if self.kind == "string":
            return value if isinstance(value, str) else _BAD
        if self.kind == "choice":
            return value if isinstance(value, str) and value in self.choices else _BAD
        if self.kind == "strings":
            ok = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
            return list(value) if ok else _BAD
        if self.kind == "object":
            return value if isinstance(value, Mapping) else _BAD
        if isinstance(value, str):  # amount
            return value
        number = _as_number(value)
        return value if number is not None and abs(number) <= MAX_AMOUNT else _BAD

    def _in_range(self, value: Any) -> Any:
        number = _as_number(value)
        if number is None:
            return _BAD
        if self.kind == "integer":
            if isinstance(value, float) and not value.is_integer():
                return _BAD
            number = int(value)
        else:
            number = float(number)
        low_ok = self.low is None or (number > self.low if self.open_low else number >= self.low)
        high_ok = self.high is None or (number < self.high if self.open_high else number <= self.high)
        return number if low_ok and high_ok else _BAD


@dataclass(frozen=True)
class OptionTable:
    """The options of one call, in the order a table shows them."""

    title: str
    options: tuple[Option, ...]

    def __getitem__(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        raise KeyError(name)

    def __iter__(self) -> Iterator[Option]:
        return iter(self.options)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.options)

    def default(self, name: str) -> Any:
        return self[name].default

    def check(
        self, given: Mapping[str, Any], *, error: type[CocoError] = ConfigError, prefix: str = ""
    ) -> dict[str, Any]:
        """`given` with each value checked (`Option.check`); an unknown key is `error` naming the known ones."""
        unknown = sorted((str(k) for k in given if k not in self.names), key=str)
        if unknown:
            raise error(f"{prefix}unknown option {unknown[0]!r} (options: {', '.join(self.names)})")
        return {name: self[name].check(value, error=error, prefix=prefix) for name, value in given.items()}

    def rows(self) -> list[dict[str, str]]:
        """The table as plain rows: name, type, range, default, example, doc (all text)."""
        return [
            {"name": o.name, "type": o.type, "range": o.range, "default": _default(o.default),
             "example": o.example, "doc": o.doc}
            for o in self.options
        ]  # fmt: skip


def setting(default: Any, doc: str, *, kind: str | None = None, **bounds: Any) -> Any:
    """A field of a settings dataclass (a kind's offline settings, `languages.kind.OfflineSettings`) that carries
    its option: the field's type, default, range and doc are declared once, here (`settings_table` reads them).
    `kind` defaults to the default's type (bool: boolean, int: integer, float: number, str: string, list:
    strings)."""
    kind = kind or _KIND_OF.get(type(default), "object")
    option = Option("", kind, default, doc, **bounds)
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata={"option": option})
    return field(default=default, metadata={"option": option})


def settings_table(cls: type, title: str) -> OptionTable:
    """The option table of a settings dataclass whose fields are `setting`s, in field order."""
    return OptionTable(
        title,
        tuple(replace(f.metadata["option"], name=f.name) for f in fields(cls) if "option" in f.metadata),
    )


_KIND_OF = {bool: "boolean", int: "integer", float: "number", str: "string", list: "strings", dict: "object"}


def as_object(value: Any, what: str, *, error: type[CocoError] = ConfigError) -> Mapping[str, Any]:
    """`value` when it is an object (a mapping), {} for None; else one line saying `what` must be one."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise error(f"{what} must be an object such as {{'seed': 1}} (got {_kind(value)} {_shown(value)})")
    return value


def check_task_name(name: Any, *, error: type[CocoError] = ConfigError, stored: bool = False) -> str:
    """`name` when it matches `TASK_NAME` (or, for a task `stored` in a store already, `PACK_NAME`, which older
    versions registered: neither holds a path); else one line, before anything is written under that name."""
    fits = isinstance(name, str) and (
        TASK_NAME.fullmatch(name) is not None or (stored and PACK_NAME.fullmatch(name) is not None)
    )
    if not fits:
        raise error(
            f"a task name is a letter or _ then up to 63 letters, digits or _ (got {_shown(name)}): it names a "
            "folder, rows and a view, so it may not be a path"
        )
    return name


_BAD = object()


def _as_number(value: Any) -> float | None:
    """A finite int or float (not a bool), as a float; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) <= 2**1000 else None
    return value if math.isfinite(value) else None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else f"{value:g}"


def _default(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping) and not value:
        return "{}"
    if isinstance(value, Sequence) and not isinstance(value, str) and not value:
        return "[]"
    return str(value)


def _kind(value: Any) -> str:
    return {str: "a string", list: "a list", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
