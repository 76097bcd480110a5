"""What a primitive is in Python, for PACE (`languages.base.PrimitiveAdapter`): a self-contained top-level
function the program carries (`pace_defs`), found among the entry function's helpers and
sub-expressions (E2), mixed by a weighted sum (E3), inserted as a weighted term of an argmin/argmax objective
(P1, P4); P3 is the Python operators' edit as it stands."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING

from coco_sql.languages.python import pace_defs as calls
from coco_sql.languages.python import pace_extract as extraction
from coco_sql.languages.python.ops import insert_terms
from coco_sql.languages.python.pace_defs import (
    definition_dumps,
    insert_definitions,
    remove_definitions,
    rename_calls,
)
from coco_sql.mutate.pace import signature_params

if TYPE_CHECKING:
    import numpy as np

    from coco_sql.mutate.base import MutationRequest, Mutator, Proposal
    from coco_sql.primitives.library import Primitive, PrimitiveLibrary


class PythonPrimitives:
    where_definitions = "as top-level functions, exactly as given"

    def call_set(self, code: str, names: frozenset[str], *, dialect: str) -> frozenset[str]:
        return calls.python_call_set(code, names)

    def definitions(self, code: str, *, dialect: str) -> dict[str, str]:
        return calls.python_definitions(code)

    def library_definition(self, primitive: Primitive, *, dialect: str) -> str:
        return calls.python_definitions(primitive.code)[primitive.name]

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
        return extraction.extract_python(
            code, library, origin_program=origin_program, iteration=iteration, entry=entry, rng=rng,
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
        return extraction.combine_python(a, b, library, rng, iteration=iteration)

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
        return extraction.adopt_python(code, library, how, iteration, origin_program, inputs)

    def with_definitions(self, code: str, primitives: Sequence[Primitive], *, dialect: str) -> str:
        return insert_definitions(code, [p.code for p in primitives])

    def remove_definitions(self, code: str, names: set[str], *, dialect: str) -> str:
        return remove_definitions(code, names)

    def replace_calls(
        self, code: str, target: Primitive, replacement: Primitive, *, dialect: str
    ) -> str | None:
        return rename_calls(code, target.name, replacement.name)

    def swap_calls(self, code: str, target: Primitive, replacement: Primitive, *, dialect: str) -> str | None:
        return python_swap_calls(code, target, replacement)

    def insertions(
        self, code: str, focus: Primitive, library: PrimitiveLibrary, *, dialect: str
    ) -> list[tuple[str, str]]:
        return python_insertions(code, focus, frozenset(library.names("python")))

    def refine(
        self,
        inner: Mutator,
        request: MutationRequest,
        library: PrimitiveLibrary,
        rng: np.random.Generator,
        *,
        dialect: str,
    ) -> Proposal:
        return inner.propose(request, rng)


# -- PACE's operators on a Python program (`mutate.pace` draws them) -----------------------------------------
def python_swap_calls(code: str, target: Primitive, replacement: Primitive) -> str | None:
    """`swap_calls` for Python: on the module's `ast`."""
    own = signature_params(replacement)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    hits = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == target.name:
            node.func.id, node.args, node.keywords = (
                replacement.name,
                [ast.Name(p, ast.Load()) for p in own],
                [],
            )
            hits += 1
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n" if hits else None


def python_insertions(
    code: str, focus: Primitive, frozen: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """(description, program) drafts that call `focus` as a new weighted term of an argmin/argmax objective,
    its arguments the parameters of the same names; never inside a `frozen` function (a primitive)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    params = signature_params(focus)
    call = ast.Call(
        func=ast.Name(focus.name, ast.Load()), args=[ast.Name(p, ast.Load()) for p in params], keywords=[]
    )
    drafts = []
    kept = definition_dumps(tree, frozen)
    for edit in insert_terms(tree, [(call, None)]):
        if definition_dumps(ast.parse(edit.code), frozen) == kept:
            drafts.append((edit.approach, insert_definitions(edit.code, [focus.code])))
    return drafts
