"""Admit a primitive someone wrote (a model answering E1, E2 or E3, or a seed file) into the library.

PACE's function contract for a new EAP ("E1: Initialing EAP", "E2: EAP Extraction", "E3: EAP Generation"):
exactly one function, "self-contained, and restricted to inputs in the target signature. It must neither call
another EAP nor reimplement the target function", and, for E3, not "a superficial variant through symbol
renaming". `adopt` checks what can be checked on the text, and gives it the library's name (`p_<short>`):

- SQL: one scalar `CREATE MACRO` (the rules of `sqlkit.macros`), whose body calls no library primitive;
- Python: one `def` (plus the imports it needs), reading only its parameters, builtins and its imports,
  calling no library primitive and not itself; with `inputs` (the target's parameters), its parameters must
  be among them (a SQL macro's parameters are bound to any argument expressions, so they are not checked);
- either: not equal, up to its name and parameter names, to a primitive already in the library.

A definition that breaks a rule raises `CandidateRejected` with a one-line reason.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from sqlglot import exp

from coco_sql.errors import CandidateRejected
from coco_sql.plugins import kind
from coco_sql.primitives.calls import parse_python, python_calls
from coco_sql.primitives.extraction import (
    canonical_python,
    canonical_sql,
    library_python_forms,
    library_sql_forms,
)
from coco_sql.primitives.library import HOWS, Primitive, PrimitiveLibrary
from coco_sql.primitives.python_defs import free_names, module_imports, params_of, rename_def, render
from coco_sql.sqlkit.macros import render_macro, split_macros


def adopt(
    code: str,
    language: str,
    library: PrimitiveLibrary,
    *,
    how: str,
    iteration: int,
    origin_program: str | None = None,
    inputs: Sequence[str] | None = None,
    dialect: str = "duckdb",
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


def adopt_sql(
    code: str,
    library: PrimitiveLibrary,
    how: str,
    iteration: int,
    origin_program: str | None,
    dialect: str,
) -> Primitive:
    macros, _ = split_macros(f"{code.strip().rstrip(';')};\nSELECT 1", dialect)
    if len(macros) != 1:
        raise CandidateRejected(f"a SQL primitive is one CREATE MACRO statement, not {len(macros)}")
    macro = macros[0]
    known = set(library.names("sql"))
    called = sorted({c.name.lower() for c in macro.body.find_all(exp.Anonymous)} & known)
    if called:
        raise CandidateRejected(
            f"macro {macro.name} calls {', '.join(called)}: a primitive must not call another"
        )
    body = macro.body.sql(dialect=dialect)
    if canonical_sql(macro.params, body, dialect) in library_sql_forms(library, dialect):
        raise CandidateRejected(f"macro {macro.name} is a primitive the library already has")
    name = _name(macro.name, library)
    return Primitive(
        name, "sql", render_macro(name, macro.params, macro.body, dialect),
        f"{name}({', '.join(macro.params)})", origin_program, iteration, how,
    )  # fmt: skip


def adopt_python(
    code: str,
    library: PrimitiveLibrary,
    how: str,
    iteration: int,
    origin_program: str | None,
    inputs: Sequence[str] | None,
) -> Primitive:
    tree = parse_python(code)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    others = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.Import | ast.ImportFrom)]
    if len(functions) != 1 or others:
        raise CandidateRejected(
            f"a Python primitive is one def and its imports (got {len(functions)} defs and "
            f"{len(others)} other statements)"
        )
    function = functions[0]
    if function.args.vararg or function.args.kwarg or function.args.kwonlyargs:
        raise CandidateRejected(f"{function.name} must take plain positional parameters")
    imports = module_imports(tree)
    called = sorted(python_calls(function, library.names("python")))
    if called:
        raise CandidateRejected(
            f"{function.name} calls {', '.join(called)}: a primitive must not call another"
        )
    free = free_names(function) - set(imports)
    if free:
        raise CandidateRejected(
            f"{function.name} reads {', '.join(sorted(free))}, which it neither defines nor imports: a primitive "
            "is self-contained"
        )
    params = params_of(function)
    _check_inputs(function.name, params, inputs)
    if canonical_python(function) in library_python_forms(library):
        raise CandidateRejected(f"{function.name} is a primitive the library already has")
    name = _name(function.name, library)
    needed = sorted({imports[a].statement for a in _names_used(function) if a in imports})
    return Primitive(
        name, "python", render(rename_def(function, name), needed), f"{name}({', '.join(params)})",
        origin_program, iteration, how,
    )  # fmt: skip


def _names_used(function: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}


def _check_inputs(name: str, params: Sequence[str], inputs: Sequence[str] | None) -> None:
    """ "restricted to inputs in the target signature": every parameter is one of the target's."""
    if inputs is None:
        return
    outside = [p for p in params if p not in set(inputs)]
    if outside:
        raise CandidateRejected(
            f"{name} takes {', '.join(outside)}, which the target function does not have "
            f"(its inputs: {', '.join(inputs)})"
        )


def _name(written: str, library: PrimitiveLibrary) -> str:
    """The written name when it is a free `p_` name, else the library's unique name made from it."""
    if written.startswith("p_") and written == written.lower() and written not in library:
        return written
    return library.unique_name(written)
