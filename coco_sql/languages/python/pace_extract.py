"""EAP discovery without a model on a Python program (the Python half of `primitives.extraction` and
`primitives.adopt`).

Extraction (E2): a self-contained top-level helper the entry function calls becomes a primitive (renamed
`p_<helper>`); only when there is none, a self-contained sub-expression of the entry function does. Generation
(E3): two numeric functions mixed by a weighted sum. Adoption: one `def` (plus the imports it needs), reading only
its parameters, builtins and its imports, calling no library primitive, its parameters among the target's inputs.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import numpy as np

from coco_sql.errors import CandidateRejected
from coco_sql.languages.python.pace_defs import (
    ImportLine,
    bound_names,
    free_names,
    loaded_names,
    module_imports,
    params_of,
    parse_python,
    python_calls,
    rename_def,
    render,
    split_code,
    top_functions,
)
from coco_sql.primitives.adopt import check_inputs, library_name
from coco_sql.primitives.extraction import Candidate, choose, short_name
from coco_sql.primitives.library import Primitive, PrimitiveLibrary

MIN_EXPRESSION_NODES = 4


def _def_of(source: str) -> ast.FunctionDef:
    """The one def of a candidate's source."""
    function = parse_python(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    return function


def canonical_python(function: ast.FunctionDef) -> str:
    """A def written with a fixed name (two primitives differing only in name are equal)."""
    return ast.unparse(rename_def(function, "_"))


def library_python_forms(library: PrimitiveLibrary) -> set[str]:
    return {canonical_python(split_code(p.code)[1]) for p in library.for_language("python")}


def python_candidates(code: str, entry: str, *, exclude: frozenset[str] = frozenset()) -> list[Candidate]:
    """What a Python program offers, best first: the self-contained top-level helpers the entry function calls
    (in call order; names in `exclude`, the library's, are skipped), then the entry's self-contained
    sub-expressions (Call, BinOp or Subscript of at least MIN_EXPRESSION_NODES nodes whose free names are all
    entry parameters or imported names), largest first. A value the entry's body returns directly is not a
    candidate: it is the target's own decision, not a part of it ("smaller than the complete algorithm")."""
    tree = parse_python(code)
    functions = top_functions(tree)
    target = functions.get(entry)
    if target is None:
        return []
    imports = module_imports(tree)
    found: list[Candidate] = []
    called = [
        n.func.id
        for n in ast.walk(target)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions
    ]
    for name in dict.fromkeys(called):
        helper = functions[name]
        if (
            name == entry
            or name in exclude
            or helper.decorator_list
            or helper.args.vararg
            or helper.args.kwarg
        ):
            continue
        free = free_names(helper)
        if free - set(imports):
            continue  # reads a global, another function, or itself: not self-contained
        needed = tuple(sorted(imports[a].statement for a in free))
        nodes = sum(1 for _ in ast.walk(helper))
        found.append(
            Candidate(name, nodes, tuple(params_of(helper)), ast.unparse(helper), name, needed, "helper")
        )
    found.extend(_expression_candidates(target, imports))
    return found


def _expression_candidates(target: ast.FunctionDef, imports: dict[str, ImportLine]) -> list[Candidate]:
    params = params_of(target)
    local = bound_names(target) - set(params)
    returned = {id(n.value) for n in target.body if isinstance(n, ast.Return) and n.value is not None}
    ranked: list[tuple[int, int, int, Candidate]] = []
    seen: set[str] = set()
    for node in ast.walk(target):
        if id(node) in returned or not isinstance(node, ast.Call | ast.BinOp | ast.Subscript):
            continue
        if not isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            continue
        if any(
            isinstance(n, ast.Lambda | ast.comprehension | ast.NamedExpr | ast.Await) for n in ast.walk(node)
        ):
            continue
        nodes = sum(1 for _ in ast.walk(node))
        names = loaded_names(node)
        if nodes < MIN_EXPRESSION_NODES or names & local or names - set(params) - set(imports):
            continue
        text = ast.unparse(node)
        if text in seen:
            continue
        seen.add(text)
        used = tuple(p for p in params if p in names)
        needed = tuple(sorted(imports[n].statement for n in names if n in imports))
        body = f"def _({', '.join(used)}):\n    return {text}"
        candidate = Candidate(text, nodes, used, body, _expression_hint(node), needed, "expression")
        ranked.append((-nodes, node.lineno, node.col_offset, candidate))
    return [c for *_, c in sorted(ranked, key=lambda r: r[:3])]


def _expression_hint(node: ast.AST) -> str:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node, ast.Call):
        return node.func.id if isinstance(node.func, ast.Name) else "call"
    if isinstance(node, ast.BinOp):
        return type(node.op).__name__.lower()
    root = node
    while isinstance(root, ast.Subscript | ast.Attribute):
        root = root.value
    return f"{root.id}_at" if isinstance(root, ast.Name) else "item"


def extract_python(
    code: str,
    library: PrimitiveLibrary,
    *,
    origin_program: str | None,
    iteration: int,
    entry: str | None,
    rng: np.random.Generator | None,
    prefer: str | None,
    top: int,
) -> Primitive | None:
    """`extract` for Python: a self-contained helper, else a sub-expression of the entry function."""
    if entry is None:
        raise ValueError("Python extraction needs the entry function's name")
    forms = library_python_forms(library)
    candidates = [
        c
        for c in python_candidates(code, entry, exclude=frozenset(library.names("python")))
        if canonical_python(_def_of(c.body)) not in forms
    ]
    helpers = [c for c in candidates if c.kind == "helper"]
    chosen = choose(helpers if helpers and prefer is None else candidates, rng, prefer, top)
    if chosen is None:
        return None
    name = library.unique_name(chosen.hint)
    function = rename_def(_def_of(chosen.body), name)
    return Primitive(
        name, "python", render(function, chosen.imports), f"{name}({', '.join(chosen.params)})", origin_program,
        iteration, "extracted",
    )  # fmt: skip


_NON_NUMERIC = (
    ast.Compare, ast.BoolOp, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp, ast.JoinedStr, ast.Lambda,
)  # fmt: skip


def _returns_number(function: ast.FunctionDef) -> bool:
    """A heuristic: every return has a value that is not obviously a bool, a string or a collection."""
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    for r in returns:
        value = r.value
        if value is None or isinstance(value, _NON_NUMERIC):
            return False
        if isinstance(value, ast.Constant) and not isinstance(value.value, int | float):
            return False
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
            return False
    return bool(returns)


def combine_python(
    a: Primitive, b: Primitive, library: PrimitiveLibrary, rng: np.random.Generator, *, iteration: int
) -> Primitive | None:
    """`combine` for Python: two numeric functions mixed by a weighted sum."""
    (ia, fa), (ib, fb) = split_code(a.code), split_code(b.code)
    if not (_returns_number(fa) and _returns_number(fb)):
        return None
    pa, pb = params_of(fa), params_of(fb)
    params = [*pa, *(p for p in pb if p not in pa)]
    weight = round(float(rng.uniform(0.2, 0.8)), 2)
    source = (
        f"def _({', '.join(params)}):\n"
        + _indent(ast.unparse(rename_def(fa, "_first")))
        + _indent(ast.unparse(rename_def(fb, "_second")))
        + f"    return {weight} * _first({', '.join(pa)}) + {round(1 - weight, 2)} * _second({', '.join(pb)})\n"
    )
    function = _def_of(source)
    if canonical_python(function) in library_python_forms(library):
        return None
    name = library.unique_name(f"{short_name(a)}_mix_{short_name(b)}")
    return Primitive(
        name, "python", render(rename_def(function, name), (*ia, *ib)), f"{name}({', '.join(params)})", None,
        iteration, "generated",
    )  # fmt: skip


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())


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
    check_inputs(function.name, params, inputs)
    if canonical_python(function) in library_python_forms(library):
        raise CandidateRejected(f"{function.name} is a primitive the library already has")
    name = library_name(function.name, library)
    needed = sorted({imports[a].statement for a in _names_used(function) if a in imports})
    return Primitive(
        name, "python", render(rename_def(function, name), needed), f"{name}({', '.join(params)})",
        origin_program, iteration, how,
    )  # fmt: skip


def _names_used(function: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
