"""A run's primitive library (PACE's EAP set E_t): an ordered, immutable view of its `primitives` rows.

The records themselves (`Primitive`, `PrimitiveTrial`) live in `coco_sql.store.records`, one dataclass per table
like every other record, and are re-exported here. The library's order is (created_iteration, name): the same
whether it was built live, one `add` at a time, or read back on resume (`from_rows`), so resume stays exact.
Names are `p_<short>`, lower-case, unique within the run (`unique_name`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from coco_sql.plugin_loader import kind_names
from coco_sql.store.records import Primitive, PrimitiveTrial

__all__ = ["HOWS", "OPERATORS", "Primitive", "PrimitiveLibrary", "PrimitiveTrial"]

HOWS = ("extracted", "generated", "seeded")
OPERATORS = ("P1", "P2", "P3", "P4")
MAX_NAME_CHARS = 28
_NOT_NAME = re.compile(r"[^a-z0-9_]+")


def _order(primitive: Primitive) -> tuple[int, str]:
    return primitive.created_iteration, primitive.name


@dataclass(frozen=True)
class PrimitiveLibrary:
    """The primitives of one run. `add` returns a new library; the loop's run state holds the current one."""

    primitives: tuple[Primitive, ...] = ()

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.primitives, key=_order))
        names = [p.name for p in ordered]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate primitive names in {names}")
        for primitive in ordered:
            if primitive.language not in kind_names() or primitive.how not in HOWS:
                raise ValueError(
                    f"primitive {primitive.name}: language {primitive.language!r}, how {primitive.how!r}"
                )
        object.__setattr__(self, "primitives", ordered)

    @classmethod
    def from_rows(cls, rows: Iterable[Primitive]) -> PrimitiveLibrary:
        """The library of a resumed run, from `Warehouse.primitives(run_id)`."""
        return cls(tuple(rows))

    def add(self, primitive: Primitive) -> PrimitiveLibrary:
        """A library with `primitive` too; ValueError when its name is taken."""
        if primitive.name in self:
            raise ValueError(f"primitive {primitive.name} is already in the library")
        return PrimitiveLibrary((*self.primitives, primitive))

    def get(self, name: str) -> Primitive:
        """The primitive called `name`; KeyError naming it when absent."""
        for primitive in self.primitives:
            if primitive.name == name:
                return primitive
        raise KeyError(f"no primitive {name!r} in the library")

    def names(self, language: str | None = None) -> tuple[str, ...]:
        return tuple(p.name for p in self.primitives if language is None or p.language == language)

    def for_language(self, language: str) -> tuple[Primitive, ...]:
        return tuple(p for p in self.primitives if p.language == language)

    def unique_name(self, hint: str) -> str:
        """`p_<hint>` made a lower-case identifier, at most MAX_NAME_CHARS long, with a number appended when the
        name is taken: the name a new primitive gets."""
        short = _NOT_NAME.sub("_", hint.lower()).strip("_").removeprefix("p_") or "prim"
        base = f"p_{short}"[:MAX_NAME_CHARS].rstrip("_")
        taken = set(self.names())
        if base not in taken:
            return base
        n = 2
        while f"{base}_{n}" in taken:
            n += 1
        return f"{base}_{n}"

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.primitives)

    def __iter__(self) -> Iterator[Primitive]:
        return iter(self.primitives)

    def __len__(self) -> int:
        return len(self.primitives)
