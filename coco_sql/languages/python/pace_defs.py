"""Python primitives as top-level `def`s carried inside the program module, next to the entry function.

A Python primitive's `code` is its `def` preceded by the import lines it needs (`import numpy as np`), so it is
self-contained: `with_definitions` hoists those imports to the module's import block and puts the `def` after
them. These helpers edit the program's TEXT where they can (insertion and removal by line, renaming by column),
so a program keeps its comments and layout; `ast.unparse` writes only new definitions.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from coco_sql.errors import CandidateRejected

BUILTIN_NAMES: frozenset[str] = frozenset(dir(builtins))


@dataclass(frozen=True)
class ImportLine:
    """One name a module-level import binds, as the single-name statement that binds it."""

    alias: str
    statement: str  # e.g. "import numpy as np", "from math import sqrt"


def module_imports(tree: ast.Module) -> dict[str, ImportLine]:
    """alias -> its import, for the module-level `import` / `from ... import` statements."""
    found: dict[str, ImportLine] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                alias = a.asname or a.name.partition(".")[0]
                found[alias] = ImportLine(alias, ast.unparse(ast.Import(names=[a])))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    statement = ast.unparse(ast.ImportFrom(module=node.module, names=[a], level=0))
                    found[a.asname or a.name] = ImportLine(a.asname or a.name, statement)
    return found


def bound_names(function: ast.FunctionDef | ast.Lambda) -> set[str]:
    """Every name a function binds: its parameters, assignment and loop targets, nested defs, imports."""
    bound: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.ExceptHandler):
            if node is not function and node.name:
                bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).partition(".")[0] for a in node.names)
    return bound


def loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def free_names(function: ast.FunctionDef) -> set[str]:
    """Names a function reads that it does not bind and that are not builtins (globals it depends on)."""
    return loaded_names(function) - bound_names(function) - BUILTIN_NAMES


def params_of(function: ast.FunctionDef) -> list[str]:
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args)]


def split_code(code: str) -> tuple[list[str], ast.FunctionDef]:
    """A primitive's code as (its import statements, its one `def`)."""
    tree = parse_python(code)
    imports = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(functions) != 1:
        raise ValueError(f"a Python primitive holds one def, not {len(functions)}")
    return imports, functions[0]


def render(function: ast.FunctionDef, imports: Sequence[str] = ()) -> str:
    """A primitive's code: its import lines, a blank line, its def."""
    text = ast.unparse(ast.fix_missing_locations(function))
    return "\n".join(sorted(set(imports))) + "\n\n\n" + text if imports else text


def rename_def(function: ast.FunctionDef, new: str) -> ast.FunctionDef:
    """A copy of `function` under another name, without decorators."""
    renamed = ast.FunctionDef(
        name=new,
        args=function.args,
        body=function.body,
        decorator_list=[],
        returns=function.returns,
        type_comment=None,
        type_params=[],
    )
    return ast.fix_missing_locations(ast.copy_location(renamed, function))


def insertion_line(tree: ast.Module) -> int:
    """The 0-based line index after the module's leading docstring and import block."""
    line = 0
    for i, node in enumerate(tree.body):
        is_doc = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if is_doc or isinstance(node, ast.Import | ast.ImportFrom):
            line = node.end_lineno or line
        else:
            break
    return line


def insert_definitions(code: str, definitions: Iterable[str]) -> str:
    """`code` with each primitive's code (imports, def) added: the imports whose alias the module does not bind
    yet, then the defs, after the module's docstring and imports. A def already present by name is skipped."""
    tree = parse_python(code)
    have = set(top_functions(tree))
    bound = set(module_imports(tree))
    new_imports: list[str] = []
    new_defs: list[str] = []
    for definition in definitions:
        imports, function = split_code(definition)
        if function.name in have:
            continue
        have.add(function.name)
        for statement in imports:
            for alias in module_imports(ast.parse(statement)).values():
                if alias.alias not in bound:
                    bound.add(alias.alias)
                    new_imports.append(alias.statement)
        new_defs.append(ast.unparse(function))
    if not new_defs:
        return code
    lines = code.splitlines()
    at = insertion_line(tree)
    top = "\n".join([*lines[:at], *new_imports]).strip("\n")
    rest = "\n".join(lines[at:]).strip("\n")
    text = "\n\n\n".join(part for part in (top, "\n\n\n".join(new_defs), rest) if part)
    return text + ("\n" if code.endswith("\n") else "")


def remove_definitions(code: str, names: Iterable[str]) -> str:
    """`code` without the top-level defs called `names` (their decorators included)."""
    wanted = set(names)
    tree = parse_python(code)
    spans = [
        (min([n.lineno, *(d.lineno for d in n.decorator_list)]) - 1, n.end_lineno or n.lineno)
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name in wanted
    ]
    if not spans:
        return code
    lines = code.splitlines()
    for start, end in sorted(spans, reverse=True):
        del lines[start:end]
        _collapse_blanks(lines, start)
    return "\n".join(lines).strip("\n") + ("\n" if code.endswith("\n") else "")


def rename_calls(code: str, old: str, new: str) -> str | None:
    """`code` with every call `old(...)` by plain name renamed to `new(...)`; None when there is none."""
    tree = parse_python(code)
    sites = [
        n.func
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == old
    ]
    if not sites:
        return None
    lines = code.splitlines(keepends=True)
    for name in sorted(sites, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        raw = lines[name.lineno - 1].encode()  # ast offsets count UTF-8 bytes
        start, end = name.col_offset, name.end_col_offset or name.col_offset + len(old)
        lines[name.lineno - 1] = (raw[:start] + new.encode() + raw[end:]).decode()
    return "".join(lines)


def _collapse_blanks(lines: list[str], at: int) -> None:
    """Leave at most two blank lines in the run of blank lines around index `at` (where a def was cut out)."""
    start = at
    while start > 0 and not lines[start - 1].strip():
        start -= 1
    end = at
    while end < len(lines) and not lines[end].strip():
        end += 1
    if end - start > 2:
        del lines[start + 2 : end]


def definition_dumps(tree: ast.Module, names: frozenset[str] | set[str]) -> dict[str, str]:
    """name -> `ast.dump` of each top-level function of `tree` named in `names`: equal dicts mean an edit left
    those functions (primitives) as they were."""
    return {n.name: ast.dump(n) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names}


# -- read: call sets and definitions (`primitives.calls` asks the kind's adapter) --------------------------
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


def python_call_set(code: str, names: frozenset[str]) -> frozenset[str]:
    tree = parse_python(code)
    called: set[str] = set()
    for name, function in top_functions(tree).items():
        if name not in names:
            called |= python_calls(function, names)
    return frozenset(called)


def python_definitions(code: str) -> dict[str, str]:
    return {name: ast.unparse(node) for name, node in top_functions(parse_python(code)).items()}
