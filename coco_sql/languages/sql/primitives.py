"""What a primitive is in SQL, for PACE (`languages.base.PrimitiveAdapter`): a scalar DuckDB macro carried before
the program's one query (`sqlkit.macros`), found among its guards (E2), joined by AND/OR (E3), moved by
sqlglot edits, and kept through the offline mutator's edit by expanding and folding back (P3)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from coco_sql.errors import CandidateRejected
from coco_sql.languages.sql import pace_edits as edits
from coco_sql.languages.sql import pace_extract as extraction
from coco_sql.languages.sql.pace_edits import refactor_into_call, sql_with_definitions
from coco_sql.mutate.pace import signature_params
from coco_sql.sqlkit.macros import expand_program, split_macros

if TYPE_CHECKING:
    import numpy as np

    from coco_sql.mutate.base import MutationRequest, Mutator, Proposal
    from coco_sql.primitives.library import Primitive, PrimitiveLibrary


class SqlPrimitives:
    where_definitions = "as `CREATE MACRO` statements before the query, exactly as given"

    def call_set(self, code: str, names: frozenset[str], *, dialect: str) -> frozenset[str]:
        return edits.sql_call_set(code, names, dialect)

    def definitions(self, code: str, *, dialect: str) -> dict[str, str]:
        return edits.sql_definitions(code, dialect)

    def library_definition(self, primitive: Primitive, *, dialect: str) -> str:
        return edits.sql_library_definition(primitive, dialect)

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
        return extraction.adopt_sql(code, library, how, iteration, origin_program, dialect)

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


# -- PACE's operators on a SQL program (`mutate.pace` draws them) --------------------------------------------
def sql_swap_calls(code: str, target: Primitive, replacement: Primitive, dialect: str) -> str | None:
    """`swap_calls` for SQL: on the query's sqlglot tree, its macros kept in front."""
    own = signature_params(replacement)
    macros, query_text = split_macros(code, dialect)
    try:
        query = sqlglot.parse_one(query_text, read=dialect)
    except sqlglot.errors.ParseError:
        return None
    calls = [n for n in query.find_all(exp.Anonymous) if str(n.this).lower() == target.name]
    if not calls:
        return None
    for node in calls:
        node.replace(exp.Anonymous(this=replacement.name, expressions=[exp.column(p) for p in own]))
    body = query.sql(dialect=dialect, pretty=True, normalize_functions=False)
    return "\n".join([*(f"{m.text};" for m in macros), body])


def sql_insertions(code: str, focus: Primitive, dialect: str) -> list[tuple[str, str]]:
    """(description, program) drafts that call `focus`: its body folded into a call where the parent holds it,
    then a new first arm `WHEN focus(params) THEN v` in each CASE, for each value v that CASE returns."""
    drafts: list[tuple[str, str]] = []
    folded = refactor_into_call(code, focus, dialect=dialect)
    if folded is not None:
        drafts.append((f"its body, already in the program, becomes a call of {focus.name}", folded))
    macros, query_text = split_macros(code, dialect)
    try:
        query = sqlglot.parse_one(query_text, read=dialect)
    except sqlglot.errors.ParseError:
        return drafts
    call = exp.Anonymous(this=focus.name, expressions=[exp.column(p) for p in signature_params(focus)])
    header = [f"{m.text};" for m in macros]
    for index, case in enumerate(query.find_all(exp.Case)):
        values: list[exp.Expression] = []
        for branch in [
            *(arm.args.get("true") for arm in case.args.get("ifs") or []),
            case.args.get("default"),
        ]:
            if isinstance(branch, exp.Literal) and not any(branch == v for v in values):
                values.append(branch)
        for value in values:
            edited = query.copy()
            target = list(edited.find_all(exp.Case))[index]
            target.set("ifs", [exp.If(this=call.copy(), true=value.copy()), *(target.args.get("ifs") or [])])
            body = edited.sql(dialect=dialect, pretty=True, normalize_functions=False)
            program = "\n".join([*header, body])
            try:
                program = sql_with_definitions(program, [focus], dialect)
            except CandidateRejected:
                continue
            drafts.append(
                (
                    f"new first arm WHEN {focus.name} THEN {value.sql(dialect=dialect)} in CASE {index}",
                    program,
                )
            )
    return drafts


def fold(code: str, primitives: list[Primitive], dialect: str) -> str:
    """A SQL program (no macros) with each primitive's body folded back into calls, and the definitions of the
    primitives it then calls put in front: the inverse of expansion for the calls an edit left intact."""
    for primitive in primitives:
        folded = refactor_into_call(code, primitive, dialect=dialect)
        if folded is not None:
            code = folded
    return code


def _pretty(code: str, dialect: str) -> str:
    """The expanded program as the inner mutator expects it: a call that was a whole WHEN condition is a bare
    condition again (`WHEN p1 = 4`, not `WHEN (p1 = 4)`), so its rule operators and the joint fit see the
    point guards they know."""
    try:
        query = sqlglot.parse_one(code, read=dialect)
    except sqlglot.errors.ParseError:
        return code
    bare = query.transform(
        lambda n: (
            n.this if isinstance(n, exp.Paren) and isinstance(n.parent, exp.If) and n.arg_key == "this" else n
        )
    )
    return bare.sql(dialect=dialect, pretty=True)


def sql_refine(
    inner: Mutator,
    request: MutationRequest,
    library: PrimitiveLibrary,
    rng: np.random.Generator,
    dialect: str,
) -> Proposal:
    """P3 for SQL: the inner mutator edits the parent with its macros expanded, and the macro bodies still
    present afterwards are folded back into calls."""
    macros, _ = split_macros(request.parent.code, dialect)
    expanded = expand_program(request.parent.code, dialect)
    if not macros or expanded is None:
        return inner.propose(request, rng)
    flat = replace(request.parent, code=_pretty(expanded, dialect))
    proposal = inner.propose(replace(request, parent=flat), rng)
    return replace(proposal, code=fold(proposal.code, [library.get(m.name) for m in macros], dialect))
