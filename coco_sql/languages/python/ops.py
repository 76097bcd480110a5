"""Edit operators on a Python program's AST: each returns every edit it can make, as rendered code with a
one-line approach that names what it changed (so that a parent's earlier children are never repeated).

Vocabulary. An *objective* is the score a program ranks its choices by: the first argument of an
argmin/argmax/argsort call (numpy's or a method), or the key of min/max/sorted. An objective is a weighted sum of
*terms* (`2.0 * a - b` has the terms a and b, weights 2 and -1).

- `tune_constants`: scale a float (x0.5 ... x2, sign flip) or step an int (+-1, +-2) literal.
- `insert_terms`: add `w * t` to an objective, with t from the *term pool*: the terms of every objective of the
  parent and of the other elites, and their *variants* (below); w from a signed grid.
- `drop_terms`: remove one term of an objective.
- `drop_guards`: remove an `if` statement, or keep only its `else` branch.
- `swap_guards`: swap two adjacent `if` statements.
- `insert_guards`: put `if len(P) <= K: return R` first in a function, where P is one of its parameters that the
  function indexes with, and R is a return value of an elite's function of the same name or the parent's own
  with a term dropped.
- `recombine`: take one objective, or one `if` guard, from another elite, or average the constants of two
  programs that differ only in their constants.

Variants are numpy idioms for a pairwise matrix indexed as `M[a][b]` (or `M[a, b]`) with names a and b: the same
row for another parameter (`M[p][b]`), each candidate's mean to the candidate set (`np.mean(M[b][:, b], axis=1)`)
and each candidate's nearest other candidate (`np.partition(M[b][:, b], 1, axis=1)[:, 1]`). They are how the
offline operators invent a term the program does not contain yet; everything else recombines what is there.
"""

from __future__ import annotations

import ast
import copy
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

OBJECTIVE_CALLS = frozenset({"argmin", "argmax", "nanargmin", "nanargmax", "argsort"})
KEY_CALLS = frozenset({"min", "max", "sorted"})
FLOAT_FACTORS = (0.5, 0.8, 0.9, 1.1, 1.25, 2.0, -1.0)
INT_STEPS = (-2, -1, 1, 2)
WEIGHTS = (-1.0, -0.5, -0.2, -0.1, 0.1, 0.2, 0.5, 1.0)
GUARD_SIZES = (3, 5, 8, 12)
MAX_APPROACH = 160


@dataclass(frozen=True)
class Edit:
    operator: str  # tune | insert | drop | swap | guard | recombine
    approach: str
    code: str
    donor_id: str | None = None


@dataclass(frozen=True)
class Donor:
    """Another elite's program, parsed."""

    program_id: str
    tree: ast.Module


# ------------------------------------------------------------------------------------------------ helpers


def _walk(tree: ast.AST) -> list[ast.AST]:
    """Every node in a fixed order: an index into it names the same node in a deep copy."""
    return list(ast.walk(tree))


def _substitute(tree: ast.Module, index: int, new: ast.AST | list[ast.stmt]) -> ast.Module:
    """A copy of `tree` whose node number `index` is `new` (a list replaces a statement with statements)."""
    result = copy.deepcopy(tree)
    target = _walk(result)[index]
    for node in ast.walk(result):
        for name, value in ast.iter_fields(node):
            if value is target:
                setattr(node, name, new)
                return result
            if isinstance(value, list) and any(item is target for item in value):
                at = next(i for i, item in enumerate(value) if item is target)
                value[at : at + 1] = new if isinstance(new, list) else [new]
                return result
    raise ValueError("node not found in its own tree")


def _render(tree: ast.Module) -> str:
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 70 else text[:67] + "..."


def _edit(operator: str, approach: str, tree: ast.Module, donor_id: str | None = None) -> Edit:
    code = _render(tree)
    if len(approach) > MAX_APPROACH:  # a cut description could collide: the code's hash keeps it unique
        approach = f"{approach[: MAX_APPROACH - 12]}... [{hashlib.sha1(code.encode()).hexdigest()[:8]}]"
    return Edit(operator, approach, code, donor_id)


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _number(value: float) -> float | int:
    """A literal as a person would write it: four significant digits."""
    rounded = float(f"{value:.4g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 1e6 and isinstance(value, int) else rounded


def _line(node: ast.AST) -> int | str:
    return getattr(node, "lineno", "?")


def numpy_alias(tree: ast.Module) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "numpy":
                    return alias.asname or "numpy"
    return None


def functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [node for node in tree.body if isinstance(node, ast.FunctionDef)]


def parameters(function: ast.FunctionDef) -> list[str]:
    return [a.arg for a in (*function.args.posonlyargs, *function.args.args)]


# ---------------------------------------------------------------------------------------------- objectives


def objectives(tree: ast.AST) -> list[tuple[int, str]]:
    """(node index, call name) of every objective expression."""
    found = []
    index = {id(node): i for i, node in enumerate(_walk(tree))}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in OBJECTIVE_CALLS and node.args:
            found.append((index[id(node.args[0])], name))
        elif name in KEY_CALLS:
            for keyword in node.keywords:
                if keyword.arg == "key" and isinstance(keyword.value, ast.Lambda):
                    found.append((index[id(keyword.value.body)], f"{name}(key=...)"))
    return found


def terms(expression: ast.expr) -> list[tuple[float, ast.expr]]:
    """The weighted terms of a sum: `2 * a - b` -> [(2, a), (-1, b)]."""
    if isinstance(expression, ast.BinOp) and isinstance(expression.op, ast.Add | ast.Sub):
        sign = 1.0 if isinstance(expression.op, ast.Add) else -1.0
        return terms(expression.left) + [(sign * w, t) for w, t in terms(expression.right)]
    if isinstance(expression, ast.UnaryOp) and isinstance(expression.op, ast.USub):
        return [(-w, t) for w, t in terms(expression.operand)]
    if isinstance(expression, ast.BinOp) and isinstance(expression.op, ast.Mult):
        for weight, other in ((expression.left, expression.right), (expression.right, expression.left)):
            if isinstance(weight, ast.Constant) and _is_number(weight.value):
                return [(float(weight.value), other)]
    return [(1.0, expression)]


def join_terms(weighted: Sequence[tuple[float, ast.expr]]) -> ast.expr:
    """The sum back as an expression; weights of 1 are left out."""
    result: ast.expr | None = None
    for weight, term in weighted:
        magnitude = abs(weight)
        part = term if magnitude == 1.0 else ast.BinOp(ast.Constant(_number(magnitude)), ast.Mult(), term)
        if result is None:
            result = part if weight >= 0 else ast.UnaryOp(ast.USub(), part)
        else:
            result = ast.BinOp(result, ast.Add() if weight >= 0 else ast.Sub(), part)
    assert result is not None
    return result


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def variants(term: ast.expr, names: Sequence[str], np: str | None) -> list[ast.expr]:
    """New terms from a pairwise-matrix term `M[a][b]` / `M[a, b]` (module docstring)."""
    matrix_row = _matrix_index(term)
    if matrix_row is None:
        return []
    matrix, row, column = matrix_row
    found: list[ast.expr] = []
    for name in names:
        if name not in (matrix, row, column):
            found.append(ast.parse(f"{matrix}[{name}][{column}]", mode="eval").body)
    if np is not None:
        block = f"{matrix}[{column}][:, {column}]"
        found.append(ast.parse(f"{np}.mean({block}, axis=1)", mode="eval").body)
        found.append(ast.parse(f"{np}.partition({block}, 1, axis=1)[:, 1]", mode="eval").body)
    return found


def _matrix_index(term: ast.expr) -> tuple[str, str, str] | None:
    if not isinstance(term, ast.Subscript):
        return None
    if isinstance(term.slice, ast.Tuple) and len(term.slice.elts) == 2:
        value, row, column = term.value, term.slice.elts[0], term.slice.elts[1]
    elif isinstance(term.value, ast.Subscript):
        value, row, column = term.value.value, term.value.slice, term.slice
    else:
        return None
    if all(isinstance(n, ast.Name) for n in (value, row, column)):
        return value.id, row.id, column.id  # type: ignore[attr-defined]
    return None


def term_pool(tree: ast.Module, donors: Sequence[Donor]) -> list[tuple[ast.expr, str | None]]:
    """Distinct terms (with the donor they come from, None for the parent): objectives' terms and variants."""
    pool: list[tuple[ast.expr, str | None]] = []
    seen: set[str] = set()
    names = sorted({p for f in functions(tree) for p in parameters(f)})
    np = numpy_alias(tree)
    for source, donor_id in [(tree, None), *((d.tree, d.program_id) for d in donors)]:
        nodes = _walk(source)
        for index, _ in objectives(source):
            for _, term in terms(nodes[index]):  # type: ignore[arg-type]
                for candidate in (term, *variants(term, names, np)):
                    key = ast.dump(candidate)
                    if key not in seen and _uses_only(candidate, set(names) | ({np} if np else set())):
                        seen.add(key)
                        pool.append((candidate, donor_id if candidate is term else None))
    return pool


def _uses_only(term: ast.expr, names: set[str]) -> bool:
    """True when every free name of `term` is one of `names` (a donor's term must make sense in the parent)."""
    bound = {n.arg for n in ast.walk(term) if isinstance(n, ast.arg)}
    free = {n.id for n in ast.walk(term) if isinstance(n, ast.Name)} - bound
    return free <= names


# ----------------------------------------------------------------------------------------------- operators


def tune_constants(tree: ast.Module) -> Iterator[Edit]:
    skip = {id(k.value) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg == "axis"}
    for index, node in enumerate(_walk(tree)):
        if not (isinstance(node, ast.Constant) and _is_number(node.value)) or id(node) in skip:
            continue
        old = node.value
        if isinstance(old, int):
            values = [old + step for step in INT_STEPS]
        elif old == 0:
            values = [0.1, -0.1]
        else:
            values = [_number(old * factor) for factor in FLOAT_FACTORS]
        for value in dict.fromkeys(values):
            if value != old:
                new = _substitute(tree, index, ast.Constant(value))
                yield _edit("tune", f"tune: constant {old!r} at line {_line(node)} -> {value!r}", new)


def insert_terms(tree: ast.Module, pool: Sequence[tuple[ast.expr, str | None]]) -> Iterator[Edit]:
    nodes = _walk(tree)
    for index, call in objectives(tree):
        objective = nodes[index]
        present = [t for _, t in terms(objective)]  # type: ignore[arg-type]
        for term, donor_id in pool:
            if any(_same(term, p) for p in present):
                continue
            for weight in WEIGHTS:
                new = _substitute(tree, index, join_terms([*terms(objective), (weight, term)]))  # type: ignore[arg-type]
                source = f" (from {donor_id})" if donor_id else ""
                yield _edit(
                    "insert",
                    f"insert term {weight:+g} * {_short(term)} into the {call} objective at line "
                    f"{_line(objective)}{source}",
                    new,
                    donor_id,
                )


def drop_terms(tree: ast.Module) -> Iterator[Edit]:
    nodes = _walk(tree)
    for index, call in objectives(tree):
        weighted = terms(nodes[index])  # type: ignore[arg-type]
        if len(weighted) < 2:
            continue
        for i, (weight, term) in enumerate(weighted):
            new = _substitute(tree, index, join_terms(weighted[:i] + weighted[i + 1 :]))
            yield _edit(
                "drop",
                f"drop term {weight:+g} * {_short(term)} from the {call} objective at line {_line(nodes[index])}",
                new,
            )


def _if_statements(tree: ast.Module) -> Iterator[tuple[int, ast.If, list[ast.stmt]]]:
    """(index, statement, the statement list that holds it) for every `if` statement below the module level."""
    nodes = _walk(tree)
    index = {id(node): i for i, node in enumerate(nodes)}
    for node in nodes[1:]:  # nodes[0] is the module: a module-level `if` is not a guard
        for body in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if isinstance(body, list):
                for statement in body:
                    if isinstance(statement, ast.If):
                        yield index[id(statement)], statement, body


def drop_guards(tree: ast.Module) -> Iterator[Edit]:
    for index, statement, body in _if_statements(tree):
        shown = f"`if {_short(statement.test)}` at line {_line(statement)}"
        if len(body) > 1:
            yield _edit("drop", f"drop the guard {shown}", _substitute(tree, index, []))
        if statement.orelse:
            yield _edit(
                "drop",
                f"drop the guard {shown}, keep its else branch",
                _substitute(tree, index, statement.orelse),
            )


def swap_guards(tree: ast.Module) -> Iterator[Edit]:
    nodes = _walk(tree)
    for index, statement, body in _if_statements(tree):
        at = next(i for i, s in enumerate(body) if s is statement)
        if at + 1 < len(body) and isinstance(body[at + 1], ast.If):
            result = copy.deepcopy(tree)
            copied = _walk(result)[index]
            holder = next(
                b
                for n in ast.walk(result)
                for b in (getattr(n, "body", None), getattr(n, "orelse", None))
                if isinstance(b, list) and any(s is copied for s in b)
            )
            holder[at], holder[at + 1] = holder[at + 1], holder[at]
            yield _edit(
                "swap",
                f"swap the guards at lines {_line(nodes[index])} and {_line(body[at + 1])}",
                result,
            )


def insert_guards(tree: ast.Module, donors: Sequence[Donor]) -> Iterator[Edit]:
    for function in functions(tree):
        indexed = _indexing_parameters(function)
        if not indexed:
            continue
        returns: list[tuple[ast.expr, str | None]] = []
        for donor in donors:
            for other in functions(donor.tree):
                if other.name == function.name:
                    returns.extend((r.value, donor.program_id) for r in _returns(other))
        for own in _returns(function):
            for index, _ in objectives(own.value):
                nodes = _walk(own.value)
                weighted = terms(nodes[index])  # type: ignore[arg-type]
                for i in range(len(weighted)) if len(weighted) > 1 else ():
                    reduced = _replace_in(own.value, index, join_terms(weighted[:i] + weighted[i + 1 :]))
                    returns.append((reduced, None))
        index = _walk(tree).index(function)
        for parameter in indexed:
            for size in GUARD_SIZES:
                for value, donor_id in returns:
                    guard = ast.If(
                        test=ast.parse(f"len({parameter}) <= {size}", mode="eval").body,
                        body=[ast.Return(copy.deepcopy(value))],
                        orelse=[],
                    )
                    new_function = copy.deepcopy(function)
                    new_function.body.insert(_after_docstring(new_function), guard)
                    source = f" (from {donor_id})" if donor_id else ""
                    yield _edit(
                        "guard",
                        f"guard: if len({parameter}) <= {size}: return {_short(value)} first in "
                        f"{function.name}{source}",
                        _substitute(tree, index, new_function),
                        donor_id,
                    )


def _indexing_parameters(function: ast.FunctionDef) -> list[str]:
    """Parameters the function indexes with (`m[p]`): the collections a size guard can test."""
    names = set(parameters(function))
    used = {
        n.slice.id
        for n in ast.walk(function)
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name) and n.slice.id in names
    }
    return sorted(used)


def _returns(function: ast.FunctionDef) -> list[ast.Return]:
    return [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]  # type: ignore[misc]


def _replace_in(expression: ast.expr, index: int, new: ast.expr) -> ast.expr:
    wrapper = ast.Module(body=[ast.Expr(expression)], type_ignores=[])
    offset = 2  # the Module and the Expr come first in the walk
    replaced = _substitute(wrapper, index + offset, new)
    return replaced.body[0].value  # type: ignore[attr-defined]


def _after_docstring(function: ast.FunctionDef) -> int:
    first = function.body[0] if function.body else None
    is_doc = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    return 1 if is_doc else 0


def recombine(tree: ast.Module, donors: Sequence[Donor]) -> Iterator[Edit]:
    nodes = _walk(tree)
    mine = objectives(tree)
    for donor in donors:
        theirs = [(_walk(donor.tree)[i], name) for i, name in objectives(donor.tree)]
        names = {p for f in functions(tree) for p in parameters(f)} | {numpy_alias(tree) or ""}
        for index, call in mine:
            for objective, _ in theirs:
                if not _same(objective, nodes[index]) and _uses_only(objective, names):  # type: ignore[arg-type]
                    yield _edit(
                        "recombine",
                        f"recombine: the {call} objective at line {_line(nodes[index])} becomes "
                        f"{_short(objective)} (from {donor.program_id})",
                        _substitute(tree, index, copy.deepcopy(objective)),
                        donor.program_id,
                    )
        yield from _transplant_guards(tree, donor)
        blended = _blend_constants(tree, donor.tree)
        if blended is not None:
            yield _edit(
                "recombine",
                f"recombine: average the constants with {donor.program_id}",
                blended,
                donor.program_id,
            )


def _transplant_guards(tree: ast.Module, donor: Donor) -> Iterator[Edit]:
    mine = {f.name: f for f in functions(tree)}
    for other in functions(donor.tree):
        function = mine.get(other.name)
        if function is None:
            continue
        for at, statement in enumerate(other.body):
            if isinstance(statement, ast.If) and not any(_same(statement, s) for s in function.body):
                new_function = copy.deepcopy(function)
                new_function.body.insert(min(at, len(new_function.body) - 1), copy.deepcopy(statement))
                yield _edit(
                    "recombine",
                    f"recombine: take the guard `if {_short(statement.test)}` into {function.name} "
                    f"(from {donor.program_id})",
                    _substitute(tree, _walk(tree).index(function), new_function),
                    donor.program_id,
                )


def _blend_constants(tree: ast.Module, other: ast.Module) -> ast.Module | None:
    """The parent with each numeric literal averaged with the donor's, when the two differ only there."""
    mine, theirs = _walk(tree), _walk(other)
    if len(mine) != len(theirs) or _same(tree, other):
        return None
    changes = []
    for index, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
            if a.value != b.value:
                if not (_is_number(a.value) and _is_number(b.value)):
                    return None
                changes.append((index, _number((a.value + b.value) / 2)))
        elif type(a) is not type(b) or _fields(a) != _fields(b):
            return None
    if not changes:
        return None
    result = copy.deepcopy(tree)
    nodes = _walk(result)
    for index, value in changes:
        nodes[index].value = value  # type: ignore[attr-defined]
    return result


def _fields(node: ast.AST) -> tuple[object, ...]:
    """The node's own scalar fields (names, operators), not its children."""
    return tuple(
        (name, value if isinstance(value, str | int | float | bool | type(None)) else type(value).__name__)
        for name, value in ast.iter_fields(node)
        if not isinstance(value, ast.AST | list)
    )
