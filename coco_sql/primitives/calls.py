"""Call sets and definitions of primitives in a program, read on its AST (sqlglot for SQL, `ast` for Python).

PACE, "Primitive-Aware Operators": C(A) is the set of primitives program A invokes; the operator contracts are
relations between the parents' and the child's call sets. Here:

- SQL: the library names the QUERY calls, after `sqlkit.macros.split_macros` (a macro defined but never called is
  not in the call set, and macros cannot call each other);
- Python: the library names called (`ast.Call` of an `ast.Name`) anywhere inside a top-level function that is
  not itself one of the primitives.

`definitions` gives each definition the program carries in one normal form (SQL: the macro written by sqlglot;
Python: `ast.unparse` of the `def`), so a caller can tell whether a program's copy of `p_x` is the library's.
A program that does not parse raises `CandidateRejected` with a one-line reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import TYPE_CHECKING

from coco_sql.errors import CandidateRejected
from coco_sql.plugins import kind
from coco_sql.primitives.library import Primitive
from coco_sql.sqlkit.macros import called_macros, normalised, split_macros
from coco_sql.sqlkit.parsing import parse_statement

if TYPE_CHECKING:
    from coco_sql.languages.kind import PrimitiveAdapter


def parse_python(code: str) -> ast.Module:
    """The module, or CandidateRejected with the line and the parser's message."""
    try:
        return ast.parse(code)
    except SyntaxError as error:
        raise CandidateRejected(f"line {error.lineno}: the program does not parse: {error.msg}") from None
    except ValueError as error:
        raise CandidateRejected(f"the program does not parse: {error}") from None


def top_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """name -> the (last) top-level `def` of that name."""
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def python_calls(node: ast.AST, names: Iterable[str]) -> set[str]:
    """The names among `names` that `node` calls by plain name."""
    wanted = set(names)
    return {
        n.func.id
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in wanted
    }


def call_set(code: str, language: str, names: Iterable[str], *, dialect: str = "duckdb") -> frozenset[str]:
    """C(A) restricted to `names` (the library's primitives of the program's language)."""
    return adapter(language).call_set(code, frozenset(names), dialect=dialect)


def definitions(code: str, language: str, *, dialect: str = "duckdb") -> dict[str, str]:
    """name -> normalised definition text of every macro (SQL) or top-level `def` (Python) in `code`."""
    return adapter(language).definitions(code, dialect=dialect)


def library_definition(primitive: Primitive, *, dialect: str = "duckdb") -> str:
    """The normalised definition of a library primitive (its code read like a program's, `definitions`)."""
    return adapter(primitive.language).library_definition(primitive, dialect=dialect)


def adapter(language: str) -> PrimitiveAdapter:
    """The kind's PACE adapter; ValueError for a kind without primitives (the loop runs PACE only with one)."""
    adapter = kind(language).primitives
    if adapter is None:
        raise ValueError(f"{language} programs have no primitives")
    return adapter


# -- SQL and Python (their kinds' adapters, `languages.sql.primitives`, `languages.python.primitives`) --------
def sql_call_set(code: str, names: frozenset[str], dialect: str) -> frozenset[str]:
    _, query_text = split_macros(code, dialect)
    return called_macros(parse_statement(query_text, dialect), frozenset(n.lower() for n in names))


def python_call_set(code: str, names: frozenset[str]) -> frozenset[str]:
    tree = parse_python(code)
    called: set[str] = set()
    for name, function in top_functions(tree).items():
        if name not in names:
            called |= python_calls(function, names)
    return frozenset(called)


def sql_definitions(code: str, dialect: str) -> dict[str, str]:
    macros, _ = split_macros(code, dialect)
    return {m.name: normalised(m, dialect) for m in macros}


def python_definitions(code: str) -> dict[str, str]:
    return {name: ast.unparse(node) for name, node in top_functions(parse_python(code)).items()}


def sql_library_definition(primitive: Primitive, dialect: str) -> str:
    macros, _ = split_macros(f"{primitive.code.rstrip().rstrip(';')};\nSELECT 1", dialect)
    return normalised(macros[0], dialect)
