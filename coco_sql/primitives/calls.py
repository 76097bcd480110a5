"""Call sets and definitions of primitives in a program, read by its kind (`KindPlugin.primitives`).

PACE, "Primitive-Aware Operators": C(A) is the set of primitives program A invokes; the operator contracts are
relations between the parents' and the child's call sets. Each kind reads them on its own AST (SQL:
`languages.sql.pace_edits`, the macros the query calls; Python: `languages.python.pace_defs`, the names called
inside a top-level function that is not itself a primitive). `definitions` gives each definition the program
carries in one normal form, so a caller can tell whether a program's copy of `p_x` is the library's. A program
that does not parse raises `CandidateRejected` with a one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coco_sql.plugin_loader import SANDBOX_DIALECT, load_kind
from coco_sql.primitives.library import Primitive


def call_set(
    code: str, language: str, names: Iterable[str], *, dialect: str = SANDBOX_DIALECT
) -> frozenset[str]:
    """C(A) restricted to `names` (the library's primitives of the program's language)."""
    return adapter(language).call_set(code, frozenset(names), dialect=dialect)


def definitions(code: str, language: str, *, dialect: str = SANDBOX_DIALECT) -> dict[str, str]:
    """name -> normalised definition text of every macro (SQL) or top-level `def` (Python) in `code`."""
    return adapter(language).definitions(code, dialect=dialect)


def library_definition(primitive: Primitive, *, dialect: str = SANDBOX_DIALECT) -> str:
    """The normalised definition of a library primitive (its code read like a program's, `definitions`)."""
    return adapter(primitive.language).library_definition(primitive, dialect=dialect)


def adapter(language: str) -> Any:
    """The kind's PACE adapter, a `languages.kind.PrimitiveAdapter` (not named here: that protocol names PACE's own
    types, so naming it back would close a type-import circle); ValueError for a kind without primitives (the loop
    runs PACE only with one)."""
    adapter = load_kind(language).primitives
    if adapter is None:
        raise ValueError(f"{language} programs have no primitives")
    return adapter
