"""Admit a primitive someone wrote (a model answering E1, E2 or E3, or a seed file) into the library.

PACE's function contract for a new EAP ("E1: Initialing EAP", "E2: EAP Extraction", "E3: EAP Generation"):
exactly one function, "self-contained, and restricted to inputs in the target signature. It must neither call
another EAP nor reimplement the target function", and, for E3, not "a superficial variant through symbol
renaming". `adopt` checks what can be checked on the text, and gives it the library's name (`p_<short>`); each
kind checks its own form (`languages.sql.pace_extract.adopt_sql`, `languages.python.pace_extract.adopt_python`):

- SQL: one scalar `CREATE MACRO` (the rules of `sqlkit.macros`), whose body calls no library primitive;
- Python: one `def` (plus the imports it needs), reading only its parameters, builtins and its imports,
  calling no library primitive and not itself; with `inputs` (the target's parameters), its parameters must
  be among them (a SQL macro's parameters are bound to any argument expressions, so they are not checked);
- either: not equal, up to its name and parameter names, to a primitive already in the library.

A definition that breaks a rule raises `CandidateRejected` with a one-line reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from coco_sql.errors import CandidateRejected
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.plugins import kind
from coco_sql.primitives.library import HOWS, Primitive, PrimitiveLibrary


def adopt(
    code: str,
    language: str,
    library: PrimitiveLibrary,
    *,
    how: str,
    iteration: int,
    origin_program: str | None = None,
    inputs: Sequence[str] | None = None,
    dialect: str = SANDBOX_DIALECT,
) -> Primitive:
    """The library's `Primitive` for one definition `code` (see the module docstring for the rules)."""
    if how not in HOWS:
        raise ValueError(f"unknown how {how!r}")
    adapter = kind(language).primitives
    if adapter is None:
        raise CandidateRejected(f"{language} programs have no primitives")
    return adapter.adopt(
        code,
        library,
        how=how,
        iteration=iteration,
        origin_program=origin_program,
        inputs=inputs,
        dialect=dialect,
    )


def check_inputs(name: str, params: Sequence[str], inputs: Sequence[str] | None) -> None:
    """ "restricted to inputs in the target signature": every parameter is one of the target's."""
    if inputs is None:
        return
    outside = [p for p in params if p not in set(inputs)]
    if outside:
        raise CandidateRejected(
            f"{name} takes {', '.join(outside)}, which the target function does not have "
            f"(its inputs: {', '.join(inputs)})"
        )


def library_name(written: str, library: PrimitiveLibrary) -> str:
    """The written name when it is a free `p_` name, else the library's unique name made from it."""
    if written.startswith("p_") and written == written.lower() and written not in library:
        return written
    return library.unique_name(written)
