"""What a primitive is in Python, for PACE (`languages.base.PrimitiveAdapter`): a self-contained top-level
function the program carries (`primitives.python_defs`), found among the entry function's helpers and
sub-expressions (E2), mixed by a weighted sum (E3), inserted as a weighted term of an argmin/argmax objective
(P1, P4); P3 is the Python operators' edit as it stands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from coco_sql.mutate.pace import python_insertions, python_swap_calls
from coco_sql.primitives import adopt as adopting
from coco_sql.primitives import calls, extraction
from coco_sql.primitives.python_defs import insert_definitions, remove_definitions, rename_calls

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
        return adopting.adopt_python(code, library, how, iteration, origin_program, inputs)

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
