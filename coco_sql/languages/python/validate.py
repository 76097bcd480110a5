"""Static checks of a Python candidate: the first line of defence, with a one-line reason the mutator can act on.

The validator is one layer and not the boundary. It rejects the routes we know of, so that an honest program
gets a clear reason and a hostile one has to work harder; but Python's reflection is open-ended, and a program
that slips past it must still be harmless: the sandbox is the boundary (`sandbox.python_sandbox`: a process per
candidate, kernel limits, answers read as hostile data, outputs measured outside). Every claim the sandbox
makes is tested with programs that never met this validator.

A candidate is a module that defines the task's entry function. The checks, in order:

- it parses, and is at most `MAX_SOURCE_CHARS` long;
- imports: only `ALLOWED_MODULES`, absolute, no `*`; a module name is only ever the start of an attribute
  chain (`np.argmin`), and no chain passes through a module outside the list (`typing.sys`, `np.ctypeslib`);
- names: none of `FORBIDDEN_NAMES` (code execution, file and console access, reflection that reaches the
  interpreter: `open`, `exec`, `eval`, `compile`, `__import__`, `getattr`, `globals`, ...), and no dunder name
  or attribute at all (`__class__`, `__subclasses__`, `__globals__`, `__builtins__`, `__dict__`...), which is
  how a program would walk from any object to the interpreter's internals;
- reflection by other routes: none of `FORBIDDEN_ATTRIBUTES` (frames, tracebacks, generators and coroutines:
  `f_back`, `f_globals`, `tb_frame`, `gi_frame`...), no `format_map`, no private attribute (`_x`) but of
  `self` or `cls`, `str.format` only on a literal whose fields read no attribute or item (`"{0.x}".format` reads one),
  `operator.attrgetter` / `methodcaller` only with literal names of public, non-reflection attributes, and
  no text literal that names a dunder or reflection attribute (`"__init__.__globals__"`, for any route we
  did not think of);
- no member of an allowed module in `FORBIDDEN_MEMBERS` (`typing.get_type_hints` and `typing.ForwardRef`
  evaluate text with the real builtins, `numpy.load` unpickles, `numpy.seterr` and its kind change state);
  no private member of a module (`np._core`);
- no assignment to, or deletion of, an attribute of an imported module or of a name imported from one
  (`np.argmin = ...`, `Counter.most_common = ...`: it would change what the harness computes);
- no `numpy.random` or any other `.random` attribute: programs must be deterministic, the evaluator memoises
  them;
- the entry function is defined at the top level and accepts exactly the task's number of positional
  arguments.

None of this is the security boundary: `sandbox.python_sandbox` is, and holds for programs that get past it.
"""

from __future__ import annotations

import ast
import importlib
import re
import string
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

#: Attributes that reach frames, code and tracebacks (and so the globals of the harness and the interpreter).
FORBIDDEN_ATTRIBUTES: frozenset[str] = frozenset(
    {
        *("f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "f_lasti", "f_lineno"),
        *("tb_frame", "tb_next", "tb_lasti", "tb_lineno", "with_traceback"),
        *("gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended"),
        *("cr_frame", "cr_code", "cr_await", "cr_origin", "cr_running", "cr_suspended"),
        *("ag_frame", "ag_code", "ag_await", "ag_running"),
        *("co_code", "co_consts", "co_names", "co_filename"),
    }
)

#: Members of allowed modules that run text as code, unpickle, or change the module's state for what follows.
FORBIDDEN_MEMBERS: frozenset[str] = frozenset(
    {
        *("typing.get_type_hints", "typing.ForwardRef"),
        *("numpy.load", "numpy.seterr", "numpy.seterrcall", "numpy.set_printoptions", "numpy.setbufsize"),
    }
)

MAX_SOURCE_CHARS = 50_000
_MISSING = object()
_ATTRIBUTE_GETTERS = frozenset({"attrgetter", "methodcaller"})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HARMLESS_DUNDER_TEXT = frozenset({"__main__"})


@dataclass(frozen=True)
class PythonSpec:
    """What a program must provide: `entry`, taking `arity` positional arguments."""

    entry: str
    arity: int
    modules: tuple[str, ...] = ALLOWED_MODULES


MAX_DEPTH = 200  # levels of the syntax tree: compiling and checking it recurse once per level
_TOO_DEEP = f"the program nests expressions more than {MAX_DEPTH} levels deep; simplify it"


def _check_depth(tree: ast.AST) -> None:
    """Refuse a tree deeper than `MAX_DEPTH`, walked without recursion."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise CandidateRejected(_TOO_DEEP)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


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
    except (
        RecursionError,
        MemoryError,
    ):  # `- - - ... 1` or `a.b.c...` thousands deep: the parser's own stack
        raise CandidateRejected(_TOO_DEEP) from None
    _check_depth(tree)
    bound, imported = _module_bindings(tree, spec)
    for node in ast.walk(tree):
        _check_node(node, set(bound), imported)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    _check_module_uses(tree, bound, spec, parents)
    _check_reflection(tree, imported, parents)
    _check_entry(tree, spec)
    return tree


def _module_bindings(tree: ast.Module, spec: PythonSpec) -> tuple[dict[str, str], dict[str, str]]:
    """Check every import; return the names that imported modules are bound to, with the module's name, and
    every name an import binds, with what it imports (`operator.attrgetter`)."""
    bound: dict[str, str] = {}
    imported: dict[str, str] = {}
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
                name = alias.asname or alias.name.partition(".")[0]
                imported[name] = bound[name]
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
                imported[alias.asname or alias.name] = f"{module}.{alias.name}"
    return bound, imported


def _check_module_uses(
    tree: ast.Module, bound: dict[str, str], spec: PythonSpec, parents: dict[int, ast.AST]
) -> None:
    """A module name is only ever the start of an attribute chain (`np.argmin`), never a value passed on or
    rebound; and no chain passes through a module that is not allowed (`typing.sys`, `np.ctypeslib`)."""
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
    """Follow `chain` from `module` while it runs through modules; reject a module outside the allow-list, a
    private member of a module and the `FORBIDDEN_MEMBERS`."""
    value: object = module
    for attr in chain:
        if not isinstance(value, ModuleType):
            break
        shown = f"{shown}.{attr}"
        if attr.startswith("_"):
            raise CandidateRejected(f"line {line}: {shown} is private to the module {value.__name__!r}")
        if f"{value.__name__}.{attr}" in FORBIDDEN_MEMBERS:
            raise CandidateRejected(
                f"line {line}: {shown} is not allowed (it runs text as code, unpickles, or changes the "
                "module's state)"
            )
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


def _check_node(node: ast.AST, modules: set[str], imported: dict[str, str]) -> None:
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
        if node.attr in FORBIDDEN_ATTRIBUTES:
            raise CandidateRejected(
                f"line {line}: the attribute {node.attr!r} is not allowed (it reaches frames, code or tracebacks)"
            )
        if node.attr.startswith("_") and not (
            isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        ):
            raise CandidateRejected(
                f"line {line}: the private attribute {node.attr!r} is not allowed (only on self and cls)"
            )
        if isinstance(node.ctx, ast.Store | ast.Del) and _root_name(node) in modules:
            raise CandidateRejected(
                f"line {line}: assigning to the module attribute {ast.unparse(node)!r} is not allowed"
            )
        if isinstance(node.ctx, ast.Store | ast.Del) and _root_name(node) in imported:
            raise CandidateRejected(
                f"line {line}: assigning to {ast.unparse(node)!r} is not allowed: {_root_name(node)!r} is "
                "imported, and changing it would change what the harness computes"
            )
    elif isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        _check_text(node.value if isinstance(node.value, str) else node.value.decode("latin-1"), line)
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


def _check_text(text: str, line: object) -> None:
    """A literal may not name a dunder or reflection attribute: attrgetter, methodcaller and str.format take
    names as text."""
    for word in _WORD.findall(text):
        if (_is_dunder(word) and word not in _HARMLESS_DUNDER_TEXT) or word in FORBIDDEN_ATTRIBUTES:
            raise CandidateRejected(
                f"line {line}: the text {text[:40]!r} names {word!r}, which is not allowed (dunder and "
                "reflection names)"
            )


def _check_reflection(tree: ast.Module, imported: dict[str, str], parents: dict[int, ast.AST]) -> None:
    """`operator.attrgetter` / `methodcaller` (by attribute or imported name) only as a direct call with literal
    public names; `.format` only on a literal whose fields read no attribute or item."""
    getters = {name for name, what in imported.items() if what.rpartition(".")[2] in _ATTRIBUTE_GETTERS}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if (isinstance(node, ast.Attribute) and node.attr in _ATTRIBUTE_GETTERS) or (
            isinstance(node, ast.Name) and node.id in getters
        ):
            call = parents.get(id(node))
            shown = ast.unparse(node)
            kind = node.attr if isinstance(node, ast.Attribute) else imported[node.id].rpartition(".")[2]
            if not (isinstance(call, ast.Call) and call.func is node):
                raise CandidateRejected(
                    f"line {line}: {shown} may only be called directly, with literal names"
                )
            names = call.args if kind == "attrgetter" else call.args[:1]
            if (
                not names
                or any(isinstance(a, ast.Starred) for a in names)
                or (kind == "attrgetter" and call.keywords)
            ):
                raise CandidateRejected(f"line {line}: {shown} needs literal attribute names")
            for argument in names:
                if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                    raise CandidateRejected(f"line {line}: {shown} takes only literal attribute names")
                for part in argument.value.split("."):
                    if not part.isidentifier() or part.startswith("_") or part in ("format", "format_map"):
                        raise CandidateRejected(
                            f"line {line}: {shown}({argument.value!r}) is not allowed (only public attributes)"
                        )
        elif isinstance(node, ast.Attribute) and node.attr == "format_map":
            raise CandidateRejected(
                f"line {line}: .format_map is not allowed (its fields read attributes by name)"
            )
        elif isinstance(node, ast.Attribute) and node.attr == "format":
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                raise CandidateRejected(f"line {line}: .format is only allowed on a text literal")
            if not _plain_format(node.value.value):
                raise CandidateRejected(
                    f"line {line}: the format string {node.value.value[:40]!r} reads an attribute or item of "
                    "its arguments, which is not allowed"
                )


def _plain_format(text: str) -> bool:
    """Whether no replacement field of `text` (or of a nested format spec) reads an attribute or an item."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return False
    for _, field, spec, _ in fields:
        if field is not None and ("." in field or "[" in field):
            return False
        if spec and not _plain_format(spec):
            return False
    return True


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
