"""What a primitive is in SQL, for PACE (`languages.base.PrimitiveAdapter`): a scalar DuckDB macro carried before
the program's one query (`primitives.sql_macros`), found among its guards (E2), joined by AND/OR (E3), moved by
sqlglot edits, and kept through the offline mutator's edit by expanding and folding back (P3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from coco_sql.mutate.pace import sql_insertions, sql_refine, sql_swap_calls
from coco_sql.primitives import adopt as adopting
from coco_sql.primitives import calls, edits, extraction

if TYPE_CHECKING:
    import numpy as np

    from coco_sql.mutate.base import MutationRequest, Mutator, Proposal
    from coco_sql.primitives.library import Primitive, PrimitiveLibrary


class SqlPrimitives:
    where_definitions = "as `CREATE MACRO` statements before the query, exactly as given"

    def call_set(self, code: str, names: frozenset[str], *, dialect: str) -> frozenset[str]:
        return calls.sql_call_set(code, names, dialect)

    def definitions(self, code: str, *, dialect: str) -> dict[str, str]:
        return calls.sql_definitions(code, dialect)

    def library_definition(self, primitive: Primitive, *, dialect: str) -> str:
        return calls.sql_library_definition(primitive, dialect)

    def extract(
        self,
        code: str,
        library: PrimitiveLibrary,
        *,
        origin_program: str | None,
        iteration: int,
        dialect: str,
        entry: str | None,
        rng: np.random.Generator | None,
        prefer: str | None,
        top: int,
    ) -> Primitive | None:
        return extraction.extract_sql(
            code, library, origin_program=origin_program, iteration=iteration, dialect=dialect, rng=rng,
            prefer=prefer, top=top,
        )  # fmt: skip

    def combine(
        self,
        a: Primitive,
        b: Primitive,
        library: PrimitiveLibrary,
        rng: np.random.Generator,
        *,
        iteration: int,
        dialect: str,
    ) -> Primitive | None:
        return extraction.combine_sql(a, b, library, rng, iteration=iteration, dialect=dialect)

    def adopt(
        self,
        code: str,
        library: PrimitiveLibrary,
        *,
        how: str,
        iteration: int,
        origin_program: str | None,
        inputs: Sequence[str] | None,
        dialect: str,
    ) -> Primitive:
        return adopting.adopt_sql(code, library, how, iteration, origin_program, dialect)

    def with_definitions(self, code: str, primitives: Sequence[Primitive], *, dialect: str) -> str:
        return edits.sql_with_definitions(code, primitives, dialect)

    def remove_definitions(self, code: str, names: set[str], *, dialect: str) -> str:
        return edits.sql_remove_definitions(code, names, dialect)

    def replace_calls(
        self, code: str, target: Primitive, replacement: Primitive, *, dialect: str
    ) -> str | None:
        return edits.sql_replace_calls(code, target, replacement, dialect)

    def swap_calls(self, code: str, target: Primitive, replacement: Primitive, *, dialect: str) -> str | None:
        return sql_swap_calls(code, target, replacement, dialect)

    def insertions(
        self, code: str, focus: Primitive, library: PrimitiveLibrary, *, dialect: str
    ) -> list[tuple[str, str]]:
        return sql_insertions(code, focus, dialect)

    def refine(
        self,
        inner: Mutator,
        request: MutationRequest,
        library: PrimitiveLibrary,
        rng: np.random.Generator,
        *,
        dialect: str,
    ) -> Proposal:
        return sql_refine(inner, request, library, rng, dialect)
