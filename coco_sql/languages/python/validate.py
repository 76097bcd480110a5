"""Static checks of a Python candidate: the first line of defence, with a one-line reason the mutator can act on.

A candidate is a module that defines the task's entry function. The checks, in order:

- it parses, and is at most `MAX_SOURCE_CHARS` long;
- imports: only `ALLOWED_MODULES`, absolute, no `*`; a module name is only ever the start of an attribute
  chain (`np.argmin`), and no chain passes through a module outside the list (`typing.sys`, `np.ctypeslib`);
- names: none of `FORBIDDEN_NAMES` (code execution, file and console access, reflection that reaches the
  interpreter: `open`, `exec`, `eval`, `compile`, `__import__`, `getattr`, `globals`, ...), and no dunder name
  or attribute at all (`__class__`, `__subclasses__`, `__globals__`, `__builtins__`, `__dict__`...), which is
  how a program would walk from any object to the interpreter's internals;
- no assignment to, or deletion of, an attribute of an imported module (it would change what other programs
  compute in the same worker, and the harness's own helpers);
- no `numpy.random` or any other `.random` attribute: programs must be deterministic, the evaluator memoises
  them;
- the entry function is defined at the top level and accepts exactly the task's number of positional
  arguments.

None of this is the security boundary: `sandbox.python_sandbox` is, and holds for programs that get past it.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from types import ModuleType

from coco_sql.errors import CandidateRejected

#: Modules a program may import (the worker pre-imports exactly these and serves nothing else).
ALLOWED_MODULES: tuple[str, ...] = (
    "bisect",
    "collections",
    "functools",
    "heapq",
    "itertools",
    "math",
    "numpy",
    "numpy.linalg",
    "operator",
    "statistics",
    "typing",
)

FORBIDDEN_NAMES: frozenset[str] = frozenset(
    {
        *("open", "exec", "eval", "compile", "__import__", "input", "breakpoint", "help", "exit", "quit"),
        *("globals", "locals", "vars", "dir", "getattr", "setattr", "delattr", "memoryview", "id"),
    }
)

MAX_SOURCE_CHARS = 50_000
_MISSING = object()


@dataclass(frozen=True)
class PythonSpec:
    """What a program must provide: `entry`, taking `arity` positional arguments."""

    entry: str
    arity: int
    modules: tuple[str, ...] = ALLOWED_MODULES


def validate_program(code: str, spec: PythonSpec) -> ast.Module:
    """The parsed module, or CandidateRejected with a one-line reason naming the construct."""
    if len(code) > MAX_SOURCE_CHARS:
        raise CandidateRejected(f"the program is {len(code)} characters long (limit {MAX_SOURCE_CHARS})")
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        raise CandidateRejected(f"line {error.lineno}: the program does not parse: {error.msg}") from None
    except ValueError as error:  # e.g. a NUL byte
        raise CandidateRejected(f"the program does not parse: {error}") from None
    bound = _module_bindings(tree, spec)
    for node in ast.walk(tree):
        _check_node(node, set(bound))
    _check_module_uses(tree, bound, spec)
    _check_entry(tree, spec)
    return tree


def _module_bindings(tree: ast.Module, spec: PythonSpec) -> dict[str, str]:
    """Check every import; return the names that imported modules are bound to, with the module's name."""
    bound: dict[str, str] = {}
    allowed = ", ".join(sorted({m.partition(".")[0] for m in spec.modules}))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in spec.modules:
                    raise CandidateRejected(
                        f"line {node.lineno}: import of {alias.name!r} is not allowed (allowed: {allowed})"
                    )
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[alias.name.partition(".")[0]] = alias.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or module not in spec.modules:
                shown = "." * node.level + module
                raise CandidateRejected(
                    f"line {node.lineno}: import from {shown!r} is not allowed (allowed: {allowed})"
                )
            for alias in node.names:
                if alias.name == "*":
                    raise CandidateRejected(f"line {node.lineno}: 'from {module} import *' is not allowed")
                target = _resolve(importlib.import_module(module), [alias.name], spec, node.lineno, module)
                if isinstance(target, ModuleType):
                    bound[alias.asname or alias.name] = target.__name__
    return bound


def _check_module_uses(tree: ast.Module, bound: dict[str, str], spec: PythonSpec) -> None:
    """A module name is only ever the start of an attribute chain (`np.argmin`), never a value passed on or
    rebound; and no chain passes through a module that is not allowed (`typing.sys`, `np.ctypeslib`)."""
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id in bound):
            continue
        parent = parents.get(id(node))
        if not isinstance(parent, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            raise CandidateRejected(
                f"line {node.lineno}: the module name {node.id!r} may only be used as {node.id}.<attribute>"
            )
        chain: list[str] = []
        current: ast.AST = node
        while isinstance(parent, ast.Attribute) and parent.value is current:
            chain.append(parent.attr)
            current, parent = parent, parents.get(id(parent))
        _resolve(importlib.import_module(bound[node.id]), chain, spec, node.lineno, node.id)


def _resolve(module: ModuleType, chain: list[str], spec: PythonSpec, line: int, shown: str) -> object:
    """Follow `chain` from `module` while it runs through modules; reject a module outside the allow-list."""
    value: object = module
    for attr in chain:
        if not isinstance(value, ModuleType):
            break
        shown = f"{shown}.{attr}"
        found = value.__dict__.get(attr, _MISSING)
        if found is _MISSING and hasattr(value, "__path__"):  # a package: a submodule not imported yet
            name = f"{value.__name__}.{attr}"
            if name not in spec.modules:
                raise CandidateRejected(f"line {line}: {shown} is the module {name!r}, which is not allowed")
            found = importlib.import_module(name)
        if isinstance(found, ModuleType) and found.__name__ not in spec.modules:
            raise CandidateRejected(
                f"line {line}: {shown} is the module {found.__name__!r}, which is not allowed"
            )
        value = found
    return value


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _check_node(node: ast.AST, modules: set[str]) -> None:
    line = getattr(node, "lineno", "?")
    if isinstance(node, ast.Name):
        if node.id in FORBIDDEN_NAMES:
            raise CandidateRejected(f"line {line}: {node.id!r} is not allowed in a program")
        if _is_dunder(node.id) and node.id != "__name__":
            raise CandidateRejected(f"line {line}: the name {node.id!r} is not allowed (dunder names)")
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("__"):
            raise CandidateRejected(
                f"line {line}: the attribute {node.attr!r} is not allowed (dunder attributes reach "
                "interpreter internals)"
            )
        if node.attr == "random":
            raise CandidateRejected(f"line {line}: '.random' is not allowed: programs must be deterministic")
        if isinstance(node.ctx, ast.Store | ast.Del) and _root_name(node) in modules:
            raise CandidateRejected(
                f"line {line}: assigning to the module attribute {ast.unparse(node)!r} is not allowed"
            )
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        if _is_dunder(node.name) and node.name != "__init__":
            raise CandidateRejected(f"line {line}: defining {node.name!r} is not allowed (dunder names)")
    elif isinstance(node, ast.arg | ast.keyword | ast.alias):
        name = node.arg if isinstance(node, ast.arg | ast.keyword) else node.asname or node.name
        if name is not None and _is_dunder(name):
            raise CandidateRejected(f"line {line}: the name {name!r} is not allowed (dunder names)")
    elif isinstance(node, ast.Global | ast.Nonlocal):
        for name in node.names:
            if name in modules:
                raise CandidateRejected(f"line {line}: rebinding the module name {name!r} is not allowed")


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _check_entry(tree: ast.Module, spec: PythonSpec) -> None:
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == spec.entry]
    if not functions:
        async_entry = any(isinstance(n, ast.AsyncFunctionDef) and n.name == spec.entry for n in tree.body)
        raise CandidateRejected(
            f"{spec.entry!r} must be a plain function, not async"
            if async_entry
            else f"the program defines no top-level function {spec.entry!r}"
        )
    args = functions[-1].args
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    takes = required <= spec.arity and (spec.arity <= positional or args.vararg is not None)
    if not takes or any(default is None for default in args.kw_defaults):
        raise CandidateRejected(
            f"{spec.entry!r} must take {spec.arity} positional arguments "
            f"(it takes {_signature_text(args)}; the harness calls it with {spec.arity})"
        )


def _signature_text(args: ast.arguments) -> str:
    names = [a.arg for a in (*args.posonlyargs, *args.args)]
    return f"({', '.join(names)}{', *' + args.vararg.arg if args.vararg else ''})"
