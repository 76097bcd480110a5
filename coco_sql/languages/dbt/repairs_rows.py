"""Repairs of which rows a model returns and of a projection as a whole: joins (their kind, keys and conditions),
filters, GROUP BY columns, a unit scale and a COALESCE. Token edits like `repairs`' (a `Repair` is a file and
its `Change`s); row-level repairs weigh more when the training rows show missing or extra rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from sqlglot import exp
from sqlglot.tokens import TokenType

from coco_sql.languages.dbt.repairs import _FLIP, Repair, Scope, _nudged, projections
from coco_sql.languages.dbt.sql_files import EditableFile
from coco_sql.sqlkit.spans import Change, SpannedSql

_KEYISH = ("id", "_key", "_sk", "date", "ds", "month", "day", "code")
_REF = re.compile(r"""\b(ref|source)\s*\(\s*(['"][^'"]+['"](?:\s*,\s*['"][^'"]+['"])?)""")


def relation_of(file: EditableFile) -> dict[str, str]:
    """Qualifier -> the relation it names in `file`: `ref:NAME` / `source:A.B` for a `ref()` / `source()` (the
    last name of a two-argument ref), `NAME` for a table or CTE written as is."""
    found: dict[str, str] = {}
    if file.sql is None:
        return found
    for table in file.sql.tree.find_all(exp.Table):
        jinja = file.holders.get(table.name)
        match = _REF.search(jinja) if jinja is not None else None
        if match is not None:
            names = [n.strip().strip("'\"") for n in match.group(2).split(",")]
            relation = f"ref:{names[-1]}" if match.group(1) == "ref" else f"source:{'.'.join(names)}"
        else:
            relation = table.name
        found[table.alias_or_name] = relation
    return found


def relation_columns(files: Iterable[EditableFile]) -> dict[str, set[str]]:
    """Relation -> the columns known to it across the project: those any model reads through a qualifier that
    names it, and a model's own output columns (`ref:MODEL`). A join key's alternatives come from here: the key a
    model should join on may be one it never reads elsewhere."""
    known: dict[str, set[str]] = {}
    for file in files:
        if file.sql is None:
            continue
        relations = relation_of(file)
        for column in file.sql.tree.find_all(exp.Column):
            if column.table in relations:
                known.setdefault(relations[column.table], set()).add(column.name)
        if isinstance(file.sql.tree, exp.Select) and file.path.startswith("models/"):
            outputs = {e.alias_or_name for e in file.sql.tree.expressions if e.alias_or_name}
            known.setdefault(f"ref:{file.name}", set()).update(outputs)
    return known


def row_repairs(file: EditableFile, scope: Scope, scale: tuple[float, set[str]] | None,
                nulls: set[str], known: Mapping[str, set[str]] | None = None) -> list[Repair]:  # fmt: skip
    """Every row-level and projection-level repair of one model that parses (module docstring); `known` is
    `relation_columns` of the project (a join key's alternatives)."""
    sql = file.sql
    if sql is None or not scope.implicated(file.name):
        return []  # no target this model feeds has a row off: nothing to repair here
    found: list[Repair] = []
    rows = scope.rows_of(file.name)
    wrong = scope.models.get(file.name, (0.0, 0.0))[0] if scope.models else 0.0
    for index, join in enumerate(sql.tree.find_all(exp.Join)):
        found += _join(file, sql, join, index, rows, wrong, known or {})
    for where in sql.tree.find_all(exp.Where, exp.Having):
        found += _filter(file, sql, where, rows)
    for group in sql.tree.find_all(exp.Group):
        found += _group(file, sql, group, rows)
    for alias, node in projections(sql.tree):
        relevance = scope.of(alias)
        if relevance <= 0 or isinstance(node, exp.Star):
            continue
        found += _wraps(file, sql, alias, node, relevance + 0.5 * scope.downstream.get(file.name, 0.0), scale,
                        alias in nulls)  # fmt: skip
    return [r for r in found if all(file.clean(c) for c in r.changes)]


def _join(file: EditableFile, sql: SpannedSql, join: exp.Join, index: int, rows: float, wrong: float,
          known: Mapping[str, set[str]]) -> list[Repair]:  # fmt: skip
    found: list[Repair] = []
    where = f"join #{index + 1} in {file.name}"
    table = sql.token_range(join.this)
    if table is not None:
        words = []
        k = table[0] - 1
        while k >= 0 and sql.tokens[k].token_type in (TokenType.JOIN, TokenType.INNER, TokenType.LEFT,
                                                       TokenType.OUTER, TokenType.RIGHT, TokenType.FULL):  # fmt: skip
            words.insert(0, k)
            k -= 1
        text = " ".join(sql.tokens[k].text for k in words).lower()
        if words and text in ("join", "inner join"):
            change = Change(sql.tokens[words[0]].start, sql.tokens[words[-1]].end + 1, "left join")
            found.append(Repair(file.path, (change,), f"left join instead of inner join #{index + 1} in {file.name}",
                                1.0 + 3 * rows))  # fmt: skip
        elif words and text in ("left join", "left outer join"):
            change = Change(sql.tokens[words[0]].start, sql.tokens[words[-1]].end + 1, "inner join")
            found.append(Repair(file.path, (change,), f"inner join instead of left join #{index + 1} in {file.name}",
                                0.8 + 2 * rows))  # fmt: skip
    condition = join.args.get("on")
    if condition is None:
        return found
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    found += _drop_conjuncts(file, sql, conjuncts, f"the condition of {where}", 0.9 + rows, keep_one=True)
    columns: dict[
        str, set[str]
    ] = {}  # qualifier -> the column names the model reads through it, or knows of it
    for column in sql.tree.find_all(exp.Column):
        columns.setdefault(column.table, set()).add(column.name)
    for qualifier, relation in relation_of(file).items():
        columns.setdefault(qualifier, set()).update(known.get(relation, ()))
    for equal in condition.find_all(exp.EQ):
        for side in (equal.this, equal.expression):
            if not isinstance(side, exp.Column):
                continue
            options = sorted(n for n in columns.get(side.table, ()) if n != side.name and _keyish(n))
            identifier = side.args.get("this")
            for option in options[:6]:
                change = sql.replace_node(identifier, option) if identifier is not None else None
                if change is not None:
                    found.append(Repair(file.path, (change,), f"{where} on {side.table}.{option} instead of "
                                        f"{side.table}.{side.name}", 1.1 + 1.5 * rows + wrong))  # fmt: skip
    for compare in condition.find_all(exp.GT, exp.GTE, exp.LT, exp.LTE):
        found += _flip(file, sql, compare, where, 1.3 + rows)
    return found


def _keyish(name: str) -> bool:
    lowered = name.lower()
    return any(lowered == k or lowered.endswith(k) or lowered.startswith(k) for k in _KEYISH)


def _flip(
    file: EditableFile, sql: SpannedSql, compare: exp.Expression, where: str, weight: float
) -> list[Repair]:
    between = sql.between(compare.this, compare.expression)
    if len(between) != 1 or type(compare) not in _FLIP:
        return []
    new = _FLIP[type(compare)]
    text = (sql.source(compare) or "")[:50]
    return [Repair(file.path, (sql.replace_token(between[0][0], new),),
                   f"{where}: {new} instead of {between[0][1].text} in {text}", weight)]  # fmt: skip


def _filter(file: EditableFile, sql: SpannedSql, where: exp.Expression, rows: float) -> list[Repair]:
    kind = "having" if isinstance(where, exp.Having) else "filter"
    condition = where.this
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    found = _drop_conjuncts(file, sql, conjuncts, f"the {kind} of {file.name}", 0.5 + 2 * rows)
    if len(conjuncts) == 1:  # the only condition: drop the clause
        span, head = sql.span(condition), sql.token_range(condition)
        if span is not None and head is not None and head[0] > 0:
            keyword = sql.tokens[head[0] - 1]
            if keyword.text.upper() in ("WHERE", "HAVING"):
                text = (sql.source(condition) or "")[:60]
                found.append(Repair(file.path, (Change(keyword.start, span[1], ""),),
                                    f"drop {kind} {text} in {file.name}", 0.5 + 2 * rows))  # fmt: skip
    for compare in condition.find_all(*_FLIP):
        found += _flip(file, sql, compare, f"the {kind} of {file.name}", 1.0 + rows)
        for literal in compare.find_all(exp.Literal):
            found += _nudged(file, sql, literal, f"the {kind} of {file.name}", 0.8 + rows)
    return found


def _drop_conjuncts(file: EditableFile, sql: SpannedSql, conjuncts: list[exp.Expression], where: str,
                    weight: float, keep_one: bool = False) -> list[Repair]:  # fmt: skip
    """One repair per AND-ed condition: the condition dropped with the AND that joins it."""
    if len(conjuncts) < 2:
        return []
    spans = [sql.span(c) for c in conjuncts]
    if any(s is None for s in spans):
        return []
    found = []
    for k, conjunct in enumerate(conjuncts):
        start = spans[k][0] if k == 0 else spans[k - 1][1]  # type: ignore[index]
        end = spans[k + 1][0] if k == 0 else spans[k][1]  # type: ignore[index]
        text = (sql.source(conjunct) or "")[:60]
        found.append(Repair(file.path, (Change(start, end, ""),), f"drop {text} from {where}", weight))
    return found if not keep_one or len(conjuncts) > 1 else []


def _group(file: EditableFile, sql: SpannedSql, group: exp.Group, rows: float) -> list[Repair]:
    """A GROUP BY column too many: each column dropped (when there are several)."""
    items = list(group.expressions)
    spans = [sql.span(i) for i in items]
    if len(items) < 2 or any(s is None for s in spans):
        return []
    found = []
    for k, item in enumerate(items):
        start = spans[k][0] if k == 0 else spans[k - 1][1]  # type: ignore[index]
        end = spans[k + 1][0] if k == 0 else spans[k][1]  # type: ignore[index]
        found.append(Repair(file.path, (Change(start, end, ""),),
                            f"group {file.name} without {sql.source(item)}", 1.5 + 4 * rows))  # fmt: skip
    return found


def _wraps(file: EditableFile, sql: SpannedSql, alias: str, node: exp.Expression, relevance: float,
           scale: tuple[float, set[str]] | None, nulls: bool) -> list[Repair]:  # fmt: skip
    """A projection scaled by the unit factor the rows show, or COALESCE'd to 0 where the rows got NULL."""
    span = sql.span(node)
    if span is None:
        return []
    text = sql.text[span[0] : span[1]]
    named = f" as {alias}" if isinstance(node.parent, exp.Select) else ""  # a bare column keeps its name
    label = f"{file.name}.{alias}"
    found = []
    if scale is not None and alias in scale[1] and not isinstance(node, (exp.Case, exp.Count)):
        factor = scale[0]
        wrapped = f"({text}) / {factor:g}" if factor >= 1 else f"({text}) * {1 / factor:g}"
        found.append(Repair(file.path, (Change(span[0], span[1], wrapped + named),),
                            f"scale {label} by 1/{factor:g} (unit)", 3.0 + relevance))  # fmt: skip
    if nulls:
        found.append(Repair(file.path, (Change(span[0], span[1], f"coalesce({text}, 0){named}"),),
                            f"coalesce {label} to 0", 1.0 + relevance))  # fmt: skip
    if isinstance(node, exp.Coalesce) and node.this is not None:
        inner = sql.source(node.this)
        if inner:
            found.append(Repair(file.path, (Change(span[0], span[1], inner + named),),
                                f"{label} without its COALESCE", 0.9 + relevance))  # fmt: skip
    return found
